/* gemm_amx.c - the AMX-BF16 path of the matmul core (Sapphire Rapids and later).
 *
 * The product is computed transposed, y^T = w . x^T, so that the WEIGHT is the A operand: an A tile is 16 rows
 * of w with 32 bf16 of k each, loaded straight from the weight as stored (row stride = the weight's row).
 * Only the activation needs a layout change - the B operand wants "VNNI" pairs [k/2][m][2] - and the activation
 * must be converted to bf16 anyway, so cpu_gemm_pack_amx does both in one pass. The weights are never copied.
 * A 32 x 32 output block uses all 8 tiles: C0..C3 accumulators, A0/A1 (two 16-row weight slices), B0/B1 (two
 * 16-token slices). */
#include <immintrin.h>

#include "compute/cpu/gemm.h"

#define TARGET __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16")))

typedef struct amx_cfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_cfg;

/* GCC's _tile_loadconfig tells the compiler it reads only 8 bytes, so stores to the rest of the config may be
 * dropped; this asm names the whole 64-byte struct as its input. */
static inline void amx_load_config(const amx_cfg *c) { __asm__ volatile("ldtilecfg %0" ::"m"(*c)); }

bool cpu_gemm_amx_ok(const cpu_gemm *g) {
    return g->tier >= KILN_CPU_AMX && g->fast && g->w_bf16 && g->K % 32 == 0 && g->N % 32 == 0 && g->ldw % 2 == 0;
}

size_t cpu_gemm_amx_packed_bytes(int64_t rows, int64_t K) { return (size_t)((rows + 31) & ~(int64_t)31) * (size_t)K * 2; }

TARGET void cpu_gemm_pack_amx(uint16_t *dst, const float *x, int64_t ldx, int64_t M, int64_t K, int64_t r0, int64_t r1) {
    for (int64_t grp = r0 / 16; grp * 16 < r1; grp++) {
        uint16_t *base = dst + grp * 16 * K;
        for (int r = 0; r < 16; r++) {
            int64_t row = grp * 16 + r;
            uint32_t *out = (uint32_t *)(base + r * 2); /* one k pair per 32-bit word, 16 words apart */
            if (row >= M) {
                for (int64_t kp = 0; kp < K / 2; kp++) out[kp * 16] = 0;
                continue;
            }
            const float *xr = x + row * ldx;
            int64_t kp = 0;
            for (; kp + 16 <= K / 2; kp += 16) {
                __m512 lo = _mm512_loadu_ps(xr + 2 * kp), hi = _mm512_loadu_ps(xr + 2 * kp + 16);
                __m512i pairs = (__m512i)_mm512_cvtne2ps_pbh(hi, lo); /* 32 bf16 = 16 (even, odd) pairs */
                uint32_t tmp[16];
                _mm512_storeu_si512(tmp, pairs);
                for (int t = 0; t < 16; t++) out[(kp + t) * 16] = tmp[t];
            }
            for (; kp < K / 2; kp++)
                out[kp * 16] = (uint32_t)f32_to_bf16(xr[2 * kp]) | (uint32_t)f32_to_bf16(xr[2 * kp + 1]) << 16;
        }
    }
}

TARGET void cpu_gemm_block_amx(const cpu_gemm *g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    amx_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.colsb[t] = 64;
        cfg.rows[t] = 16;
    }
    amx_load_config(&cfg);
    const uint16_t *w = g->w;
    int64_t K = g->K, wstride = g->ldw * 2;
    float cbuf[4][16 * 16] __attribute__((aligned(64)));
    for (int64_t n = n0; n < n1; n += 32) {
        const uint16_t *w0 = w + n * g->ldw, *w1 = w0 + 16 * g->ldw;
        for (int64_t m = m0; m < m1; m += 32) {
            const uint16_t *b0 = g->xb + m * K, *b1 = b0 + 16 * K;
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            for (int64_t k = 0; k < K; k += 32) {
                _tile_loadd(4, w0 + k, wstride);
                _tile_loadd(6, b0 + k * 16, 64);
                _tile_dpbf16ps(0, 4, 6);
                _tile_loadd(7, b1 + k * 16, 64);
                _tile_dpbf16ps(1, 4, 7);
                _tile_loadd(5, w1 + k, wstride);
                _tile_dpbf16ps(2, 5, 6);
                _tile_dpbf16ps(3, 5, 7);
            }
            _tile_stored(0, cbuf[0], 64);
            _tile_stored(1, cbuf[1], 64);
            _tile_stored(2, cbuf[2], 64);
            _tile_stored(3, cbuf[3], 64);
            /* C tiles are [n][m]: element (m, n) of the output sits at n*16 + m */
            int64_t mlim = g->M < m1 ? g->M : m1;
            int mr0 = mlim - m >= 16 ? 16 : (int)(mlim - m);
            int mr1 = mlim - m - 16 >= 16 ? 16 : (int)(mlim - m - 16);
            if (mr0 > 0) {
                cpu_gemm_store(g, m, mr0, n, 16, cbuf[0], 1, 16);
                cpu_gemm_store(g, m, mr0, n + 16, 16, cbuf[2], 1, 16);
            }
            if (mr1 > 0) {
                cpu_gemm_store(g, m + 16, mr1, n, 16, cbuf[1], 1, 16);
                cpu_gemm_store(g, m + 16, mr1, n + 16, 16, cbuf[3], 1, 16);
            }
        }
    }
    _tile_release();
}

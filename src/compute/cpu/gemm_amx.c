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

#define TARGET __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16,prfchw")))

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

/* Transposes the 16 x 16 f32 tile t (row stride 16) in registers: r[i] = column i of t. */
TARGET static inline void transpose16(const float *t, __m512 r[16]) {
    __m512 a[16], b[16];
    for (int i = 0; i < 16; i++) a[i] = _mm512_load_ps(t + 16 * i);
    for (int i = 0; i < 16; i += 2) { /* interleave pairs of rows: 32-bit elements */
        b[i] = _mm512_unpacklo_ps(a[i], a[i + 1]);
        b[i + 1] = _mm512_unpackhi_ps(a[i], a[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) { /* 64-bit elements */
        a[i] = (__m512)_mm512_unpacklo_pd((__m512d)b[i], (__m512d)b[i + 2]);
        a[i + 1] = (__m512)_mm512_unpackhi_pd((__m512d)b[i], (__m512d)b[i + 2]);
        a[i + 2] = (__m512)_mm512_unpacklo_pd((__m512d)b[i + 1], (__m512d)b[i + 3]);
        a[i + 3] = (__m512)_mm512_unpackhi_pd((__m512d)b[i + 1], (__m512d)b[i + 3]);
    }
    /* now a[4q + j] holds, in each 128-bit lane L, elements (row 4q..4q+3, column 4L + j); gather lanes */
    for (int i = 0; i < 4; i++) {
        __m512 x0 = _mm512_shuffle_f32x4(a[i], a[4 + i], 0x88), x1 = _mm512_shuffle_f32x4(a[i], a[4 + i], 0xdd);
        __m512 y0 = _mm512_shuffle_f32x4(a[8 + i], a[12 + i], 0x88), y1 = _mm512_shuffle_f32x4(a[8 + i], a[12 + i], 0xdd);
        r[i] = _mm512_shuffle_f32x4(x0, y0, 0x88);
        r[8 + i] = _mm512_shuffle_f32x4(x0, y0, 0xdd);
        r[4 + i] = _mm512_shuffle_f32x4(x1, y1, 0x88);
        r[12 + i] = _mm512_shuffle_f32x4(x1, y1, 0xdd);
    }
}

TARGET void cpu_gemm_pack_amx(uint16_t *dst, const float *x, int64_t ldx, int64_t M, int64_t K, int64_t r0, int64_t r1) {
    const float zero[32] __attribute__((aligned(64))) = {0};
    float t[16][16] __attribute__((aligned(64)));
    for (int64_t grp = r0 / 16; grp * 16 < r1; grp++) {
        uint16_t *base = dst + grp * 16 * K;
        const float *rows[16];
        for (int r = 0; r < 16; r++) rows[r] = grp * 16 + r < M ? x + (grp * 16 + r) * ldx : NULL;
        int64_t k = 0;
        /* 32 k of 16 rows: each row -> 16 bf16 pairs (one 32-bit word per pair); transposing the 16 x 16 words
         * gives the 16 tile rows "pair p of the 16 rows" */
        for (; k + 32 <= K; k += 32) {
            for (int r = 0; r < 16; r++) {
                const float *src = rows[r] ? rows[r] + k : zero;
                __m512i pr = (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + 16), _mm512_loadu_ps(src));
                _mm512_store_si512(t[r], pr);
            }
            __m512 c[16];
            transpose16(&t[0][0], c);
            for (int p = 0; p < 16; p++) _mm512_storeu_si512(base + (k / 2 + p) * 32, (__m512i)c[p]);
        }
        for (; k < K; k += 2) /* K % 32 == 0 on the AMX path; kept for completeness */
            for (int r = 0; r < 16; r++) {
                uint32_t *out = (uint32_t *)(base + r * 2);
                out[(k / 2) * 16] = rows[r] ? (uint32_t)f32_to_bf16(rows[r][k]) | (uint32_t)f32_to_bf16(rows[r][k + 1]) << 16 : 0;
            }
    }
}

/* Stores a 16 x 16 C tile (laid out [n][m]) into output rows m.. (mr of them), columns n..n+15, with the
 * epilogue. Token-major outputs (ys_n == 1) transpose the tile in registers; others use the generic path. */
TARGET static void store_tile(const cpu_gemm *g, int64_t m, int mr, int64_t n, const float *tile) {
    if (g->ys_n != 1) {
        cpu_gemm_store(g, m, mr, n, 16, tile, 1, 16);
        return;
    }
    __m512 bias = _mm512_setzero_ps(), gate = _mm512_setzero_ps(), r[16];
    if (g->bias.p) {
        if (g->bias.bf16)
            bias = _mm512_castsi512_ps(_mm512_slli_epi32(
                _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)g->bias.p + n))), 16));
        else
            bias = _mm512_loadu_ps((const float *)g->bias.p + n);
    }
    if (g->epi == KILN_EPI_GATED_RESIDUAL) gate = _mm512_loadu_ps(g->gate + n);
    transpose16(tile, r);
    for (int i = 0; i < mr; i++) {
        __m512 v = _mm512_add_ps(r[i], bias);
        float *yp = g->y + (m + i) * g->ys_m + n;
        if (g->epi == KILN_EPI_ADD) v = _mm512_add_ps(_mm512_loadu_ps(yp), v);
        else if (g->epi == KILN_EPI_GATED_RESIDUAL) v = _mm512_fmadd_ps(gate, v, _mm512_loadu_ps(yp));
        _mm512_storeu_ps(yp, v);
    }
}

/* Block loop: K in slices of AMX_KC. Within a slice the packed activation rows of the block (AMX_MB x AMX_KC
 * bf16 = 128 KB) stay in L2 while every 32 weight rows pass over them, and those two 16-row weight tiles
 * (32 x AMX_KC bf16 = 16 KB) stay in L1 while every 32-row slice of the activation streams past. The f32
 * partial sums of the whole block live in a stack buffer between slices (loaded into and stored from the C
 * tiles: 8 KB of traffic per 64 tile products). */
#define AMX_KC 256
#define AMX_MB 256 /* rows per pass */
#define AMX_NB 128 /* columns per pass */

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
    const int64_t K = g->K;
    uint16_t wpanel[AMX_KC / 32 * 32 * 32] __attribute__((aligned(64))); /* 16 KB; on the stack, not TLS */
    /* partial sums: [column pair of 16 / 32 columns][row tile of 16][2 halves of 16 columns][16 x 16] */
    float acc[AMX_NB / 32][AMX_MB / 16][2][256] __attribute__((aligned(64))); /* 128 KB on the stack */
    for (int64_t nb = n0; nb < n1; nb += AMX_NB) {
        const int64_t ne = nb + AMX_NB < n1 ? nb + AMX_NB : n1;
        for (int64_t mb = m0; mb < m1; mb += AMX_MB) {
            const int64_t me = mb + AMX_MB < m1 ? mb + AMX_MB : m1;
            for (int64_t kc = 0; kc < K || kc == 0; kc += AMX_KC) {
                const int64_t ke = kc + AMX_KC < K ? kc + AMX_KC : K;
                for (int64_t n = nb; n < ne; n += 32) {
                    /* copy the two 16-row weight tiles of every k step of this slice next to each other: read
                     * in place, rows K*2 bytes apart (6 KB for K = 3072) fall into the same few L1 sets and evict
                     * each other; packed, a tile is 1 KB contiguous. */
                    for (int64_t k = kc; k < ke; k += 32)
                        for (int r = 0; r < 32; r++)
                            _mm512_store_si512(wpanel + ((k - kc) / 32 * 32 + r) * 32,
                                               _mm512_loadu_si512(w + (n + r) * g->ldw + k));
                    const uint16_t *w0 = wpanel - kc * 32, *w1 = w0 + 16 * 32;
                    float(*a)[2][256] = acc[(n - nb) / 32];
                    /* prefetch the next panel's weight rows (the next 32 columns, or the next K slice) into L2
                     * while this one computes: read in place they come from L3 or DRAM, 32 rows at a time */
                    const int64_t pn = n + 32 < ne ? n + 32 : nb, pk = n + 32 < ne ? kc : ke;
                    const int64_t pke = pk + AMX_KC < K ? pk + AMX_KC : K;
                    int64_t pf_row = 0, pf_rows = pk < K ? 32 : 0, n_msteps = (me - mb + 31) / 32;
                    for (int64_t m = mb; m < me; m += 32) {
                        const int64_t t = (m - mb) / 16;
                        const uint16_t *b0 = g->xb + m * K, *b1 = b0 + 16 * K;
                        for (int64_t e = pf_row + (pf_rows + n_msteps - 1) / n_msteps; pf_row < e && pf_row < pf_rows; pf_row++)
                            for (int64_t k = pk; k < pke; k += 32) _mm_prefetch((const char *)(w + (pn + pf_row) * g->ldw + k), _MM_HINT_T1);
                        /* last K slice: take ownership of this step's share of the block's output lines
                         * (rows m..m+31, columns n..n+31) now, so the epilogue's stores after the slice hit the
                         * cache instead of each waiting for a read-for-ownership (writing y cold cost ~25%) */
                        if (ke >= K && g->ys_n == 1)
                            for (int64_t r = m; r < m + 32 && r < g->M; r++) {
                                float *yp = g->y + r * g->ys_m + n;
                                __builtin_prefetch(yp, 1, 3);
                                __builtin_prefetch(yp + 16, 1, 3);
                            }
                        if (kc == 0) {
                            _tile_zero(0);
                            _tile_zero(1);
                            _tile_zero(2);
                            _tile_zero(3);
                        } else {
                            _tile_loadd(0, a[t][0], 64);
                            _tile_loadd(1, a[t + 1][0], 64);
                            _tile_loadd(2, a[t][1], 64);
                            _tile_loadd(3, a[t + 1][1], 64);
                        }
                        for (int64_t k = kc; k < ke; k += 32) {
                            _tile_loadd(4, w0 + k * 32, 64);
                            _tile_loadd(6, b0 + k * 16, 64);
                            _tile_dpbf16ps(0, 4, 6);
                            _tile_loadd(7, b1 + k * 16, 64);
                            _tile_dpbf16ps(1, 4, 7);
                            _tile_loadd(5, w1 + k * 32, 64);
                            _tile_dpbf16ps(2, 5, 6);
                            _tile_dpbf16ps(3, 5, 7);
                        }
                        _tile_stored(0, a[t][0], 64);
                        _tile_stored(1, a[t + 1][0], 64);
                        _tile_stored(2, a[t][1], 64);
                        _tile_stored(3, a[t + 1][1], 64);
                    }
                }
                if (K == 0) break;
            }
            /* C tiles are [n][m]: element (m, n) of the output sits at n*16 + m */
            const int64_t mlim = g->M < me ? g->M : me;
            for (int64_t m = mb; m < mlim; m += 16) /* row by row: each output row gets AMX_NB floats in a run */
                for (int64_t n = nb; n < ne; n += 32) {
                    const int64_t t = (m - mb) / 16;
                    const int mr = mlim - m >= 16 ? 16 : (int)(mlim - m);
                    store_tile(g, m, mr, n, acc[(n - nb) / 32][t][0]);
                    store_tile(g, m, mr, n + 16, acc[(n - nb) / 32][t][1]);
                }
        }
    }
    _tile_release();
}

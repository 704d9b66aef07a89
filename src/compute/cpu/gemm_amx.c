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
#include "compute/cpu/transpose_avx512.h"

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
 * epilogue. Token-major outputs (ys_n == 1) transpose the tile in registers; others use the generic path. A plain
 * store (no epilogue reads y) of whole aligned lines is non-temporal: the output is written once here and is too
 * big to stay in L2, and a normal store would first read each cold line from memory (read-for-ownership). */
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
    const bool stream = g->epi == KILN_EPI_NONE && ((uintptr_t)(g->y + n) & 63) == 0 && (g->ys_m & 15) == 0;
    for (int i = 0; i < mr; i++) {
        __m512 v = _mm512_add_ps(r[i], bias);
        float *yp = g->y + (m + i) * g->ys_m + n;
        if (g->epi == KILN_EPI_ADD) v = _mm512_add_ps(_mm512_loadu_ps(yp), v);
        else if (g->epi == KILN_EPI_GATED_RESIDUAL) v = _mm512_fmadd_ps(gate, v, _mm512_loadu_ps(yp));
        if (stream) _mm512_stream_ps(yp, v);
        else _mm512_storeu_ps(yp, v);
    }
}

/* The block loop (measured against other orders in docs/cpu-backend.md, "third pass").
 *
 * Two facts of this core shape it: the tile loop runs near the AMX rate only when the C tiles stay in tiles for
 * many k steps (storing and reloading them every 8 steps cost ~20-30%), and when both operands stream from L2
 * in contiguous 1 KB tiles (tiles read in place from weight rows 6 KB apart, or from L3, run at half speed).
 * So a task owns up to AMX_NB output columns: their weights, for one K slice of up to AMX_KC_MAX, are copied
 * once into a contiguous per-thread panel ([32-column panel][k step][32 rows][32 k], 768 KB at most, kept in
 * L2), and then every 32 rows of the activation (one K slice: 96 KB) passes over all the panels; the C tiles
 * of a 32 x 32 output block accumulate over the whole slice. The next 32 activation rows are prefetched into L2
 * a few lines per k step while the current ones compute. With several K slices the partial sums wait in the
 * per-thread accumulator (rows x AMX_NB f32) between slices. */
#define AMX_NB 256     /* output columns per task */
#define AMX_KC_MAX 1536 /* k per slice */

/* The slice length: K cut into equal slices, each a multiple of 32 and at most AMX_KC_MAX. */
static int64_t amx_kc(int64_t K) {
    int64_t steps = K / 32, n = (K + AMX_KC_MAX - 1) / AMX_KC_MAX;
    return n > 1 ? (steps + n - 1) / n * 32 : K;
}

int64_t cpu_gemm_amx_block_n(void) { return AMX_NB; }

size_t cpu_gemm_amx_ws_bytes(int64_t rows, int64_t K) {
    int64_t kc = amx_kc(K);
    size_t pack = (size_t)AMX_NB * (size_t)(kc > 0 ? kc : 32) * 2;
    size_t acc = kc < K ? (size_t)((rows + 31) & ~(int64_t)31) * AMX_NB * 4 : 0;
    return (pack + acc + 63) & ~(size_t)63;
}

/* Copies weight rows [n, n + 32 * np) x k [kc, ke) into the panel layout, row by row: each row's slice is one
 * sequential read the hardware prefetcher can follow (the weights mostly come from DRAM: a DiT step reads
 * every weight once), scattered into the panel in L2. */
TARGET static void pack_panels(const cpu_gemm *g, uint16_t *wp, int64_t n, int np, int64_t kc, int64_t ke) {
    const uint16_t *w = g->w;
    const int64_t ksteps = (ke - kc) / 32;
    for (int p = 0; p < np; p++)
        for (int r = 0; r < 32; r++) {
            const uint16_t *src = w + (n + p * 32 + r) * g->ldw + kc;
            uint16_t *dst = wp + (p * ksteps * 32 + r) * 32;
            for (int64_t ks = 0; ks < ksteps; ks++) _mm512_store_si512(dst + ks * 1024, _mm512_loadu_si512(src + ks * 32));
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
    const int64_t K = g->K, kcl = amx_kc(K);
    uint16_t *wp = g->ws;
    float *accbuf = (float *)((char *)g->ws + (size_t)AMX_NB * (size_t)(kcl > 0 ? kcl : 32) * 2);
    float ct[4][256] __attribute__((aligned(64)));
    for (int64_t nb = n0; nb < n1; nb += AMX_NB) {
        const int64_t ne = nb + AMX_NB < n1 ? nb + AMX_NB : n1;
        const int np = (int)((ne - nb) / 32);
        for (int64_t kc = 0; kc < K || kc == 0; kc += kcl) {
            const int64_t ke = kc + kcl < K ? kc + kcl : K, ksteps = (ke - kc) / 32;
            const bool first = kc == 0, last = ke >= K;
            pack_panels(g, wp, nb, np, kc, ke);
            for (int64_t m = m0; m < m1; m += 32) {
                const uint16_t *b0 = g->xb + m * K + kc * 16, *b1 = b0 + 16 * K;
                /* the next 32 rows' slice: 2 x ksteps KB, spread over this step's np * ksteps tile steps */
                const char *nx = (const char *)(g->xb + (m + 32) * K + kc * 16);
                const int64_t half = ksteps * 16, pf_end = m + 32 < m1 ? 2 * half : 0;
                const int64_t per = (2 * half + np * ksteps - 1) / (np * ksteps > 0 ? np * ksteps : 1);
                int64_t pf = 0;
                for (int p = 0; p < np; p++) {
                    float(*acc)[256] = (float(*)[256])(accbuf + ((m - m0) / 32 * AMX_NB + p * 32) * 32);
                    if (first) {
                        _tile_zero(0);
                        _tile_zero(1);
                        _tile_zero(2);
                        _tile_zero(3);
                    } else {
                        _tile_loadd(0, acc[0], 64);
                        _tile_loadd(1, acc[1], 64);
                        _tile_loadd(2, acc[2], 64);
                        _tile_loadd(3, acc[3], 64);
                    }
                    if (!last && (p + 1 < np || m + 32 < m1)) /* the partial sums the next panel reloads */
                        for (int l = 0; l < 64; l++) _mm_prefetch((const char *)acc[4] + l * 64, _MM_HINT_T1);
                    const uint16_t *a = wp + (int64_t)p * ksteps * 1024;
                    /* an epilogue that reads y (ADD, GATED_RESIDUAL) finds its 32 rows x 32 columns owned in cache:
                     * prefetch-for-write, two lines per k step, long before the stores at the end of the slice */
                    float *yo = g->y + m * g->ys_m + nb + p * 32;
                    const int64_t yo_lines = last && g->epi != KILN_EPI_NONE && g->ys_n == 1
                                                 ? 2 * (g->M - m < 32 ? g->M - m : 32) : 0;
                    int64_t yl = 0;
                    for (int64_t ks = 0; ks < ksteps; ks++) {
                        _tile_loadd(4, a + ks * 1024, 64);
                        _tile_loadd(6, b0 + ks * 512, 64);
                        _tile_dpbf16ps(0, 4, 6);
                        _tile_loadd(7, b1 + ks * 512, 64);
                        _tile_dpbf16ps(1, 4, 7);
                        _tile_loadd(5, a + ks * 1024 + 512, 64);
                        _tile_dpbf16ps(2, 5, 6);
                        _tile_dpbf16ps(3, 5, 7);
                        for (int64_t q = 0; q < per && pf < pf_end; q++, pf++)
                            _mm_prefetch(nx + (pf < half ? pf * 64 : 16 * K * 2 + (pf - half) * 64), _MM_HINT_T1);
                        for (int q = 0; q < 2 && yl < yo_lines; q++, yl++)
                            __builtin_prefetch(yo + (yl >> 1) * g->ys_m + (yl & 1) * 16, 1, 3);
                    }
                    if (!last) {
                        _tile_stored(0, acc[0], 64);
                        _tile_stored(1, acc[1], 64);
                        _tile_stored(2, acc[2], 64);
                        _tile_stored(3, acc[3], 64);
                        continue;
                    }
                    _tile_stored(0, ct[0], 64);
                    _tile_stored(1, ct[1], 64);
                    _tile_stored(2, ct[2], 64);
                    _tile_stored(3, ct[3], 64);
                    /* C tiles are [n][m]: tile 0 = rows m..m+15 x cols n..n+15, 1 = rows +16, 2 = cols +16 */
                    const int64_t n = nb + p * 32;
                    for (int h = 0; h < 2; h++) {
                        const int64_t r = m + 16 * h;
                        if (r >= g->M) break;
                        const int mr = g->M - r >= 16 ? 16 : (int)(g->M - r);
                        store_tile(g, r, mr, n, ct[h]);
                        store_tile(g, r, mr, n + 16, ct[2 + h]);
                    }
                }
            }
            if (K == 0) break;
        }
    }
    _tile_release();
    _mm_sfence(); /* the non-temporal stores are weakly ordered: make them visible before the task ends */
}

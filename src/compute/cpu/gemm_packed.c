/* gemm_packed.c - the packed-panel matmul kernel of the AVX2 and AVX-512 tiers (see gemm.h).
 *
 * Why it exists: the 4 x 4 dot-product tiles (gemm_avx2.c, gemm_avx512.c) read weights as stored but end every
 * tile in horizontal sums and load both operands per FMA; OpenBLAS's packed sgemm ran 2.8x (AVX2) and 1.7x
 * (AVX-512 without AMX) faster on the DiT shapes (docs/cpu-backend.md). Here a task widens its weight columns
 * once per K slice into an f32 panel, laid out [column group of NR][k][NR], and the micro-kernel keeps MR x NR
 * sums in registers: per k it loads NR/VL panel vectors and broadcasts MR x values. The panel is a transient,
 * per-thread buffer (GEMM_PACKED_BN x GEMM_PACKED_KC floats = 128 KB), not an f32 copy of the weight. */
#include "compute/cpu/gemm.h"

bool cpu_gemm_packed_ok(const cpu_gemm *g, bool prefer_dot) {
    if (g->amx || g->tier < KILN_CPU_AVX2) return false;
    return !(g->tier >= KILN_CPU_AVX512 && g->fast && prefer_dot);
}

size_t cpu_gemm_packed_ws_bytes(void) {
    return sizeof(float) * ((size_t)GEMM_PACKED_BN * GEMM_PACKED_KC + (size_t)GEMM_PACKED_BM * GEMM_PACKED_BN);
}

/* Widens weight rows [n0, n1) x k [kc, ke) into the panel; columns n1.. of the last group are zero. */
static void pack_panel(const cpu_gemm *g, float *panel, int64_t n0, int64_t n1, int64_t ncols, int64_t kc,
                       int64_t ke, int nr) {
    const int64_t kl = ke - kc;
    for (int64_t j = 0; j < ncols; j++) {
        float *dst = panel + (j / nr) * kl * nr + j % nr;
        if (n0 + j >= n1) {
            for (int64_t k = 0; k < kl; k++) dst[k * nr] = 0.0f;
        } else if (g->w_bf16) {
            const uint16_t *src = (const uint16_t *)g->w + (n0 + j) * g->ldw + kc;
            for (int64_t k = 0; k < kl; k++) dst[k * nr] = bf16_to_f32(src[k]);
        } else {
            const float *src = (const float *)g->w + (n0 + j) * g->ldw + kc;
            for (int64_t k = 0; k < kl; k++) dst[k * nr] = src[k];
        }
    }
}

void cpu_gemm_block_packed(const cpu_gemm *g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    const bool wide = g->tier >= KILN_CPU_AVX512;
    const int mr = wide ? GEMM_AVX512_MR : GEMM_AVX2_MR, nr = wide ? GEMM_AVX512_NR : GEMM_AVX2_NR;
    const cpu_gemm_micro_fn micro = wide ? cpu_gemm_micro_avx512 : cpu_gemm_micro_avx2;
    const int64_t ncols = (n1 - n0 + nr - 1) / nr * nr, K = g->K;
    float *panel = g->ws, *acc = panel + (size_t)GEMM_PACKED_BN * GEMM_PACKED_KC;
    /* the accumulator rows of the block, rounded up to MR (rows past m1 compute copies of row m1 - 1 and are
     * never stored) */
    if (K == 0) memset(acc, 0, sizeof(float) * (size_t)((m1 - m0 + mr - 1) / mr * mr) * GEMM_PACKED_BN);
    for (int64_t kc = 0; kc < K; kc += GEMM_PACKED_KC) {
        const int64_t ke = kc + GEMM_PACKED_KC < K ? kc + GEMM_PACKED_KC : K, kl = ke - kc;
        pack_panel(g, panel, n0, n1, ncols, kc, ke, nr);
        for (int64_t m = m0; m < m1; m += mr) {
            const float *xr[GEMM_AVX512_MR];
            for (int i = 0; i < mr; i++) xr[i] = g->x + (m + i < m1 ? m + i : m1 - 1) * g->ldx + kc;
            for (int64_t q = 0; q < ncols; q += nr)
                micro(xr, panel + q * kl, kl, acc + (m - m0) * GEMM_PACKED_BN + q, GEMM_PACKED_BN, kc == 0);
        }
    }
    cpu_gemm_store(g, m0, (int)(m1 - m0), n0, (int)(n1 - n0), acc, GEMM_PACKED_BN, 1);
}

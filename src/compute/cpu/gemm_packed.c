/* gemm_packed.c - the packed-panel matmul kernel of the AVX2 and AVX-512 tiers (see gemm.h).
 *
 * Why it exists: the 4 x 4 dot-product tiles (gemm_avx2.c, gemm_avx512.c) read weights as stored but end every
 * tile in horizontal sums and load both operands per FMA; OpenBLAS's packed sgemm ran 2.8x (AVX2) and 1.7x
 * (AVX-512 without AMX) faster on the DiT shapes (docs/cpu-backend.md). Here a task widens its weight columns
 * once per K slice into an f32 panel, laid out [column group of NR][k][NR], and the micro-kernel keeps MR x NR
 * sums in registers: per k it loads NR/VL panel vectors and broadcasts MR x values. The panel is a transient,
 * per-thread buffer (GEMM_PACKED_BN x GEMM_PACKED_KC floats = 128 KB), not an f32 copy of the weight. */
#include "compute/cpu/gemm.h"

void cpu_gemm_select_packed(cpu_gemm *g, bool prefer_dot) {
    g->packed = !g->amx && g->tier >= KILN_CPU_AVX2;
    g->dot = g->packed && g->tier >= KILN_CPU_AVX512 && g->fast && g->w_bf16 && prefer_dot;
}

int cpu_gemm_packed_mr(kiln_cpu_tier tier) { return tier >= KILN_CPU_AVX512 ? GEMM_AVX512_MR : GEMM_AVX2_MR; }

size_t cpu_gemm_packed_x_floats(int64_t rows, int64_t K, kiln_cpu_tier tier) {
    const int mr = cpu_gemm_packed_mr(tier);
    return (size_t)((rows + mr - 1) / mr * mr) * (size_t)K;
}

/* One group's broadcasts then come from one sequential stream at fixed offsets (a single pointer register),
 * instead of MR row streams whose rows may lie a multiple of 4 KB apart and share L1 sets. */
void cpu_gemm_pack_x(float *dst, const float *x, int64_t ldx, int64_t M, int64_t K, int64_t r0, int64_t r1,
                     bool fast, bool dot, kiln_cpu_tier tier) {
    const int mr = cpu_gemm_packed_mr(tier);
    const int64_t kw = dot ? (K + 1) / 2 : K; /* 32-bit words per row: f32 values, or bf16 pairs for dot */
    for (int64_t m = r0; m < r1; m++) {
        float *d = dst + (m / mr) * mr * kw + m % mr;
        if (m >= M) {
            for (int64_t k = 0; k < kw; k++) d[k * mr] = 0.0f;
            continue;
        }
        const float *src = x + m * ldx;
        if (dot) { /* word p: k = 2p in the low half, 2p + 1 in the high half (zero past an odd K) */
            uint32_t *dw = (uint32_t *)d;
            for (int64_t p = 0; p < K / 2; p++)
                dw[p * mr] = (uint32_t)f32_to_bf16(src[2 * p]) | (uint32_t)f32_to_bf16(src[2 * p + 1]) << 16;
            if (K % 2) dw[(K / 2) * mr] = f32_to_bf16(src[K - 1]);
        } else if (fast) {
            for (int64_t k = 0; k < K; k++) d[k * mr] = round_bf16(src[k]);
        } else {
            for (int64_t k = 0; k < K; k++) d[k * mr] = src[k];
        }
    }
}

size_t cpu_gemm_packed_ws_bytes(void) {
    /* panel, accumulators, and the widened rows of a quantised weight's slice (gemm_quant.c) */
    return sizeof(float) * (2 * (size_t)GEMM_PACKED_BN * GEMM_PACKED_KC + (size_t)GEMM_PACKED_BM * GEMM_PACKED_BN);
}

void cpu_gemm_block_packed(const cpu_gemm *g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    const bool wide = g->tier >= KILN_CPU_AVX512, dot = g->dot;
    const int mr = wide ? GEMM_AVX512_MR : GEMM_AVX2_MR, nr = wide ? GEMM_AVX512_NR : GEMM_AVX2_NR;
    const cpu_gemm_micro_fn micro = dot ? cpu_gemm_micro_dot_avx512 : wide ? cpu_gemm_micro_avx512 : cpu_gemm_micro_avx2;
    /* the bf16 variant counts x and panel rows in pairs of k (32-bit words), over slices twice as long */
    const int64_t ncols = (n1 - n0 + nr - 1) / nr * nr, K = g->K, kcs = dot ? GEMM_PACKED_KC_DOT : GEMM_PACKED_KC;
    const int64_t xk = dot ? (K + 1) / 2 : K; /* x words per row of a group */
    float *panel = g->ws, *acc = panel + (size_t)GEMM_PACKED_BN * GEMM_PACKED_KC;
    /* the accumulator rows of the block, rounded up to MR (rows past M are packed as zeros, rows past m1 are
     * never stored) */
    if (K == 0) memset(acc, 0, sizeof(float) * (size_t)((m1 - m0 + mr - 1) / mr * mr) * GEMM_PACKED_BN);
    for (int64_t kc = 0; kc < K; kc += kcs) {
        const int64_t ke = kc + kcs < K ? kc + kcs : K, kl = dot ? (ke - kc + 1) / 2 : ke - kc;
        if (g->wq != KILN_DT_F32)
            cpu_gemm_pack_panel_quant(g, panel, acc + (size_t)GEMM_PACKED_BM * GEMM_PACKED_BN, n0, n1, ncols, kc, ke, nr);
        else if (dot) cpu_gemm_pack_panel_dot_avx512(g, panel, n0, n1, ncols, kc, ke);
        else (wide ? cpu_gemm_pack_panel_avx512 : cpu_gemm_pack_panel_avx2)(g, panel, n0, n1, ncols, kc, ke);
        /* the next slice's weight lines, prefetched into L2 a few per micro-kernel call: the pack then finds them
         * there instead of waiting on memory (a DiT step reads each weight from DRAM) */
        const int64_t ne = ke + kcs < K ? ke + kcs : K, wsz = g->w_bf16 ? 2 : 4;
        /* (a quantised weight's rows are not wsz-byte elements: no prefetch; its slices are smaller anyway) */
        const int64_t row_lines = ((ne - ke) * wsz + 63) / 64, pf_lines = g->wq != KILN_DT_F32 ? 0 : (n1 - n0) * row_lines;
        const int64_t calls = (m1 - m0 + mr - 1) / mr * (ncols / nr), per = (pf_lines + calls - 1) / calls;
        const char *wnext = (const char *)g->w + ke * wsz;
        int64_t pf = 0;
        for (int64_t m = m0; m < m1; m += mr) {
            /* group m / mr starts at (m / mr) * mr * xk words; this slice at word (kc / 2 for dot) * mr */
            const float *xp = g->x + m * xk + (dot ? kc / 2 : kc) * mr;
            for (int64_t q = 0; q < ncols; q += nr) {
                for (int64_t e = 0; e < per && pf < pf_lines; e++, pf++)
                    __builtin_prefetch(wnext + (n0 + pf / row_lines) * g->ldw * wsz + pf % row_lines * 64, 0, 2);
                micro(xp, panel + q * kl, kl, acc + (m - m0) * GEMM_PACKED_BN + q, GEMM_PACKED_BN, kc == 0);
            }
        }
    }
    cpu_gemm_store(g, m0, (int)(m1 - m0), n0, (int)(n1 - n0), acc, GEMM_PACKED_BN, 1);
}

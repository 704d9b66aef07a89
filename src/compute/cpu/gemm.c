/* gemm.c - the portable micro-kernel, the epilogue and the block loop of the matmul core (see gemm.h). */
#include "compute/cpu/gemm.h"

void cpu_gemm_store(const cpu_gemm *g, int64_t m0, int mr, int64_t n0, int nr, const float *acc, int64_t as_m,
                    int64_t as_n) {
    for (int i = 0; i < mr; i++) {
        float *yr = g->y + (m0 + i) * g->ys_m + n0 * g->ys_n;
        const float *ar = acc + i * as_m;
        for (int j = 0; j < nr; j++) {
            float v = ar[j * as_n];
            if (g->bias.p) v += param_at(&g->bias, n0 + j);
            float *yp = yr + j * g->ys_n;
            switch (g->epi) {
            case KILN_EPI_NONE: *yp = v; break;
            case KILN_EPI_ADD: *yp += v; break;
            case KILN_EPI_GATED_RESIDUAL: *yp += g->gate[n0 + j] * v; break;
            }
        }
    }
}

void cpu_gemm_tile_generic(const cpu_gemm *g, int64_t m0, int mr, int64_t n0, int nr, float *acc) {
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) {
            float s = 0;
            int64_t K = g->K;
            if (g->fast) {
                const uint16_t *xr = g->xb + (m0 + i) * g->ldxb, *wr = (const uint16_t *)g->w + (n0 + j) * g->ldw;
                for (int64_t k = 0; k < K; k++) s += bf16_to_f32(xr[k]) * bf16_to_f32(wr[k]);
            } else if (g->w_bf16) {
                const float *xr = g->x + (m0 + i) * g->ldx;
                const uint16_t *wr = (const uint16_t *)g->w + (n0 + j) * g->ldw;
                for (int64_t k = 0; k < K; k++) s += xr[k] * bf16_to_f32(wr[k]);
            } else {
                const float *xr = g->x + (m0 + i) * g->ldx, *wr = (const float *)g->w + (n0 + j) * g->ldw;
                for (int64_t k = 0; k < K; k++) s += xr[k] * wr[k];
            }
            acc[i * GEMM_NR + j] = s;
        }
}

void cpu_gemm_block(const cpu_gemm *g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    if (g->amx) {
        cpu_gemm_block_amx(g, m0, m1, n0, n1);
        return;
    }
    if (g->packed) {
        cpu_gemm_block_packed(g, m0, m1, n0, n1);
        return;
    }
    if (g->wq != KILN_DT_F32) {
        cpu_gemm_block_quant_generic(g, m0, m1, n0, n1);
        return;
    }
    /* the vector tiers always take the packed kernel (cpu_gemm_select_packed), so what is left is the portable
     * tile of CPUs below AVX2 */
    float acc[GEMM_MR * GEMM_NR];
    for (int64_t m = m0; m < m1; m += GEMM_MR) {
        int mr = m1 - m < GEMM_MR ? (int)(m1 - m) : GEMM_MR;
        for (int64_t n = n0; n < n1; n += GEMM_NR) {
            int nr = n1 - n < GEMM_NR ? (int)(n1 - n) : GEMM_NR;
            cpu_gemm_tile_generic(g, m, mr, n, nr, acc);
            cpu_gemm_store(g, m, mr, n, nr, acc, GEMM_NR, 1);
        }
    }
}

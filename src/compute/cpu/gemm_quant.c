/* gemm_quant.c - quantised weights (GGUF blocks, fp8 with a per-tensor scale) and f16 weights in the matmul core
 * (see gemm.h).
 *
 * The weight stays as the checkpoint stores it (mapped); each task widens only the K slice of its weight rows it
 * is about to use, into the per-thread pack buffers the packed kernel already has. The values are exactly those
 * of tensor/quant.h kiln_dequant (GGUF, bit-exact with the gguf package) and of fp8 -> f32 times the scale in
 * f32 (what ComfyUI's dequantisation computes before its cast), so EXACT runs of a quantised model equal f32 runs
 * on the dequantised weights. */
#include "compute/cpu/gemm.h"
#include "tensor/convert.h"
#include "tensor/quant.h"

void cpu_gemm_wq_rows(const cpu_gemm *g, float *dst, int64_t ld, int64_t n0, int64_t n1, int64_t kc, int64_t ke) {
    if (g->wq == KILN_DT_QBLOCK) {
        /* arguments were checked when the matmul was set up (whole blocks, known type): cannot fail here */
        (void)kiln_dequant_rows(dst, ld, g->wq_type, g->w, g->K, n0, n1, kc, ke, NULL);
        return;
    }
    if (g->wq == KILN_DT_F16) { /* every f16 value is exact in f32 */
        for (int64_t n = n0; n < n1; n++)
            kiln_f16_to_f32_n(dst + (n - n0) * ld, (const uint16_t *)((const uint8_t *)g->w + n * g->ldw) + kc,
                              (size_t)(ke - kc));
        return;
    }
    const float s = g->wq_scale;
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *src = (const uint8_t *)g->w + n * g->ldw + kc;
        float *d = dst + (n - n0) * ld;
        if (g->wq == KILN_DT_F8_E4M3) kiln_e4m3_to_f32_n(d, src, (size_t)(ke - kc));
        else kiln_e5m2_to_f32_n(d, src, (size_t)(ke - kc));
        if (s != 1.0f)
            for (int64_t k = 0; k < ke - kc; k++) d[k] *= s;
    }
}

void cpu_gemm_pack_panel_quant(const cpu_gemm *g, float *panel, float *tmp, int64_t n0, int64_t n1, int64_t ncols,
                               int64_t kc, int64_t ke, int nr) {
    const int64_t kl = ke - kc;
    cpu_gemm_wq_rows(g, tmp, GEMM_PACKED_KC, n0, n1, kc, ke);
    for (int64_t c = 0; c < ncols; c++) {
        float *p = panel + (c / nr) * nr * kl + c % nr;
        if (n0 + c >= n1) {
            for (int64_t k = 0; k < kl; k++) p[k * nr] = 0.0f;
            continue;
        }
        const float *src = tmp + c * GEMM_PACKED_KC;
        for (int64_t k = 0; k < kl; k++) p[k * nr] = src[k];
    }
}

void cpu_gemm_block_quant_generic(const cpu_gemm *g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    float *wt = g->ws, *acc = wt + (size_t)GEMM_PACKED_BN * GEMM_PACKED_KC;
    for (int64_t nb = n0; nb < n1; nb += GEMM_PACKED_BN) {
        const int64_t ne = nb + GEMM_PACKED_BN < n1 ? nb + GEMM_PACKED_BN : n1, nn = ne - nb;
        for (int64_t mb = m0; mb < m1; mb += GEMM_PACKED_BM) {
            const int64_t me = mb + GEMM_PACKED_BM < m1 ? mb + GEMM_PACKED_BM : m1;
            memset(acc, 0, sizeof(float) * (size_t)((me - mb) * nn));
            for (int64_t kc = 0; kc < g->K; kc += GEMM_PACKED_KC) {
                const int64_t ke = kc + GEMM_PACKED_KC < g->K ? kc + GEMM_PACKED_KC : g->K;
                cpu_gemm_wq_rows(g, wt, GEMM_PACKED_KC, nb, ne, kc, ke);
                for (int64_t m = mb; m < me; m++) {
                    const float *xr = g->x + m * g->ldx + kc;
                    for (int64_t n = 0; n < nn; n++) {
                        const float *wr = wt + n * GEMM_PACKED_KC;
                        float s = 0;
                        for (int64_t k = 0; k < ke - kc; k++) s += xr[k] * wr[k];
                        acc[(m - mb) * nn + n] += s;
                    }
                }
            }
            cpu_gemm_store(g, mb, (int)(me - mb), nb, (int)nn, acc, nn, 1);
        }
    }
}

/* lt_tn.cuh - what tests/gpu/gemm_peak.cu and tests/gpu/lt_probe.cu share: the CUDA error check, and a cuBLASLt
 * GEMM in kiln's layout (src/compute/cuda/cuda_gemm.cu): row-major y[m,n] = x[m,k] . w[n,k]^T as the
 * column-major "TN" product D[n,m] = A^T B with A = w, B = x, f32 accumulation, C = D. */
#ifndef KILN_TESTS_GPU_LT_TN_CUH
#define KILN_TESTS_GPU_LT_TN_CUH

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x)                                                                                                 \
    do {                                                                                                      \
        cudaError_t e_ = (x);                                                                                 \
        if (e_ != cudaSuccess) {                                                                              \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));                \
            exit(1);                                                                                          \
        }                                                                                                     \
    } while (0)
/* the same for a cuBLASLt call */
#define LK(x)                                                                                                 \
    do {                                                                                                      \
        cublasStatus_t s_ = (x);                                                                              \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                                    \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cublasLtGetStatusString(s_));           \
            exit(1);                                                                                          \
        }                                                                                                     \
    } while (0)

typedef struct lt_tn {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulPreference_t pref;
} lt_tn;

/* The descriptors and a preference for a workspace of ws_bytes; align16: minimum alignments of 16 bytes
 * (kiln's aligned operands); reductions: split-K reduction schemes allowed (else none). Status of the last call. */
static cublasStatus_t lt_tn_make(lt_tn *g, cudaDataType_t in, cudaDataType_t out, int m, int n, int k, size_t ws_bytes,
                                 bool align16, bool reductions) {
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    uint32_t red = reductions ? CUBLASLT_REDUCTION_SCHEME_MASK : CUBLASLT_REDUCTION_SCHEME_NONE, al = 16;
    cublasStatus_t s = cublasLtMatmulDescCreate(&g->op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&g->a, in, k, n, k);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&g->b, in, k, m, k);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&g->c, out, n, m, n);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulPreferenceCreate(&g->pref);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(g->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                                 sizeof ws_bytes);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(g->pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &red, sizeof red);
    const cublasLtMatmulPreferenceAttributes_t aligns[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4 && align16 && s == CUBLAS_STATUS_SUCCESS; i++)
        s = cublasLtMatmulPreferenceSetAttribute(g->pref, aligns[i], &al, sizeof al);
    return s;
}

/* The heuristic's best `want` algorithms for g (count in *found). */
static cublasStatus_t lt_tn_heuristic(cublasLtHandle_t lt, const lt_tn *g, int want,
                                      cublasLtMatmulHeuristicResult_t *res, int *found) {
    return cublasLtMatmulAlgoGetHeuristic(lt, g->op, g->a, g->b, g->c, g->c, g->pref, want, res, found);
}

/* y (n x m column-major, C = D) = alpha (w^T x) + beta y with algo; alpha and beta host or device pointers as
 * g->op's pointer mode says. */
static cublasStatus_t lt_tn_run(cublasLtHandle_t lt, const lt_tn *g, const cublasLtMatmulAlgo_t *algo,
                                const void *alpha, const void *w, const void *x, const void *beta, void *y, void *ws,
                                size_t ws_bytes) {
    return cublasLtMatmul(lt, g->op, alpha, w, g->a, x, g->b, beta, y, g->c, y, g->c, algo, ws, ws_bytes, 0);
}

static void lt_tn_free(lt_tn *g) {
    if (g->pref) cublasLtMatmulPreferenceDestroy(g->pref);
    if (g->a) cublasLtMatrixLayoutDestroy(g->a);
    if (g->b) cublasLtMatrixLayoutDestroy(g->b);
    if (g->c) cublasLtMatrixLayoutDestroy(g->c);
    if (g->op) cublasLtMatmulDescDestroy(g->op);
}

#endif

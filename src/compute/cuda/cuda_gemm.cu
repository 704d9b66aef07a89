/* cuda_gemm.cu - row-major y[m,n] (+)= x[m,k] . w[n,k]^T through cuBLASLt.
 *
 * cuBLASLt is column-major. A row-major [r, c] matrix with row stride ld is the column-major [c, r] matrix with
 * leading dimension ld, so the product is computed as the column-major D[n, m] = op(A)[n, k] . B[k, m] with
 * A = w (column-major [k, n], ld = ldw, transposed), B = x (column-major [k, m], ld = ldx), D = y (ld = ldy):
 * the "TN" layout, the one tensor-core GEMMs prefer (and the only one fp8 GEMMs take on sm_89/sm_90). Operands
 * are bf16 (FAST), f32 (EXACT, small f32 weights) or e4m3 (KILN_CUDA_FP8: an fp8 weight as stored times an
 * activation quantised per tensor); accumulation is f32 (CUBLAS_COMPUTE_32F, no TF32), the output f32 or, for
 * bf16 and e4m3 operands, bf16 (bf16 activations).
 *
 * fp8: the two per-tensor scales are NOT cuBLASLt's A and B scale pointers. On an H200 (sm_90, CUDA 13.0,
 * cuBLASLt 13.1) every e4m3 x e4m3 GEMM given CUBLASLT_MATMUL_DESC_A/B_SCALE_POINTER was offered algorithms by
 * the heuristic and then refused by cublasLtMatmul with CUBLAS_STATUS_NOT_SUPPORTED (bf16 and f32 outputs, any
 * shape, beta 0 or 1, with or without alignment preferences and split-K reductions), while the same GEMMs
 * without them ran (tests/gpu/lt_probe.cu). Their product goes into alpha instead, as a device pointer
 * (CUBLASLT_POINTER_MODE_DEVICE: alpha and beta both in device memory), D = (scale_w * scale_x) (A . B) +
 * beta C: kcu_quantize_fp8 writes alpha and beta beside the scales on the stream, so nothing is read on the host
 * and a captured graph replays them. A refusal at cublasLtMatmul is still reported as an fp8 error by name.
 *
 * The algorithm for a shape is picked once (kcu_gemm_pick) and pinned by the caller's cache
 * (cuda_algo_cache.h); descriptors are rebuilt per call (a few microseconds of host time, hidden behind the
 * GPU's queue; a CUDA graph removes it altogether). */
#include <cublasLt.h>

#include "compute/cuda/cuda_kernels.cuh"

#define LT_CALL(err, call)                                                                                    \
    do {                                                                                                      \
        cublasStatus_t lt_s_ = (call);                                                                        \
        if (lt_s_ != CUBLAS_STATUS_SUCCESS) {                                                                 \
            st = KILN_FAIL((err), KILN_E_DEVICE, "%s failed: %s", #call, cublasLtGetStatusString(lt_s_));     \
            goto done;                                                                                        \
        }                                                                                                     \
    } while (0)

typedef struct gemm_desc {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, c;
} gemm_desc;

static void desc_free(gemm_desc *d) {
    if (d->op) cublasLtMatmulDescDestroy(d->op);
    if (d->a) cublasLtMatrixLayoutDestroy(d->a);
    if (d->b) cublasLtMatrixLayoutDestroy(d->b);
    if (d->c) cublasLtMatrixLayoutDestroy(d->c);
}

static const char *in_name(const kcu_gemm_key *key) {
    return key->in_dtype == KILN_DT_BF16 ? "bf16" : key->in_dtype == KILN_DT_F8_E4M3 ? "e4m3" : "f32";
}

static kiln_status desc_make(const kcu_gemm_key *key, const kcu_gemm_extra *ex, gemm_desc *d, kiln_err *err) {
    kiln_status st = KILN_OK;
    cudaDataType_t in = key->in_dtype == KILN_DT_BF16      ? CUDA_R_16BF
                        : key->in_dtype == KILN_DT_F8_E4M3 ? CUDA_R_8F_E4M3
                                                           : CUDA_R_32F;
    /* C = D: f32, or bf16 (bf16 and e4m3 operands only: the f32 result rounded once, as PyTorch's bf16 GEMMs) */
    cudaDataType_t out = key->out_dtype == KILN_DT_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    memset(d, 0, sizeof *d);
    LT_CALL(err, cublasLtMatmulDescCreate(&d->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    LT_CALL(err, cublasLtMatmulDescSetAttribute(d->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LT_CALL(err, cublasLtMatmulDescSetAttribute(d->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (in == CUDA_R_8F_E4M3) { /* A = the weight, B = the activation: D = alpha (A . B) + beta C, alpha = scale_w
                                 * scale_x and beta in device memory (no A/B scale pointers: see the header) */
        cublasLtPointerMode_t dev_pm = CUBLASLT_POINTER_MODE_DEVICE;
        if (key->epilogue == KCU_GEMM_GATE) { /* the gate would be a second alpha: never fused for fp8 */
            st = KILN_FAIL(err, KILN_E_UNSUPPORTED, "an fp8 GEMM takes no gate vector as alpha (its alpha is the "
                           "scales' product)");
            goto done;
        }
        LT_CALL(err, cublasLtMatmulDescSetAttribute(d->op, CUBLASLT_MATMUL_DESC_POINTER_MODE, &dev_pm, sizeof dev_pm));
    }
    if (key->epilogue == KCU_GEMM_BIAS) { /* D = A . B (+ C) + bias, the bias in D's type (cublasLt.h) */
        cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_BIAS;
        int32_t bt = (int32_t)out;
        LT_CALL(err, cublasLtMatmulDescSetAttribute(d->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e));
        LT_CALL(err, cublasLtMatmulDescSetAttribute(d->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ex->bias,
                                                    sizeof ex->bias));
        LT_CALL(err, cublasLtMatmulDescSetAttribute(d->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
    } else if (key->epilogue == KCU_GEMM_GATE) { /* D = gate[row of D] * (A . B) + 1 * C: the gated residual */
        cublasLtPointerMode_t pm = CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST;
        LT_CALL(err, cublasLtMatmulDescSetAttribute(d->op, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm, sizeof pm));
    }
    LT_CALL(err, cublasLtMatrixLayoutCreate(&d->a, in, (uint64_t)key->k, (uint64_t)key->n, key->ldw));
    LT_CALL(err, cublasLtMatrixLayoutCreate(&d->b, in, (uint64_t)key->k, (uint64_t)key->m, key->ldx));
    LT_CALL(err, cublasLtMatrixLayoutCreate(&d->c, out, (uint64_t)key->n, (uint64_t)key->m, key->ldy));
done:
    if (st != KILN_OK) desc_free(d);
    return st;
}

kiln_status kcu_gemm_pick(kiln_cuda_backend *cb, const kcu_gemm_key *key, const kcu_gemm_extra *ex, kcu_algo *algo,
                          kiln_err *err) {
    kiln_status st = KILN_OK;
    gemm_desc d;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    /* Room for split-K and stream-K algorithms; the deterministic mode forbids the reductions that add partial
     * products in a run-dependent order. 32 MiB is what cuBLAS recommends for Hopper. */
    size_t ws = 32u << 20;
    uint32_t reductions = cb->deterministic ? CUBLASLT_REDUCTION_SCHEME_NONE : CUBLASLT_REDUCTION_SCHEME_MASK;
    uint32_t align = (uint32_t)key->align;
    KILN_TRY(desc_make(key, ex, &d, err));
    LT_CALL(err, cublasLtMatmulPreferenceCreate(&pref));
    LT_CALL(err, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    LT_CALL(err, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reductions,
                                                      sizeof reductions));
    LT_CALL(err, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align, sizeof align));
    LT_CALL(err, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align, sizeof align));
    LT_CALL(err, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align, sizeof align));
    LT_CALL(err, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align, sizeof align));
    {
        /* a fused epilogue cuBLASLt does not take is an answer (the caller falls back), not a failure */
        cublasStatus_t h = cublasLtMatmulAlgoGetHeuristic((cublasLtHandle_t)cb->lt, d.op, d.a, d.b, d.c, d.c, pref, 1,
                                                          &res, &found);
        if (h != CUBLAS_STATUS_SUCCESS && (key->epilogue == KCU_GEMM_PLAIN || h != CUBLAS_STATUS_NOT_SUPPORTED))
            LT_CALL(err, h);
        if (h != CUBLAS_STATUS_SUCCESS) found = 0;
    }
    if (found < 1 || res.state != CUBLAS_STATUS_SUCCESS) {
        st = KILN_FAIL(err, KILN_E_UNSUPPORTED, "cuBLASLt has no algorithm for a %s GEMM m=%lld n=%lld k=%lld "
                       "(ld %lld/%lld/%lld, alignment %d)", in_name(key),
                       (long long)key->m, (long long)key->n, (long long)key->k, (long long)key->ldx,
                       (long long)key->ldw, (long long)key->ldy, key->align);
        goto done;
    }
    memset(algo, 0, sizeof *algo);
    memcpy(algo->blob, &res.algo, sizeof res.algo < sizeof algo->blob ? sizeof res.algo : sizeof algo->blob);
    algo->workspace_bytes = res.workspaceSize;
done:
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    desc_free(&d);
    return st;
}

kiln_status kcu_gemm_run(kiln_cuda_backend *cb, const kcu_gemm_key *key, const kcu_algo *algo, void *y,
                         const void *x, const void *w, const kcu_gemm_extra *ex, kiln_err *err) {
    static_assert(sizeof(cublasLtMatmulAlgo_t) <= sizeof(((kcu_algo *)0)->blob), "algo blob too small");
    kiln_status st = KILN_OK;
    gemm_desc d;
    float alpha = 1.f, beta = key->accumulate ? 1.f : 0.f;
    cublasLtMatmulAlgo_t a;
    memcpy(&a, algo->blob, sizeof a);
    KILN_TRY(kcu_workspace_reserve(cb, algo->workspace_bytes, err));
    KILN_TRY(desc_make(key, ex, &d, err));
    /* the gated residual's alpha is the gate vector in device memory (read when the GEMM runs: graphs replay it);
     * an fp8 GEMM's alpha (the two scales' product) and beta are device floats kcu_quantize_fp8 wrote */
    const bool fp8 = key->in_dtype == KILN_DT_F8_E4M3;
    const float *sc = fp8 && ex ? ex->scales : NULL;
    const void *al = fp8                             ? (const void *)(sc ? sc + KCU_FP8_ALPHA : NULL)
                     : key->epilogue == KCU_GEMM_GATE ? (const void *)ex->gate
                                                      : (const void *)&alpha;
    const void *be = fp8 ? (const void *)(sc ? sc + KCU_FP8_BETA : NULL) : (const void *)&beta;
    if (fp8 && !sc) {
        st = KILN_FAIL(err, KILN_E_INTERNAL, "an fp8 GEMM without its device alpha and beta");
        goto done;
    }
    {
        cublasStatus_t s = cublasLtMatmul((cublasLtHandle_t)cb->lt, d.op, al, w, d.a, x, d.b, be, y, d.c, y, d.c, &a,
                                          cb->workspace, algo->workspace_bytes, KCU_STREAM(cb));
        if (s == CUBLAS_STATUS_NOT_SUPPORTED && fp8) { /* never garbage: the fp8 GEMM did not run, and says so */
            st = KILN_FAIL(err, KILN_E_DEVICE, "cuBLASLt refused the fp8 (e4m3 x e4m3, KILN_CUDA_FP8=1) GEMM m=%lld "
                           "n=%lld k=%lld with the algorithm its heuristic chose (%s); unset KILN_CUDA_FP8 to widen "
                           "fp8 weights to bf16 instead", (long long)key->m, (long long)key->n, (long long)key->k,
                           cublasLtGetStatusString(s));
            goto done;
        }
        LT_CALL(err, s);
    }
done:
    desc_free(&d);
    return st;
}

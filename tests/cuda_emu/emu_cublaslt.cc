/* emu_cublaslt.cc - the cuBLASLt subset kiln calls, emulated: D = alpha op(A) op(B) + beta C over column-major
 * layouts, as cuBLASLt defines it (rows, cols and leading dimension of each matrix as stored, before op).
 *
 * What it checks, because these are the mistakes a first GPU run would meet: the layouts agree with the
 * operation (op(A) is m x k, op(B) k x n, C and D m x n), every leading dimension covers its rows, every matrix
 * lies inside one device allocation, the pointers are as aligned as the algorithm was chosen for (the
 * preference's minimum alignments, 256 bytes when unset), the workspace is as large as the algorithm said, and
 * only the types, compute type and epilogue it implements are asked for (anything else is
 * CUBLAS_STATUS_NOT_SUPPORTED, with a line saying what). The sums are in f32, as on the tensor cores.
 *
 * Pointer modes: HOST (alpha and beta read at the call, as cuBLASLt reads them), DEVICE (alpha and beta each one
 * f32 in device memory, read when the GEMM runs - a kernel before it may have written them) and
 * ALPHA_DEVICE_VECTOR_BETA_HOST (alpha one f32 per row of D in device memory, read when the GEMM runs).
 *
 * fp8 (A and B e4m3, C and D f32 or bf16): what cuBLASLt requires of fp8 on sm_89/sm_90 - the TN layout (A
 * transposed, B not), k and the leading dimensions of A and B multiples of 16, and sm_89 or later. A and B scale
 * pointers on an e4m3 GEMM are accepted by the heuristic and refused by cublasLtMatmul with
 * CUBLAS_STATUS_NOT_SUPPORTED, as cuBLASLt 13.1 on an H200 (CUDA 13.0) answered for every shape, output type and
 * algorithm (tests/gpu/lt_probe.cu): the scales belong in a device alpha. Scale pointers on a non-fp8 GEMM are
 * refused. */
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <stdio.h>
#include <string.h>

#include <vector>

#include "emu_internal.h"

namespace {

struct layout {
    cudaDataType type;
    uint64_t rows, cols;
    int64_t ld;
    uint64_t magic;
};
struct op_desc {
    cublasComputeType_t compute;
    cudaDataType_t scale;
    cublasOperation_t ta, tb;
    uint32_t epilogue;              /* DEFAULT or BIAS */
    const float *a_scale, *b_scale; /* device pointers (fp8) */
    const void *bias;               /* CUBLASLT_EPILOGUE_BIAS: [rows of D] in bias_type, device memory */
    int32_t bias_type;              /* -1: D's type (the default) */
    int32_t pointer_mode;           /* HOST, DEVICE or ALPHA_DEVICE_VECTOR_BETA_HOST */
    bool unsupported_attr;
    int bad_attr;
    uint64_t magic;
};
struct preference {
    uint64_t max_ws;
    uint32_t align[4]; /* A B C D */
    uint32_t reduction_mask;
    uint64_t magic;
};
/* what the heuristic's answer records, inside cublasLtMatmulAlgo_t */
struct algo_blob {
    uint64_t magic;
    uint32_t align[4];
    uint64_t workspace;
};
const uint64_t LAYOUT_MAGIC = 0x6c61796f75740001ull, DESC_MAGIC = 0x6d61746d756c0001ull,
               PREF_MAGIC = 0x7072656600000001ull, ALGO_MAGIC = 0x616c676f00000001ull;
static_assert(sizeof(layout) <= sizeof(cublasLtMatrixLayoutOpaque_t), "layout");
static_assert(sizeof(op_desc) <= sizeof(cublasLtMatmulDescOpaque_t), "desc");
static_assert(sizeof(preference) <= sizeof(cublasLtMatmulPreferenceOpaque_t), "pref");
static_assert(sizeof(algo_blob) <= sizeof(cublasLtMatmulAlgo_t), "algo");

layout *L(cublasLtMatrixLayout_t p) { return (layout *)p; }
op_desc *D(cublasLtMatmulDesc_t p) { return (op_desc *)p; }
preference *P(cublasLtMatmulPreference_t p) { return (preference *)p; }

size_t type_size(cudaDataType t) {
    return t == CUDA_R_32F ? 4 : t == CUDA_R_16BF || t == CUDA_R_16F ? 2 : t == CUDA_R_8F_E4M3 ? 1 : 0;
}

/* "kiln cuBLASLt emulator: <fmt with one %lld>" and NOT_SUPPORTED: what is not emulated, by name */
cublasStatus_t refuse(const char *fmt, long long v) {
    fprintf(stderr, "kiln cuBLASLt emulator: ");
    fprintf(stderr, fmt, v);
    fprintf(stderr, "\n");
    return CUBLAS_STATUS_NOT_SUPPORTED;
}

/* The checks shared by the heuristic and the matmul: shapes, types, compute type, epilogue. */
cublasStatus_t check_problem(const op_desc *d, const layout *a, const layout *b, const layout *c, const layout *dd) {
    if (!d || d->magic != DESC_MAGIC || !a || !b || !c || !dd || a->magic != LAYOUT_MAGIC ||
        b->magic != LAYOUT_MAGIC || c->magic != LAYOUT_MAGIC || dd->magic != LAYOUT_MAGIC)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (d->unsupported_attr) return refuse("the matmul attribute %lld is not emulated", d->bad_attr);
    if (d->compute != CUBLAS_COMPUTE_32F || d->scale != CUDA_R_32F)
        return refuse("compute type %lld is not emulated (CUBLAS_COMPUTE_32F with f32 scale is)", (long long)d->compute);
    if (d->epilogue != CUBLASLT_EPILOGUE_DEFAULT && d->epilogue != CUBLASLT_EPILOGUE_BIAS)
        return refuse("epilogue %lld is not emulated", d->epilogue);
    if (d->pointer_mode != CUBLASLT_POINTER_MODE_HOST && d->pointer_mode != CUBLASLT_POINTER_MODE_DEVICE &&
        d->pointer_mode != CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST)
        return refuse("pointer mode %lld is not emulated", d->pointer_mode);
    /* cublasLt.h: the bias is of D's type (the fp8 and IMMA exceptions are not emulated) */
    if (d->epilogue == CUBLASLT_EPILOGUE_BIAS && d->bias_type != -1 && d->bias_type != (int32_t)dd->type)
        return refuse("a bias of type %lld on a different output type is not emulated", d->bias_type);
    if (d->epilogue == CUBLASLT_EPILOGUE_BIAS && !d->bias)
        return refuse("epilogue BIAS (%lld) without a bias pointer", (long long)d->epilogue);
    /* cuBLASLt's table for CUBLAS_COMPUTE_32F: f32 operands write f32; bf16 and e4m3 operands f32 or bf16 */
    const bool out_ok = c->type == dd->type &&
                        (c->type == CUDA_R_32F || (c->type == CUDA_R_16BF && a->type != CUDA_R_32F));
    if (a->type != b->type || !type_size(a->type) || !out_ok)
        return refuse("the operand and output types (D type %lld) are not emulated (A = B in f32, bf16 or e4m3; C = D in "
                      "f32, or in bf16 for bf16 and e4m3 operands)", (long long)dd->type);
    uint64_t m = d->ta == CUBLAS_OP_N ? a->rows : a->cols, k = d->ta == CUBLAS_OP_N ? a->cols : a->rows;
    if (a->type == CUDA_R_8F_E4M3) {
        if (kcu_emu::device_cc() < 89) return refuse("fp8 GEMMs need sm_89 or later (the device is sm_%lld)", kcu_emu::device_cc());
        if (d->ta != CUBLAS_OP_T || d->tb != CUBLAS_OP_N)
            return refuse("fp8 GEMMs take only the TN layout on sm_89/sm_90 (transa %lld)", (long long)d->ta);
        if (k % 16 || a->ld % 16 || b->ld % 16)
            return refuse("fp8 GEMMs need k and the leading dimensions of A and B to be multiples of 16 (k %lld)",
                          (long long)k);
    } else if (d->a_scale || d->b_scale) {
        return refuse("scale pointers on a GEMM of type %lld: only fp8 GEMMs take them", (long long)a->type);
    }
    uint64_t kb = d->tb == CUBLAS_OP_N ? b->rows : b->cols, n = d->tb == CUBLAS_OP_N ? b->cols : b->rows;
    if (k != kb || c->rows != m || c->cols != n || dd->rows != m || dd->cols != n) {
        fprintf(stderr, "kiln cuBLASLt emulator: shapes do not agree: op(A) %llux%llu, op(B) %llux%llu, C %llux%llu, D "
                "%llux%llu\n", (unsigned long long)m, (unsigned long long)k, (unsigned long long)kb,
                (unsigned long long)n, (unsigned long long)c->rows, (unsigned long long)c->cols,
                (unsigned long long)dd->rows, (unsigned long long)dd->cols);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    const layout *all[4] = {a, b, c, dd};
    for (const layout *l : all)
        if (l->ld < (int64_t)(l->rows ? l->rows : 1)) {
            fprintf(stderr, "kiln cuBLASLt emulator: leading dimension %lld under the %llu rows of a column-major "
                    "matrix\n", (long long)l->ld, (unsigned long long)l->rows);
            return CUBLAS_STATUS_INVALID_VALUE;
        }
    return CUBLAS_STATUS_SUCCESS;
}

size_t span_bytes(const layout *l) {
    if (!l->rows || !l->cols) return 0;
    return ((l->cols - 1) * (uint64_t)l->ld + l->rows) * type_size(l->type);
}

float load(const void *p, cudaDataType t, uint64_t i) {
    if (t == CUDA_R_32F) return ((const float *)p)[i];
    if (t == CUDA_R_8F_E4M3) {
        __half_raw h = __nv_cvt_fp8_to_halfraw(((const __nv_fp8_storage_t *)p)[i], __NV_E4M3);
        return __half2float(__half(h));
    }
    if (t == CUDA_R_16F) return __half2float(((const __half *)p)[i]);
    return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
}

} /* namespace */

extern "C" {

struct cublasLtContext {
    uint64_t magic;
};

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) {
    *h = new cublasLtContext{0x68616e646c65ull};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasLtGetStatusString(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    default: return "CUBLAS_STATUS (emulator: other)";
    }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *p, cudaDataType type, uint64_t rows, uint64_t cols,
                                          int64_t ld) {
    auto *o = new cublasLtMatrixLayoutOpaque_t();
    *L(o) = layout{type, rows, cols, ld, LAYOUT_MAGIC};
    *p = o;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t p) {
    delete p;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *p, cublasComputeType_t compute, cudaDataType_t scale) {
    auto *o = new cublasLtMatmulDescOpaque_t();
    *D(o) = op_desc{compute, scale, CUBLAS_OP_N, CUBLAS_OP_N, CUBLASLT_EPILOGUE_DEFAULT, NULL, NULL, NULL, -1,
                    CUBLASLT_POINTER_MODE_HOST, false, 0, DESC_MAGIC};
    *p = o;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t p) {
    delete p;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t p, cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t n) {
    op_desc *d = D(p);
    if (attr == CUBLASLT_MATMUL_DESC_TRANSA || attr == CUBLASLT_MATMUL_DESC_TRANSB) {
        if (n != sizeof(cublasOperation_t)) return CUBLAS_STATUS_INVALID_VALUE;
        cublasOperation_t v;
        memcpy(&v, buf, n);
        if (v != CUBLAS_OP_N && v != CUBLAS_OP_T) return refuse("transpose mode %lld is not emulated", v);
        (attr == CUBLASLT_MATMUL_DESC_TRANSA ? d->ta : d->tb) = v;
    } else if (attr == CUBLASLT_MATMUL_DESC_A_SCALE_POINTER || attr == CUBLASLT_MATMUL_DESC_B_SCALE_POINTER) {
        if (n != sizeof(const float *)) return CUBLAS_STATUS_INVALID_VALUE;
        memcpy(attr == CUBLASLT_MATMUL_DESC_A_SCALE_POINTER ? &d->a_scale : &d->b_scale, buf, n);
    } else if (attr == CUBLASLT_MATMUL_DESC_EPILOGUE) {
        if (n != sizeof(uint32_t)) return CUBLAS_STATUS_INVALID_VALUE;
        memcpy(&d->epilogue, buf, n);
    } else if (attr == CUBLASLT_MATMUL_DESC_BIAS_POINTER) {
        if (n != sizeof(const void *)) return CUBLAS_STATUS_INVALID_VALUE;
        memcpy(&d->bias, buf, n);
    } else if (attr == CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE || attr == CUBLASLT_MATMUL_DESC_POINTER_MODE) {
        if (n != sizeof(int32_t)) return CUBLAS_STATUS_INVALID_VALUE;
        memcpy(attr == CUBLASLT_MATMUL_DESC_POINTER_MODE ? &d->pointer_mode : &d->bias_type, buf, n);
    } else {
        d->unsupported_attr = true; /* reported by the heuristic and the matmul */
        d->bad_attr = (int)attr;
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
    auto *o = new cublasLtMatmulPreferenceOpaque_t();
    *P(o) = preference{0, {256, 256, 256, 256}, CUBLASLT_REDUCTION_SCHEME_MASK, PREF_MAGIC};
    *p = o;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
    delete p;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
                                                    size_t n) {
    preference *q = P(p);
    switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
        if (n != sizeof(uint64_t)) return CUBLAS_STATUS_INVALID_VALUE;
        memcpy(&q->max_ws, buf, n);
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK:
        if (n != sizeof(uint32_t)) return CUBLAS_STATUS_INVALID_VALUE;
        memcpy(&q->reduction_mask, buf, n);
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
        if (n != sizeof(uint32_t)) return CUBLAS_STATUS_INVALID_VALUE;
        memcpy(&q->align[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES], buf, n);
        return CUBLAS_STATUS_SUCCESS;
    default: return refuse("preference attribute %lld is not emulated", (long long)attr);
    }
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                              cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t pref,
                                              int requested, cublasLtMatmulHeuristicResult_t results[], int *found) {
    *found = 0;
    if (!h || requested <= 0 || !pref || P(pref)->magic != PREF_MAGIC) return CUBLAS_STATUS_INVALID_VALUE;
    cublasStatus_t s = check_problem(D(op), L(a), L(b), L(c), L(d));
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    memset(&results[0], 0, sizeof results[0]);
    algo_blob blob = {ALGO_MAGIC, {0, 0, 0, 0}, 0};
    memcpy(blob.align, P(pref)->align, sizeof blob.align);
    /* an algorithm that wants some workspace when it may have it (so callers must provide it) */
    blob.workspace = P(pref)->max_ws < (4u << 20) ? P(pref)->max_ws : (4u << 20);
    memcpy(&results[0].algo, &blob, sizeof blob);
    results[0].workspaceSize = blob.workspace;
    results[0].state = CUBLAS_STATUS_SUCCESS;
    results[0].wavesCount = 1.f;
    *found = 1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t op, const void *alpha, const void *A,
                              cublasLtMatrixLayout_t ad, const void *B, cublasLtMatrixLayout_t bd, const void *beta,
                              const void *C, cublasLtMatrixLayout_t cd, void *Dp, cublasLtMatrixLayout_t dd,
                              const cublasLtMatmulAlgo_t *algo, void *ws, size_t ws_bytes, cudaStream_t stream) {
    if (!h || !alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
    cublasStatus_t s = check_problem(D(op), L(ad), L(bd), L(cd), L(dd));
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    /* the H200's answer (cuBLASLt 13.1): the heuristic offers algorithms, the matmul refuses every one */
    if (L(ad)->type == CUDA_R_8F_E4M3 && (D(op)->a_scale || D(op)->b_scale))
        return refuse("A/B scale pointers on an e4m3 GEMM: cuBLASLt 13.1 on an H200 refuses them at cublasLtMatmul "
                      "(put the scales' product in a device alpha) (%lld)", 0LL);
    if (!algo) return refuse("cublasLtMatmul without an algorithm (%lld): not emulated", 0LL);
    algo_blob blob;
    memcpy(&blob, algo, sizeof blob);
    if (blob.magic != ALGO_MAGIC) {
        fprintf(stderr, "kiln cuBLASLt emulator: the algorithm passed to cublasLtMatmul is not one the heuristic "
                "returned\n");
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    const void *ptrs[4] = {A, B, C, Dp};
    const layout *lays[4] = {L(ad), L(bd), L(cd), L(dd)};
    const char *names = "ABCD";
    for (int i = 0; i < 4; i++) {
        size_t bytes = span_bytes(lays[i]);
        if (bytes && !kcu_emu::device_range(ptrs[i], bytes)) {
            fprintf(stderr, "kiln cuBLASLt emulator: matrix %c (%p, %zu bytes) is not inside one device allocation\n",
                    names[i], ptrs[i], bytes);
            return CUBLAS_STATUS_INVALID_VALUE;
        }
        if ((uintptr_t)ptrs[i] % blob.align[i]) {
            fprintf(stderr, "kiln cuBLASLt emulator: matrix %c at %p is less aligned than the %u bytes its algorithm "
                    "was chosen for\n", names[i], ptrs[i], blob.align[i]);
            return CUBLAS_STATUS_NOT_SUPPORTED;
        }
    }
    if (blob.workspace && (ws_bytes < blob.workspace || !ws || !kcu_emu::device_range(ws, blob.workspace))) {
        fprintf(stderr, "kiln cuBLASLt emulator: the algorithm needs %llu bytes of device workspace, given %zu at %p\n",
                (unsigned long long)blob.workspace, ws_bytes, ws);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    float al = 1.f, be = 0.f; /* CUBLASLT_POINTER_MODE_HOST: read now, as cuBLASLt does */
    const bool alpha_vec = D(op)->pointer_mode == CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST;
    const bool dev = D(op)->pointer_mode == CUBLASLT_POINTER_MODE_DEVICE;
    if (dev) { /* one f32 each in device memory, read when the GEMM runs */
        for (const void *sp : {alpha, beta})
            if (!kcu_emu::device_range(sp, sizeof(float))) {
                fprintf(stderr, "kiln cuBLASLt emulator: CUBLASLT_POINTER_MODE_DEVICE with alpha or beta (%p) outside "
                        "device memory\n", sp);
                return CUBLAS_STATUS_INVALID_VALUE;
            }
    } else {
        if (!alpha_vec) memcpy(&al, alpha, 4);
        memcpy(&be, beta, 4);
    }
    const float *alv = alpha_vec ? (const float *)alpha : NULL; /* [rows of D] f32 in device memory */
    const float *dev_al = dev ? (const float *)alpha : NULL, *dev_be = dev ? (const float *)beta : NULL;
    const void *bias = D(op)->epilogue == CUBLASLT_EPILOGUE_BIAS ? D(op)->bias : NULL;
    const cudaDataType bias_t = L(dd)->type;
    if (alv && !kcu_emu::device_range(alv, L(dd)->rows * sizeof(float))) {
        fprintf(stderr, "kiln cuBLASLt emulator: the alpha vector (%p, %llu floats) is not device memory\n",
                (const void *)alv, (unsigned long long)L(dd)->rows);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (bias && !kcu_emu::device_range(bias, L(dd)->rows * type_size(bias_t))) {
        fprintf(stderr, "kiln cuBLASLt emulator: the bias (%p, %llu values) is not device memory\n", bias,
                (unsigned long long)L(dd)->rows);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    layout a = *L(ad), b = *L(bd), c = *L(cd), d = *L(dd);
    cublasOperation_t ta = D(op)->ta, tb = D(op)->tb;
    cudaError_t e = kcu_emu::enqueue(stream, "cublasLtMatmul", [=]() {
        kcu_emu::device_section ds;
        uint64_t m = d.rows, n = d.cols, k = ta == CUBLAS_OP_N ? a.cols : a.rows;
        /* device alpha and beta as the device holds them when the GEMM runs (a kernel before may have written them) */
        const float al_now = dev_al ? *dev_al : al, be_now = dev_be ? *dev_be : be;
        /* op(A) as m rows of k floats, op(B)^T as n rows of k floats: the dot products then read memory in order */
        std::vector<float> af(m * k), bf(n * k);
        for (uint64_t i = 0; i < m; i++)
            for (uint64_t l = 0; l < k; l++)
                af[i * k + l] = load(A, a.type, ta == CUBLAS_OP_N ? i + l * (uint64_t)a.ld : l + i * (uint64_t)a.ld);
        for (uint64_t j = 0; j < n; j++)
            for (uint64_t l = 0; l < k; l++)
                bf[j * k + l] = load(B, b.type, tb == CUBLAS_OP_N ? l + j * (uint64_t)b.ld : j + l * (uint64_t)b.ld);
        for (uint64_t j = 0; j < n; j++)
            for (uint64_t i = 0; i < m; i++) {
                /* f32 sums in 8 lanes, as a tensor core sums in f32 (the products of bf16 or f32 operands) */
                const float *x = &af[i * k], *y = &bf[j * k];
                float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                uint64_t l = 0;
                for (; l + 8 <= k; l += 8)
                    for (int u = 0; u < 8; u++) acc[u] += x[l + u] * y[l + u];
                float sum = 0;
                for (int u = 0; u < 8; u++) sum += acc[u];
                for (; l < k; l++) sum += x[l] * y[l];
                float v = (alv ? alv[i] : al_now) * sum; /* alpha vector: one value per row of D, read now */
                if (be_now != 0.f) v += be_now * load(C, c.type, i + j * (uint64_t)c.ld);
                if (bias) v += load(bias, bias_t, i);
                if (d.type == CUDA_R_16BF) ((__nv_bfloat16 *)Dp)[i + j * (uint64_t)d.ld] = __float2bfloat16_rn(v);
                else ((float *)Dp)[i + j * (uint64_t)d.ld] = v;
            }
    });
    return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

} /* extern "C" */

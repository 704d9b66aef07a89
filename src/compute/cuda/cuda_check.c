/* cuda_check.c - argument checks for the CUDA ops (see cuda_check.h). Host logic only. What the CPU backend
 * checks the same way lives in compute/check.c; this file adds the CUDA backend's own views. */
#include "compute/cuda/cuda_check.h"

#include "compute/check.h"
#include "tensor/quant.h"

kiln_status kcu_as_mat(const kiln_tensor *t, int dt, const char *op, const char *name, kcu_mat *m, kiln_err *err) {
    kiln_mat_view v;
    KILN_TRY(kiln_check_mat(t, KILN_BACKEND_CUDA, dt >= 0 ? dt : KILN_CHECK_FLOAT_DTYPE, op, name, &v, err));
    if (v.rows <= 1 && v.ld < v.cols) v.ld = v.cols; /* a single row: its stride is irrelevant */
    *m = (kcu_mat){v.data, v.rows, v.cols, v.ld, v.dt};
    return KILN_OK;
}

kiln_status kcu_as_vec(const kiln_tensor *t, int64_t n, bool optional, const char *op, const char *name,
                       kcu_mat *out, kiln_err *err) {
    if (!t && optional) {
        *out = (kcu_mat){NULL, 1, n, n, KILN_DT_F32};
        return KILN_OK;
    }
    kcu_mat m;
    KILN_TRY(kcu_as_mat(t, -1, op, name, &m, err));
    if (m.dt == KILN_DT_F16)
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: %s is f16, expected f32 or bf16", op, name);
    if (m.rows * m.cols != n || (m.rows > 1 && m.cols != 1 && m.ld != m.cols) || (m.rows > 1 && m.cols == 1 && m.ld != 1))
        return KILN_FAIL(err, KILN_E_INVALID, "%s: %s must be a contiguous vector of %lld, got %lld x %lld", op, name,
                         (long long)n, (long long)m.rows, (long long)m.cols);
    *out = (kcu_mat){m.data, 1, n, n, m.dt};
    return KILN_OK;
}

kiln_status kcu_as_nchw(const kiln_tensor *t, const char *op, const char *name, int64_t dims[4], kiln_dtype *dt,
                        kiln_err *err) {
    if (t && t->dtype == KILN_DT_BF16) { /* the CPU's check takes f32 only: the same checks with bf16 let through */
        kiln_tensor f = *t;
        f.dtype = KILN_DT_F32;
        KILN_TRY(kiln_check_nchw(&f, KILN_BACKEND_CUDA, op, name, dims, err));
    } else {
        KILN_TRY(kiln_check_nchw(t, KILN_BACKEND_CUDA, op, name, dims, err));
    }
    *dt = t->dtype;
    return KILN_OK;
}

kiln_status kcu_same_shape(const kcu_mat *a, const kcu_mat *b, const char *op, const char *an, const char *bn,
                           kiln_err *err) {
    if (a->rows != b->rows || a->cols != b->cols)
        return KILN_FAIL(err, KILN_E_INVALID, "%s: %s is %lld x %lld but %s is %lld x %lld", op, an, (long long)a->rows,
                         (long long)a->cols, bn, (long long)b->rows, (long long)b->cols);
    return KILN_OK;
}

kiln_status kcu_as_view4(const kiln_tensor *t, const char *op, const char *name, kcu_view4 *v, kiln_err *err) {
    KILN_TRY(kiln_check_tensor(t, KILN_BACKEND_CUDA, op, name, err));
    if (t->ndim > 4) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: %s has %d dims (at most 4)", op, name, t->ndim);
    int pad = 4 - t->ndim;
    for (int i = 0; i < 4; i++) {
        v->shape[i] = i < pad ? 1 : t->shape[i - pad];
        v->stride[i] = i < pad ? 0 : t->stride[i - pad];
    }
    v->data = t->data;
    v->dt = t->dtype;
    return KILN_OK;
}

bool kcu_is_stored_quantised(const kiln_tensor *t) {
    return t && (t->dtype == KILN_DT_QBLOCK || t->dtype == KILN_DT_F8_E4M3 || t->dtype == KILN_DT_F8_E5M2 ||
                 t->dtype == KILN_DT_F16);
}

/* The GGML block types cuda_dequant.cu decodes: the CPU's (tensor/quant.h) less the plain floats, which a GGUF
 * reader hands over as ordinary f32/f16/bf16 tensors. */
static bool device_qtype(uint32_t id) {
    return id == KILN_QT_Q8_0 || id == KILN_QT_Q4_0 || id == KILN_QT_Q5_0 || id == KILN_QT_Q2_K ||
           id == KILN_QT_Q3_K || id == KILN_QT_Q4_K || id == KILN_QT_Q5_K || id == KILN_QT_Q6_K;
}

kiln_status kcu_as_qmat(const kiln_tensor *t, const char *op, const char *name, kcu_qmat *q, kiln_err *err) {
    kiln_mat_view v;
    KILN_TRY(kiln_check_mat(t, KILN_BACKEND_CUDA, KILN_CHECK_ANY_DTYPE, op, name, &v, err));
    *q = (kcu_qmat){v.data, v.rows, v.cols, 0, v.dt, 0, 1.0f};
    if (v.dt == KILN_DT_QBLOCK) {
        const kiln_qtype_info *qi = kiln_qtype_get(t->qtype);
        if (!qi || !device_qtype(t->qtype))
            return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: %s is GGML type %s, which the CUDA backend cannot "
                             "dequantise (it takes Q8_0, Q4_0, Q5_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K)", op, name,
                             qi ? qi->name : "(unknown)");
        if (v.cols % qi->block || (v.rows > 1 && v.ld < v.cols / qi->block * qi->bytes))
            return KILN_FAIL(err, KILN_E_INVALID, "%s: %s (%s) rows of %lld values are not whole blocks of %u", op,
                             name, qi->name, (long long)v.cols, qi->block);
        q->qtype = t->qtype;
        q->row_bytes = v.rows > 1 ? v.ld : v.cols / qi->block * qi->bytes;
        return KILN_OK;
    }
    if (v.dt != KILN_DT_F8_E4M3 && v.dt != KILN_DT_F8_E5M2 && v.dt != KILN_DT_F16)
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: %s is %s, not a quantised weight", op, name,
                         kiln_dtype_name(v.dt));
    const int64_t es = v.dt == KILN_DT_F16 ? 2 : 1;
    q->row_bytes = (v.rows > 1 ? v.ld : v.cols) * es;
    if (v.dt != KILN_DT_F16 && t->qscale != 0.0f) q->scale = t->qscale;
    return KILN_OK;
}

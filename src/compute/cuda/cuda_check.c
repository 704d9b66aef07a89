/* cuda_check.c - argument checks for the CUDA ops (see cuda_check.h). Host logic only. */
#include "compute/cuda/cuda_check.h"

static kiln_status check_device(const kiln_tensor *t, const char *op, const char *name, kiln_err *err) {
    if (!t) return KILN_FAIL(err, KILN_E_INVALID, "%s: %s is NULL", op, name);
    if (t->backend != KILN_BACKEND_CUDA)
        return KILN_FAIL(err, KILN_E_INVALID, "%s: %s lives in host memory, not on the CUDA device (upload it first)",
                         op, name);
    if (t->ndim < 1 || t->ndim > KILN_MAX_DIMS)
        return KILN_FAIL(err, KILN_E_INVALID, "%s: %s has %d dims", op, name, t->ndim);
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] < 0) return KILN_FAIL(err, KILN_E_INVALID, "%s: %s has a negative dim", op, name);
    if (!t->data && kiln_tensor_numel(t) > 0) return KILN_FAIL(err, KILN_E_INVALID, "%s: %s has no data", op, name);
    return KILN_OK;
}

static bool is_act_float(kiln_dtype dt) { return dt == KILN_DT_F32 || dt == KILN_DT_BF16 || dt == KILN_DT_F16; }

kiln_status kcu_as_mat(const kiln_tensor *t, int dt, const char *op, const char *name, kcu_mat *m, kiln_err *err) {
    KILN_TRY(check_device(t, op, name, err));
    if (dt >= 0 ? t->dtype != (kiln_dtype)dt : !is_act_float(t->dtype))
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: %s is %s, expected %s", op, name, kiln_dtype_name(t->dtype),
                         dt >= 0 ? kiln_dtype_name((kiln_dtype)dt) : "f32, bf16 or f16");
    int last = t->ndim - 1;
    if (t->shape[last] > 1 && t->stride[last] != 1)
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: %s's last dim is not contiguous (stride %lld)", op, name,
                         (long long)t->stride[last]);
    int64_t rows = 1;
    for (int i = 0; i < last; i++) rows *= t->shape[i];
    for (int i = 0; i + 1 < last; i++)
        if (t->shape[i] > 1 && t->stride[i] != t->stride[i + 1] * t->shape[i + 1])
            return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: %s's leading dims do not collapse into rows", op, name);
    m->data = t->data;
    m->rows = rows;
    m->cols = t->shape[last];
    m->ld = last > 0 ? t->stride[last - 1] : m->cols;
    if (rows <= 1 && m->ld < m->cols) m->ld = m->cols; /* a single row: its stride is irrelevant */
    if (rows > 1 && m->ld < m->cols)
        return KILN_FAIL(err, KILN_E_INVALID, "%s: %s's row stride %lld is below its width %lld", op, name,
                         (long long)m->ld, (long long)m->cols);
    m->dt = t->dtype;
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

kiln_status kcu_as_nchw(const kiln_tensor *t, const char *op, const char *name, int64_t dims[4], kiln_err *err) {
    KILN_TRY(check_device(t, op, name, err));
    if (t->dtype != KILN_DT_F32)
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: %s is %s, expected f32", op, name, kiln_dtype_name(t->dtype));
    if (t->ndim != 4) return KILN_FAIL(err, KILN_E_INVALID, "%s: %s must be 4-D NCHW, has %d dims", op, name, t->ndim);
    if (!kiln_tensor_is_contiguous(t)) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: %s must be contiguous", op, name);
    for (int i = 0; i < 4; i++) dims[i] = t->shape[i];
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
    KILN_TRY(check_device(t, op, name, err));
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

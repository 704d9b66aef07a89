/* cpu_check.c - shape and dtype checks that turn kiln_tensors into plain matrices for the kernels.
 * Every op validates its arguments here first, so a kernel can trust what it gets. */
#include "compute/cpu/cpu_internal.h"

static kiln_status check_host(const kiln_tensor *t, const char *op, const char *name, kiln_err *err) {
    if (!t) return KILN_FAIL(err, KILN_E_INVALID, "%s: %s is NULL", op, name);
    if (t->backend != KILN_BACKEND_CPU)
        return KILN_FAIL(err, KILN_E_INVALID, "%s: %s lives on another backend, not host memory", op, name);
    if (t->ndim < 1 || t->ndim > KILN_MAX_DIMS)
        return KILN_FAIL(err, KILN_E_INVALID, "%s: %s has %d dims", op, name, t->ndim);
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] < 0) return KILN_FAIL(err, KILN_E_INVALID, "%s: %s has a negative dim", op, name);
    if (!t->data && kiln_tensor_numel(t) > 0) return KILN_FAIL(err, KILN_E_INVALID, "%s: %s has no data", op, name);
    return KILN_OK;
}

kiln_status cpu_as_mat(const kiln_tensor *t, int dt, const char *op, const char *name, cpu_mat *m, kiln_err *err) {
    KILN_TRY(check_host(t, op, name, err));
    if (dt >= 0 && t->dtype != (kiln_dtype)dt)
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: %s is %s, expected %s", op, name, kiln_dtype_name(t->dtype),
                         kiln_dtype_name((kiln_dtype)dt));
    int last = t->ndim - 1;
    if (t->shape[last] > 1 && t->stride[last] != 1)
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: %s's last dim is not contiguous (stride %lld)", op, name,
                         (long long)t->stride[last]);
    int64_t rows = 1;
    for (int i = 0; i < last; i++) rows *= t->shape[i];
    /* leading dims must collapse: stride[i] == stride[i+1] * shape[i+1] for i < last-1 */
    for (int i = 0; i + 1 < last; i++)
        if (t->shape[i] > 1 && t->stride[i] != t->stride[i + 1] * t->shape[i + 1])
            return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: %s's leading dims do not collapse into rows", op, name);
    m->data = t->data;
    m->rows = rows;
    m->cols = t->shape[last];
    m->ld = last > 0 ? t->stride[last - 1] : m->cols;
    if (rows > 1 && m->ld < m->cols)
        return KILN_FAIL(err, KILN_E_INVALID, "%s: %s's row stride %lld is below its width %lld", op, name,
                         (long long)m->ld, (long long)m->cols);
    m->dt = t->dtype;
    return KILN_OK;
}

kiln_status cpu_as_vec(const kiln_tensor *t, int64_t n, const char *op, const char *name, const float **out,
                       kiln_err *err) {
    cpu_mat m;
    KILN_TRY(cpu_as_mat(t, KILN_DT_F32, op, name, &m, err));
    if (m.rows * m.cols != n || (m.rows > 1 && m.cols != 1 && m.ld != m.cols))
        return KILN_FAIL(err, KILN_E_INVALID, "%s: %s must be a contiguous f32 vector of %lld, got %lld x %lld", op,
                         name, (long long)n, (long long)m.rows, (long long)m.cols);
    *out = (const float *)m.data;
    return KILN_OK;
}

kiln_status cpu_as_nchw(const kiln_tensor *t, const char *op, const char *name, int64_t dims[4], kiln_err *err) {
    KILN_TRY(check_host(t, op, name, err));
    if (t->dtype != KILN_DT_F32)
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: %s is %s, expected f32", op, name, kiln_dtype_name(t->dtype));
    if (t->ndim != 4) return KILN_FAIL(err, KILN_E_INVALID, "%s: %s must be 4-D NCHW, has %d dims", op, name, t->ndim);
    if (!kiln_tensor_is_contiguous(t))
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: %s must be contiguous", op, name);
    for (int i = 0; i < 4; i++) dims[i] = t->shape[i];
    return KILN_OK;
}

kiln_status cpu_as_param(const kiln_tensor *t, int64_t n, const char *op, const char *name, cpu_param *out,
                         kiln_err *err) {
    KILN_TRY(check_host(t, op, name, err));
    if (t->dtype != KILN_DT_F32 && t->dtype != KILN_DT_BF16)
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: %s is %s, expected f32 or bf16", op, name,
                         kiln_dtype_name(t->dtype));
    if (kiln_tensor_numel(t) != n || !kiln_tensor_is_contiguous(t))
        return KILN_FAIL(err, KILN_E_INVALID, "%s: %s must be a contiguous vector of %lld, has %lld elements", op,
                         name, (long long)n, (long long)kiln_tensor_numel(t));
    out->p = t->data;
    out->bf16 = t->dtype == KILN_DT_BF16;
    return KILN_OK;
}

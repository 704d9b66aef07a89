/* check.c - the argument checks both backends share (see check.h). */
#include "compute/check.h"

/* Where a tensor should have been, said the way a caller can act on it. */
static const char *wrong_place(kiln_backend_kind be) {
    return be == KILN_BACKEND_CUDA ? "lives in host memory, not on the CUDA device (upload it first)"
                                   : "lives on another backend, not host memory";
}

kiln_status kiln_check_tensor(const kiln_tensor *t, kiln_backend_kind be, const char *op, const char *name,
                              kiln_err *err) {
    if (!t) return KILN_FAIL(err, KILN_E_INVALID, "%s: %s is NULL", op, name);
    if (t->backend != be) return KILN_FAIL(err, KILN_E_INVALID, "%s: %s %s", op, name, wrong_place(be));
    if (t->ndim < 1 || t->ndim > KILN_MAX_DIMS)
        return KILN_FAIL(err, KILN_E_INVALID, "%s: %s has %d dims", op, name, t->ndim);
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] < 0) return KILN_FAIL(err, KILN_E_INVALID, "%s: %s has a negative dim", op, name);
    if (!t->data && kiln_tensor_numel(t) > 0) return KILN_FAIL(err, KILN_E_INVALID, "%s: %s has no data", op, name);
    return KILN_OK;
}

static bool dtype_ok(kiln_dtype have, int want) {
    if (want == KILN_CHECK_ANY_DTYPE) return true;
    if (want == KILN_CHECK_FLOAT_DTYPE) return have == KILN_DT_F32 || have == KILN_DT_BF16 || have == KILN_DT_F16;
    return have == (kiln_dtype)want;
}

kiln_status kiln_check_mat(const kiln_tensor *t, kiln_backend_kind be, int dt, const char *op, const char *name,
                           kiln_mat_view *m, kiln_err *err) {
    KILN_TRY(kiln_check_tensor(t, be, op, name, err));
    if (!dtype_ok(t->dtype, dt))
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: %s is %s, expected %s", op, name, kiln_dtype_name(t->dtype),
                         dt >= 0 ? kiln_dtype_name((kiln_dtype)dt) : "f32, bf16 or f16");
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
    int64_t cols = t->shape[last], ld = last > 0 ? t->stride[last - 1] : cols;
    if (rows > 1 && ld < cols && t->dtype != KILN_DT_QBLOCK) /* quantised rows: ld is in bytes */
        return KILN_FAIL(err, KILN_E_INVALID, "%s: %s's row stride %lld is below its width %lld", op, name,
                         (long long)ld, (long long)cols);
    *m = (kiln_mat_view){t->data, rows, cols, ld, t->dtype};
    return KILN_OK;
}

kiln_status kiln_check_nchw(const kiln_tensor *t, kiln_backend_kind be, const char *op, const char *name,
                            int64_t dims[4], kiln_err *err) {
    KILN_TRY(kiln_check_tensor(t, be, op, name, err));
    if (t->dtype != KILN_DT_F32)
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: %s is %s, expected f32", op, name, kiln_dtype_name(t->dtype));
    if (t->ndim != 4) return KILN_FAIL(err, KILN_E_INVALID, "%s: %s must be 4-D NCHW, has %d dims", op, name, t->ndim);
    if (!kiln_tensor_is_contiguous(t)) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: %s must be contiguous", op, name);
    for (int i = 0; i < 4; i++) dims[i] = t->shape[i];
    return KILN_OK;
}

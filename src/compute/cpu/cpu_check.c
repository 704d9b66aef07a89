/* cpu_check.c - shape and dtype checks that turn kiln_tensors into plain matrices for the kernels.
 * Every op validates its arguments here first, so a kernel can trust what it gets. What the CUDA backend checks
 * the same way lives in compute/check.c; this file adds the CPU's own view types and parameter vectors. */
#include "compute/check.h"
#include "compute/cpu/cpu_internal.h"

kiln_status cpu_as_mat(const kiln_tensor *t, int dt, const char *op, const char *name, cpu_mat *m, kiln_err *err) {
    kiln_mat_view v;
    KILN_TRY(kiln_check_mat(t, KILN_BACKEND_CPU, dt >= 0 ? dt : KILN_CHECK_ANY_DTYPE, op, name, &v, err));
    *m = (cpu_mat){v.data, v.rows, v.cols, v.ld, v.dt};
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
    return kiln_check_nchw(t, KILN_BACKEND_CPU, op, name, dims, err);
}

kiln_status cpu_as_param(const kiln_tensor *t, int64_t n, const char *op, const char *name, cpu_param *out,
                         kiln_err *err) {
    KILN_TRY(kiln_check_tensor(t, KILN_BACKEND_CPU, op, name, err));
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

/* elementwise.c - activations and elementwise arithmetic: SiLU, GELU(tanh), SwiGLU, SiLU*mul, GELU*mul, add, gated add,
 * scale/shift and row softmax. All f32, row-parallel, honouring row strides; y may alias x where ops.h says. */
#include <math.h>

#include "compute/cpu/ew_kernels.h"

typedef enum ew_kind { EW_SILU, EW_GELU, EW_SWIGLU, EW_SILU_MUL, EW_GELU_MUL, EW_ADD, EW_GATED_ADD, EW_SCALE_SHIFT } ew_kind;

typedef struct ew_ctx {
    ew_kind kind;
    cpu_mat y, a, b;
    const float *gate;
    float alpha, beta;
    const cpu_ew_kernels *k;
} ew_ctx;

static void ew_rows(void *p, int64_t r0, int64_t r1) {
    const ew_ctx *c = p;
    int64_t n = c->y.cols;
    for (int64_t r = r0; r < r1; r++) {
        float *y = mat_f32_row(&c->y, r);
        const float *a = mat_f32_row(&c->a, r);
        const float *b = c->b.data ? mat_f32_row(&c->b, r) : NULL;
        const cpu_ew_kernels *k = c->k;
        switch (c->kind) {
        case EW_SILU: k->silu(y, a, n); break;
        case EW_GELU: k->gelu_tanh(y, a, n); break;
        case EW_SWIGLU: k->act_mul(y, a, a + n, CPU_ACT_SILU, n); break;
        case EW_SILU_MUL: k->act_mul(y, a, b, CPU_ACT_SILU, n); break;
        case EW_GELU_MUL: k->act_mul(y, a, b, CPU_ACT_GELU, n); break;
        case EW_ADD: k->add(y, a, b, n); break;
        case EW_GATED_ADD: k->gated_add(y, c->gate, b, n); break; /* y is x (the residual), b the update */
        case EW_SCALE_SHIFT: k->axpb(y, a, c->alpha, c->beta, n); break;
        }
    }
}

static kiln_status same_shape(const cpu_mat *y, const cpu_mat *x, const char *op, const char *yn, const char *xn,
                              kiln_err *err) {
    if (y->rows != x->rows || y->cols != x->cols)
        return KILN_FAIL(err, KILN_E_INVALID, "%s: %s is %lld x %lld but %s is %lld x %lld", op, yn,
                         (long long)y->rows, (long long)y->cols, xn, (long long)x->rows, (long long)x->cols);
    return KILN_OK;
}

static kiln_status run_ew(kiln_backend *be, ew_ctx *c) {
    c->k = cpu_ew_for(cpu_be(be)->tier);
    cpu_parallel_rows(cpu_be(be), c->y.rows, cpu_grain(c->y.cols), ew_rows, c);
    return KILN_OK;
}

static kiln_status unary(kiln_backend *be, ew_kind kind, const char *op, kiln_tensor *y, const kiln_tensor *x,
                         float alpha, float beta, kiln_err *err) {
    ew_ctx c = {.kind = kind, .alpha = alpha, .beta = beta};
    KILN_TRY(cpu_as_mat(y, KILN_DT_F32, op, "y", &c.y, err));
    KILN_TRY(cpu_as_mat(x, KILN_DT_F32, op, "x", &c.a, err));
    KILN_TRY(same_shape(&c.y, &c.a, op, "y", "x", err));
    return run_ew(be, &c);
}

kiln_status cpu_silu(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, kiln_err *err) {
    return unary(be, EW_SILU, "silu", y, x, 0, 0, err);
}
kiln_status cpu_gelu_tanh(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, kiln_err *err) {
    return unary(be, EW_GELU, "gelu_tanh", y, x, 0, 0, err);
}
kiln_status cpu_scale_shift(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, float a, float b, kiln_err *err) {
    return unary(be, EW_SCALE_SHIFT, "scale_shift", y, x, a, b, err);
}

kiln_status cpu_swiglu(kiln_backend *be, kiln_tensor *y, const kiln_tensor *ab, kiln_err *err) {
    ew_ctx c = {.kind = EW_SWIGLU};
    KILN_TRY(cpu_as_mat(y, KILN_DT_F32, "swiglu", "y", &c.y, err));
    KILN_TRY(cpu_as_mat(ab, KILN_DT_F32, "swiglu", "ab", &c.a, err));
    if (c.a.rows != c.y.rows || c.a.cols != 2 * c.y.cols)
        return KILN_FAIL(err, KILN_E_INVALID, "swiglu: ab is %lld x %lld, expected %lld x %lld (twice y's width)",
                         (long long)c.a.rows, (long long)c.a.cols, (long long)c.y.rows, (long long)(2 * c.y.cols));
    /* y may not overlap ab: the second half is read after the first half of y is written. */
    if (c.y.data == c.a.data && c.y.rows > 0 && c.y.cols > 0)
        return KILN_FAIL(err, KILN_E_INVALID, "swiglu: y must not alias ab");
    return run_ew(be, &c);
}

static kiln_status binary(kiln_backend *be, ew_kind kind, const char *op, kiln_tensor *y, const kiln_tensor *a,
                          const kiln_tensor *b, kiln_err *err) {
    ew_ctx c = {.kind = kind};
    KILN_TRY(cpu_as_mat(y, KILN_DT_F32, op, "y", &c.y, err));
    KILN_TRY(cpu_as_mat(a, KILN_DT_F32, op, "a", &c.a, err));
    KILN_TRY(cpu_as_mat(b, KILN_DT_F32, op, "b", &c.b, err));
    KILN_TRY(same_shape(&c.y, &c.a, op, "y", "a", err));
    KILN_TRY(same_shape(&c.y, &c.b, op, "y", "b", err));
    return run_ew(be, &c);
}

kiln_status cpu_silu_mul(kiln_backend *be, kiln_tensor *y, const kiln_tensor *a, const kiln_tensor *b, kiln_err *err) {
    return binary(be, EW_SILU_MUL, "silu_mul", y, a, b, err);
}
kiln_status cpu_gelu_mul(kiln_backend *be, kiln_tensor *y, const kiln_tensor *a, const kiln_tensor *b, kiln_err *err) {
    return binary(be, EW_GELU_MUL, "gelu_mul", y, a, b, err);
}
kiln_status cpu_add(kiln_backend *be, kiln_tensor *y, const kiln_tensor *a, const kiln_tensor *b, kiln_err *err) {
    return binary(be, EW_ADD, "add", y, a, b, err);
}

kiln_status cpu_gated_add(kiln_backend *be, kiln_tensor *x, const kiln_tensor *gate, const kiln_tensor *y,
                          kiln_err *err) {
    ew_ctx c = {.kind = EW_GATED_ADD};
    KILN_TRY(cpu_as_mat(x, KILN_DT_F32, "gated_add", "x", &c.y, err));
    KILN_TRY(cpu_as_mat(y, KILN_DT_F32, "gated_add", "y", &c.b, err));
    KILN_TRY(same_shape(&c.y, &c.b, "gated_add", "x", "y", err));
    KILN_TRY(cpu_as_vec(gate, c.y.cols, "gated_add", "gate", &c.gate, err));
    c.a = c.y;
    return run_ew(be, &c);
}

/* ---- softmax: max-subtracted, f32 with a double sum for long rows ---- */
static void softmax_rows(void *p, int64_t r0, int64_t r1) {
    const ew_ctx *c = p;
    int64_t n = c->y.cols;
    for (int64_t r = r0; r < r1; r++) {
        float *y = mat_f32_row(&c->y, r);
        const float *x = mat_f32_row(&c->a, r);
        float mx = c->k->max(x, n);
        if (mx == -INFINITY) { /* every entry masked: zeros rather than NaN */
            memset(y, 0, sizeof(float) * (size_t)n);
            continue;
        }
        double sum = c->k->exp_sub_sum(y, x, mx, n);
        c->k->axpb(y, y, (float)(1.0 / sum), 0.0f, n);
    }
}

kiln_status cpu_softmax(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, kiln_err *err) {
    ew_ctx c = {0};
    KILN_TRY(cpu_as_mat(y, KILN_DT_F32, "softmax", "y", &c.y, err));
    KILN_TRY(cpu_as_mat(x, KILN_DT_F32, "softmax", "x", &c.a, err));
    KILN_TRY(same_shape(&c.y, &c.a, "softmax", "y", "x", err));
    c.k = cpu_ew_for(cpu_be(be)->tier);
    cpu_parallel_rows(cpu_be(be), c.y.rows, cpu_grain(c.y.cols), softmax_rows, &c);
    return KILN_OK;
}

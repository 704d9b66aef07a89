/* elementwise.c - activations and elementwise arithmetic: SiLU, GELU(tanh), SwiGLU, SiLU*mul, add, gated add,
 * scale/shift and row softmax. All f32, row-parallel, honouring row strides; y may alias x where ops.h says. */
#include <math.h>

#include "compute/cpu/cpu_internal.h"

static inline float silu_f(float x) { return x / (1.0f + expf(-x)); }
static inline float gelu_tanh_f(float x) {
    const float k = 0.7978845608028654f; /* sqrt(2/pi) */
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

typedef enum ew_kind { EW_SILU, EW_GELU, EW_SWIGLU, EW_SILU_MUL, EW_ADD, EW_GATED_ADD, EW_SCALE_SHIFT } ew_kind;

typedef struct ew_ctx {
    ew_kind kind;
    cpu_mat y, a, b;
    const float *gate;
    float alpha, beta;
} ew_ctx;

static void ew_rows(void *p, int64_t r0, int64_t r1) {
    const ew_ctx *c = p;
    int64_t n = c->y.cols;
    for (int64_t r = r0; r < r1; r++) {
        float *y = mat_f32_row(&c->y, r);
        const float *a = mat_f32_row(&c->a, r);
        const float *b = c->b.data ? mat_f32_row(&c->b, r) : NULL;
        switch (c->kind) {
        case EW_SILU:
            for (int64_t i = 0; i < n; i++) y[i] = silu_f(a[i]);
            break;
        case EW_GELU:
            for (int64_t i = 0; i < n; i++) y[i] = gelu_tanh_f(a[i]);
            break;
        case EW_SWIGLU:
            for (int64_t i = 0; i < n; i++) y[i] = silu_f(a[i]) * a[i + n];
            break;
        case EW_SILU_MUL:
            for (int64_t i = 0; i < n; i++) y[i] = silu_f(a[i]) * b[i];
            break;
        case EW_ADD:
            for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
            break;
        case EW_GATED_ADD: /* y is x (the residual), b the update */
            for (int64_t i = 0; i < n; i++) y[i] += c->gate[i] * b[i];
            break;
        case EW_SCALE_SHIFT:
            for (int64_t i = 0; i < n; i++) y[i] = c->alpha * a[i] + c->beta;
            break;
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
        float mx = -INFINITY;
        for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
        if (mx == -INFINITY) { /* every entry masked: zeros rather than NaN */
            for (int64_t i = 0; i < n; i++) y[i] = 0.0f;
            continue;
        }
        double sum = 0;
        for (int64_t i = 0; i < n; i++) {
            y[i] = expf(x[i] - mx);
            sum += y[i];
        }
        float inv = (float)(1.0 / sum);
        for (int64_t i = 0; i < n; i++) y[i] *= inv;
    }
}

kiln_status cpu_softmax(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, kiln_err *err) {
    ew_ctx c = {0};
    KILN_TRY(cpu_as_mat(y, KILN_DT_F32, "softmax", "y", &c.y, err));
    KILN_TRY(cpu_as_mat(x, KILN_DT_F32, "softmax", "x", &c.a, err));
    KILN_TRY(same_shape(&c.y, &c.a, "softmax", "y", "x", err));
    cpu_parallel_rows(cpu_be(be), c.y.rows, cpu_grain(c.y.cols), softmax_rows, &c);
    return KILN_OK;
}

/* norm.c - RMSNorm (per group of G columns, e.g. per head), LayerNorm without affine plus adaLN modulation,
 * and GroupNorm over NCHW with an optional fused SiLU. Statistics are accumulated in double: rows are at most
 * a few thousand wide, so this costs little and keeps the result within f32 rounding of the reference. */
#include <math.h>

#include "compute/cpu/ew_kernels.h"

typedef struct norm_ctx {
    cpu_mat y, x;
    cpu_param gain, beta;
    const float *shift, *scale;
    int64_t g; /* rms: group width; group_norm: groups */
    int64_t c, hw;
    float eps;
    bool silu;
    const cpu_ew_kernels *k;
} norm_ctx;

static void rms_rows(void *p, int64_t r0, int64_t r1) {
    const norm_ctx *c = p;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = mat_f32_row(&c->x, r);
        float *y = mat_f32_row(&c->y, r);
        for (int64_t base = 0; base < c->x.cols; base += c->g) {
            float inv = (float)(1.0 / sqrt(c->k->sum_dev(x + base, 0.0f, 2, c->g) / (double)c->g + c->eps));
            if (c->gain.bf16)
                for (int64_t i = 0; i < c->g; i++) y[base + i] = x[base + i] * inv * param_at(&c->gain, i);
            else {
                const float *gn = c->gain.p;
                for (int64_t i = 0; i < c->g; i++) y[base + i] = x[base + i] * inv * gn[i];
            }
        }
    }
}

kiln_status cpu_rms_norm(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, const kiln_tensor *gain, float eps,
                         kiln_err *err) {
    norm_ctx c = {.eps = eps};
    KILN_TRY(cpu_as_mat(y, KILN_DT_F32, "rms_norm", "y", &c.y, err));
    KILN_TRY(cpu_as_mat(x, KILN_DT_F32, "rms_norm", "x", &c.x, err));
    if (c.y.rows != c.x.rows || c.y.cols != c.x.cols)
        return KILN_FAIL(err, KILN_E_INVALID, "rms_norm: y and x differ in shape");
    if (!gain || gain->ndim != 1 || gain->shape[0] < 1)
        return KILN_FAIL(err, KILN_E_INVALID, "rms_norm: gain must be a 1-D vector");
    c.g = gain->shape[0];
    KILN_TRY(cpu_as_param(gain, c.g, "rms_norm", "gain", &c.gain, err));
    if (c.x.cols % c.g)
        return KILN_FAIL(err, KILN_E_INVALID, "rms_norm: width %lld is not a multiple of the gain length %lld",
                         (long long)c.x.cols, (long long)c.g);
    c.k = cpu_ew_for(cpu_be(be)->tier);
    cpu_parallel_rows(cpu_be(be), c.x.rows, cpu_grain(c.x.cols), rms_rows, &c);
    return KILN_OK;
}

static void ln_rows(void *p, int64_t r0, int64_t r1) {
    const norm_ctx *c = p;
    int64_t n = c->x.cols;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = mat_f32_row(&c->x, r);
        float *y = mat_f32_row(&c->y, r);
        /* two passes (mean, then squared deviations) keep the variance exact for rows with a large mean */
        float mean = (float)(c->k->sum_dev(x, 0.0f, 1, n) / (double)n);
        double var = c->k->sum_dev(x, mean, 2, n) / (double)n;
        c->k->ln_apply(y, x, mean, (float)(1.0 / sqrt(var + c->eps)), c->shift, c->scale, n);
    }
}

kiln_status cpu_layer_norm_modulate(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, const kiln_tensor *shift,
                                    const kiln_tensor *scale, float eps, kiln_err *err) {
    norm_ctx c = {.eps = eps};
    KILN_TRY(cpu_as_mat(y, KILN_DT_F32, "layer_norm_modulate", "y", &c.y, err));
    KILN_TRY(cpu_as_mat(x, KILN_DT_F32, "layer_norm_modulate", "x", &c.x, err));
    if (c.y.rows != c.x.rows || c.y.cols != c.x.cols)
        return KILN_FAIL(err, KILN_E_INVALID, "layer_norm_modulate: y and x differ in shape");
    if (!shift != !scale)
        return KILN_FAIL(err, KILN_E_INVALID, "layer_norm_modulate: give both shift and scale, or neither");
    if (shift) {
        KILN_TRY(cpu_as_vec(shift, c.x.cols, "layer_norm_modulate", "shift", &c.shift, err));
        KILN_TRY(cpu_as_vec(scale, c.x.cols, "layer_norm_modulate", "scale", &c.scale, err));
    }
    if (c.x.cols < 1) return KILN_FAIL(err, KILN_E_INVALID, "layer_norm_modulate: rows are empty");
    c.k = cpu_ew_for(cpu_be(be)->tier);
    cpu_parallel_rows(cpu_be(be), c.x.rows, cpu_grain(c.x.cols), ln_rows, &c);
    return KILN_OK;
}

/* GroupNorm: one task per (image, group); the group's channels are contiguous in NCHW. */
static void gn_groups(void *p, int64_t t0, int64_t t1) {
    const norm_ctx *c = p;
    int64_t cpg = c->c / c->g, len = cpg * c->hw;
    for (int64_t t = t0; t < t1; t++) {
        int64_t n = t / c->g, g = t % c->g;
        const float *x = (const float *)c->x.data + (n * c->c + g * cpg) * c->hw;
        float *y = (float *)c->y.data + (n * c->c + g * cpg) * c->hw;
        float m = (float)(c->k->sum_dev(x, 0.0f, 1, len) / (double)len);
        double v = c->k->sum_dev(x, m, 2, len);
        float inv = (float)(1.0 / sqrt(v / (double)len + c->eps));
        for (int64_t ch = 0; ch < cpg; ch++) {
            float a = inv * param_at(&c->gain, g * cpg + ch), b = param_at(&c->beta, g * cpg + ch) - m * a;
            c->k->affine(y + ch * c->hw, x + ch * c->hw, a, b, c->silu, c->hw);
        }
    }
}

kiln_status cpu_group_norm(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, int groups,
                           const kiln_tensor *gamma, const kiln_tensor *beta, float eps, bool silu, kiln_err *err) {
    int64_t xd[4], yd[4];
    KILN_TRY(cpu_as_nchw(x, "group_norm", "x", xd, err));
    KILN_TRY(cpu_as_nchw(y, "group_norm", "y", yd, err));
    for (int i = 0; i < 4; i++)
        if (xd[i] != yd[i]) return KILN_FAIL(err, KILN_E_INVALID, "group_norm: y and x differ in shape");
    if (groups < 1 || xd[1] % groups)
        return KILN_FAIL(err, KILN_E_INVALID, "group_norm: %lld channels do not split into %d groups",
                         (long long)xd[1], groups);
    norm_ctx c = {.eps = eps, .silu = silu, .g = groups, .c = xd[1], .hw = xd[2] * xd[3], .k = cpu_ew_for(cpu_be(be)->tier)};
    c.x.data = x->data;
    c.y.data = y->data;
    KILN_TRY(cpu_as_param(gamma, xd[1], "group_norm", "gamma", &c.gain, err));
    KILN_TRY(cpu_as_param(beta, xd[1], "group_norm", "beta", &c.beta, err));
    if (c.hw == 0) return KILN_OK;
    cpu_parallel_rows(cpu_be(be), xd[0] * groups, 1, gn_groups, &c);
    return KILN_OK;
}

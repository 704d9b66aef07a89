/* cpu_strict.c - the CPU backend's strict-residency mode (KILN_STRICT_RESIDENCY=1): the device contract of
 * ops.h enforced on the host.
 *
 * Why: on the CPU every pointer is readable, so a model that hands an op host memory - an mmapped checkpoint
 * tensor that was never placed, a stack array, a malloc'd table - works, and the bug shows only on the first
 * GPU run ("lives in host memory"). In strict mode the backend records every range it returned from alloc and
 * every range placed on it, and each op first checks that every tensor argument lies wholly inside ONE of them,
 * failing with the op's and the argument's name otherwise. The pipeline golden test runs again in this mode
 * (test_pipeline_golden_strict), so the whole class of bug is caught on every commit, without a GPU.
 *
 * The tables below wrap the tier's ops one for one: check, then call the real op (same names, same order of
 * the remaining checks). alloc/free/place/unplace keep the record in cpu_backend.c. */
#include <inttypes.h>
#include <stdio.h>

#include "base/log.h"
#include "compute/cpu/cpu_internal.h"

kiln_status cpu_strict_own(kiln_cpu_backend *cb, const void *p, size_t bytes, const char *what, kiln_err *err) {
    if (!cb->strict) return KILN_OK;
    pthread_mutex_lock(&cb->owned_lock);
    kiln_status s = kiln_ranges_add(&cb->owned, p, bytes, NULL, err);
    pthread_mutex_unlock(&cb->owned_lock);
    if (s != KILN_OK) kiln_err_prefix(err, "strict residency: %s: ", what);
    return s;
}

void cpu_strict_disown(kiln_cpu_backend *cb, const void *p, const char *what) {
    if (!cb->strict || !p) return;
    pthread_mutex_lock(&cb->owned_lock);
    bool found = kiln_ranges_remove(&cb->owned, p, NULL);
    pthread_mutex_unlock(&cb->owned_lock);
    if (!found) log_error("strict residency: %s at %p was never made by this backend", what, p);
}

/* KILN_OK when t (NULL: an absent optional argument) lies inside one owned range. */
static kiln_status check(kiln_backend *be, const char *op, const char *arg, const kiln_tensor *t, kiln_err *err) {
    if (!t) return KILN_OK;
    int64_t lo, hi;
    kiln_tensor_span(t, &lo, &hi);
    if (hi <= lo) return KILN_OK; /* empty: touches nothing */
    kiln_cpu_backend *cb = cpu_be(be);
    bool ok = false;
    if (t->data) {
        const char *start = (const char *)t->data + lo;
        pthread_mutex_lock(&cb->owned_lock);
        ok = kiln_ranges_covers(&cb->owned, start, (size_t)(hi - lo));
        pthread_mutex_unlock(&cb->owned_lock);
    }
    if (ok) return KILN_OK;
    char shape[96];
    return KILN_FAIL(err, KILN_E_INVALID,
                     "%s: %s (%s %s, %" PRId64 " bytes at %p) is not memory this backend allocated or placed "
                     "(strict residency: on a GPU this is host memory the op cannot read; place weights at load "
                     "with kiln_wset_place, allocate activations with ops->alloc)",
                     op, arg, kiln_dtype_name(t->dtype), kiln_shape_str(t, shape, sizeof shape), hi - lo,
                     t->data);
}

#define CHECK_ARG(op, t) KILN_TRY(check(be, op, #t, (t), err))

static const kiln_ops *real(kiln_backend *be);

static kiln_status s_matmul(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, const kiln_tensor *w,
                            const kiln_tensor *bias, const kiln_epilogue *epi, kiln_err *err) {
    CHECK_ARG("matmul", y);
    CHECK_ARG("matmul", x);
    CHECK_ARG("matmul", w);
    CHECK_ARG("matmul", bias);
    if (epi) KILN_TRY(check(be, "matmul", "gate", epi->gate, err));
    return real(be)->matmul(be, y, x, w, bias, epi, err);
}

static kiln_status s_attention(kiln_backend *be, kiln_tensor *out, const kiln_tensor *q, const kiln_tensor *k,
                               const kiln_tensor *v, int n_q_heads, int n_kv_heads, float scale, bool causal,
                               const kiln_tensor *key_mask, const kiln_tensor *bias, kiln_err *err) {
    CHECK_ARG("attention", out);
    CHECK_ARG("attention", q);
    CHECK_ARG("attention", k);
    CHECK_ARG("attention", v);
    CHECK_ARG("attention", key_mask);
    CHECK_ARG("attention", bias);
    return real(be)->attention(be, out, q, k, v, n_q_heads, n_kv_heads, scale, causal, key_mask, bias, err);
}

static kiln_status s_rms_norm(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, const kiln_tensor *gain,
                              float eps, kiln_err *err) {
    CHECK_ARG("rms_norm", y);
    CHECK_ARG("rms_norm", x);
    CHECK_ARG("rms_norm", gain);
    return real(be)->rms_norm(be, y, x, gain, eps, err);
}

static kiln_status s_layer_norm_modulate(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x,
                                         const kiln_tensor *shift, const kiln_tensor *scale, float eps,
                                         kiln_err *err) {
    CHECK_ARG("layer_norm_modulate", y);
    CHECK_ARG("layer_norm_modulate", x);
    CHECK_ARG("layer_norm_modulate", shift);
    CHECK_ARG("layer_norm_modulate", scale);
    return real(be)->layer_norm_modulate(be, y, x, shift, scale, eps, err);
}

static kiln_status s_rope(kiln_backend *be, kiln_tensor *x, const kiln_tensor *cos, const kiln_tensor *sin,
                          int n_heads, bool interleaved, kiln_err *err) {
    CHECK_ARG("rope", x);
    CHECK_ARG("rope", cos);
    CHECK_ARG("rope", sin);
    return real(be)->rope(be, x, cos, sin, n_heads, interleaved, err);
}

static kiln_status s_swiglu(kiln_backend *be, kiln_tensor *y, const kiln_tensor *ab, kiln_err *err) {
    CHECK_ARG("swiglu", y);
    CHECK_ARG("swiglu", ab);
    return real(be)->swiglu(be, y, ab, err);
}

static kiln_status s_silu_mul(kiln_backend *be, kiln_tensor *y, const kiln_tensor *a, const kiln_tensor *b,
                              kiln_err *err) {
    CHECK_ARG("silu_mul", y);
    CHECK_ARG("silu_mul", a);
    CHECK_ARG("silu_mul", b);
    return real(be)->silu_mul(be, y, a, b, err);
}

static kiln_status s_gelu_mul(kiln_backend *be, kiln_tensor *y, const kiln_tensor *a, const kiln_tensor *b,
                              kiln_err *err) {
    CHECK_ARG("gelu_mul", y);
    CHECK_ARG("gelu_mul", a);
    CHECK_ARG("gelu_mul", b);
    return real(be)->gelu_mul(be, y, a, b, err);
}

static kiln_status s_silu(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, kiln_err *err) {
    CHECK_ARG("silu", y);
    CHECK_ARG("silu", x);
    return real(be)->silu(be, y, x, err);
}

static kiln_status s_gelu_tanh(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, kiln_err *err) {
    CHECK_ARG("gelu_tanh", y);
    CHECK_ARG("gelu_tanh", x);
    return real(be)->gelu_tanh(be, y, x, err);
}

static kiln_status s_softmax(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, kiln_err *err) {
    CHECK_ARG("softmax", y);
    CHECK_ARG("softmax", x);
    return real(be)->softmax(be, y, x, err);
}

static kiln_status s_add(kiln_backend *be, kiln_tensor *y, const kiln_tensor *a, const kiln_tensor *b,
                         kiln_err *err) {
    CHECK_ARG("add", y);
    CHECK_ARG("add", a);
    CHECK_ARG("add", b);
    return real(be)->add(be, y, a, b, err);
}

static kiln_status s_gated_add(kiln_backend *be, kiln_tensor *x, const kiln_tensor *gate, const kiln_tensor *y,
                               kiln_err *err) {
    CHECK_ARG("gated_add", x);
    CHECK_ARG("gated_add", gate);
    CHECK_ARG("gated_add", y);
    return real(be)->gated_add(be, x, gate, y, err);
}

static kiln_status s_scale_shift(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, float a, float b,
                                 kiln_err *err) {
    CHECK_ARG("scale_shift", y);
    CHECK_ARG("scale_shift", x);
    return real(be)->scale_shift(be, y, x, a, b, err);
}

static kiln_status s_copy(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, kiln_err *err) {
    CHECK_ARG("copy", y);
    CHECK_ARG("copy", x);
    return real(be)->copy(be, y, x, err);
}

static kiln_status s_conv2d(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, const kiln_tensor *w,
                            const kiln_tensor *bias, int stride, int pad_begin, int pad_end, kiln_err *err) {
    CHECK_ARG("conv2d", y);
    CHECK_ARG("conv2d", x);
    CHECK_ARG("conv2d", w);
    CHECK_ARG("conv2d", bias);
    return real(be)->conv2d(be, y, x, w, bias, stride, pad_begin, pad_end, err);
}

static kiln_status s_group_norm(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, int groups,
                                const kiln_tensor *gamma, const kiln_tensor *beta, float eps, bool silu,
                                kiln_err *err) {
    CHECK_ARG("group_norm", y);
    CHECK_ARG("group_norm", x);
    CHECK_ARG("group_norm", gamma);
    CHECK_ARG("group_norm", beta);
    return real(be)->group_norm(be, y, x, groups, gamma, beta, eps, silu, err);
}

static kiln_status s_upsample2x(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, kiln_err *err) {
    CHECK_ARG("upsample2x", y);
    CHECK_ARG("upsample2x", x);
    return real(be)->upsample2x(be, y, x, err);
}

static const kiln_ops *real(kiln_backend *be) { return cpu_tier_ops(cpu_be(be)->tier); }

/* Memory entries are the tier table's own (they keep the record themselves). */
#define STRICT_TABLE                                                                                       \
    {                                                                                                         \
        .name = NULL, .matmul = s_matmul, .attention = s_attention, .rms_norm = s_rms_norm,                   \
        .layer_norm_modulate = s_layer_norm_modulate, .rope = s_rope, .swiglu = s_swiglu,                     \
        .silu_mul = s_silu_mul, .gelu_mul = s_gelu_mul, .silu = s_silu, .gelu_tanh = s_gelu_tanh,             \
        .softmax = s_softmax, .add = s_add, .gated_add = s_gated_add, .scale_shift = s_scale_shift,           \
        .copy = s_copy, .conv2d = s_conv2d, .group_norm = s_group_norm, .upsample2x = s_upsample2x,           \
    }

#define N_TIERS (KILN_CPU_AMX + 1)
static kiln_ops strict_ops[N_TIERS];
static pthread_once_t strict_once = PTHREAD_ONCE_INIT;

/* Each strict table is its tier's table with the ops replaced: the same name (what be->ops->name reports) and
 * the same memory entries. */
static void build_tables(void) {
    static const kiln_ops wrap = STRICT_TABLE;
    for (int t = 0; t < N_TIERS; t++) {
        const kiln_ops *base = cpu_tier_ops((kiln_cpu_tier)t);
        strict_ops[t] = wrap;
        strict_ops[t].name = base->name;
        strict_ops[t].place = base->place;
        strict_ops[t].unplace = base->unplace;
        strict_ops[t].reserve = base->reserve;
        strict_ops[t].alloc = base->alloc;
        strict_ops[t].free = base->free;
        strict_ops[t].upload = base->upload;
        strict_ops[t].download = base->download;
        strict_ops[t].sync = base->sync;
        strict_ops[t].close = base->close;
    }
}

const kiln_ops *cpu_strict_ops(kiln_cpu_tier tier) {
    pthread_once(&strict_once, build_tables);
    return &strict_ops[tier];
}

/* tensor.c - dtype facts and tensor view helpers (see tensor.h). */
#include "tensor/tensor.h"

#include "tensor/quant.h"

#include <stdio.h>
#include <string.h>

typedef struct dtype_info {
    const char *name;    /* kiln name */
    const char *st_name; /* safetensors name */
    size_t size;
    bool is_float;
} dtype_info;

static const dtype_info dtypes[KILN_DT_COUNT] = {
    [KILN_DT_F32] = {"f32", "F32", 4, true},
    [KILN_DT_F16] = {"f16", "F16", 2, true},
    [KILN_DT_BF16] = {"bf16", "BF16", 2, true},
    [KILN_DT_F8_E4M3] = {"f8_e4m3", "F8_E4M3", 1, true},
    [KILN_DT_F8_E5M2] = {"f8_e5m2", "F8_E5M2", 1, true},
    [KILN_DT_I32] = {"i32", "I32", 4, false},
    [KILN_DT_I64] = {"i64", "I64", 8, false},
    [KILN_DT_BOOL] = {"bool", "BOOL", 1, false},
    [KILN_DT_U8] = {"u8", "U8", 1, false},
    [KILN_DT_F64] = {"f64", "F64", 8, true},
    /* no safetensors spelling: only GGUF files hold block-quantised rows (never matched by name below) */
    [KILN_DT_QBLOCK] = {"ggml-q", "", 1, false},
};

size_t kiln_dtype_size(kiln_dtype dt) { return (unsigned)dt < KILN_DT_COUNT ? dtypes[dt].size : 0; }

const char *kiln_dtype_name(kiln_dtype dt) { return (unsigned)dt < KILN_DT_COUNT ? dtypes[dt].name : "?"; }

const char *kiln_dtype_safetensors_name(kiln_dtype dt) {
    return (unsigned)dt < KILN_DT_COUNT ? dtypes[dt].st_name : "?";
}

bool kiln_dtype_is_float(kiln_dtype dt) { return (unsigned)dt < KILN_DT_COUNT && dtypes[dt].is_float; }

bool kiln_dtype_from_safetensors(const char *s, kiln_dtype *out) {
    if (!s) return false;
    for (int i = 0; i < KILN_DT_COUNT; i++) {
        if (*dtypes[i].st_name && strcmp(s, dtypes[i].st_name) == 0) {
            *out = (kiln_dtype)i;
            return true;
        }
    }
    return false;
}

kiln_tensor kiln_tensor_make(void *data, kiln_dtype dt, int ndim, const int64_t *shape) {
    kiln_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = dt;
    if (ndim < 0) ndim = 0;
    if (ndim > KILN_MAX_DIMS) ndim = KILN_MAX_DIMS;
    t.ndim = ndim;
    int64_t stride = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        t.shape[i] = shape[i];
        t.stride[i] = stride;
        stride *= shape[i];
    }
    t.backend = KILN_BACKEND_CPU;
    return t;
}

int64_t kiln_tensor_numel(const kiln_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

kiln_tensor kiln_tensor_make_q(void *data, uint32_t qtype, int64_t rows, int64_t cols) {
    kiln_tensor t = kiln_tensor_make(data, KILN_DT_QBLOCK, 2, (int64_t[]){rows, cols});
    const kiln_qtype_info *q = kiln_qtype_get(qtype);
    t.qtype = qtype;
    t.stride[0] = q ? (int64_t)kiln_qtype_nbytes(q, (size_t)cols) : 0;
    return t;
}

size_t kiln_tensor_nbytes(const kiln_tensor *t) {
    if (t->dtype == KILN_DT_QBLOCK) return t->ndim == 2 ? (size_t)(t->shape[0] * t->stride[0]) : 0;
    return (size_t)kiln_tensor_numel(t) * kiln_dtype_size(t->dtype);
}

bool kiln_tensor_is_contiguous(const kiln_tensor *t) {
    int64_t stride = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != stride) return false; /* size-1 dims may have any stride */
        stride *= t->shape[i];
    }
    return true;
}

bool kiln_tensor_same_shape(const kiln_tensor *a, const kiln_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

kiln_tensor kiln_tensor_rows(const kiln_tensor *t, int64_t start, int64_t count) {
    kiln_tensor r = *t;
    if (t->ndim == 0) return r;
    r.shape[0] = count;
    r.data = (char *)t->data + (size_t)(start * t->stride[0]) * kiln_dtype_size(t->dtype);
    return r;
}

kiln_status kiln_tensor_reshape(const kiln_tensor *t, int ndim, const int64_t *shape, kiln_tensor *out,
                                kiln_err *err) {
    char buf[160];
    if (ndim < 0 || ndim > KILN_MAX_DIMS)
        return KILN_FAIL(err, KILN_E_INVALID, "reshape to %d dims (max %d)", ndim, KILN_MAX_DIMS);
    if (!kiln_tensor_is_contiguous(t))
        return KILN_FAIL(err, KILN_E_INVALID, "reshape of a non-contiguous tensor %s",
                         kiln_shape_str(t, buf, sizeof buf));
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || __builtin_mul_overflow(n, shape[i], &n))
            return KILN_FAIL(err, KILN_E_INVALID, "reshape: bad dimension %lld", (long long)shape[i]);
    }
    if (n != kiln_tensor_numel(t))
        return KILN_FAIL(err, KILN_E_INVALID, "reshape of %s (%lld elements) to %lld elements",
                         kiln_shape_str(t, buf, sizeof buf), (long long)kiln_tensor_numel(t), (long long)n);
    kiln_tensor r = kiln_tensor_make(t->data, t->dtype, ndim, shape);
    r.backend = t->backend;
    r.device = t->device;
    *out = r;
    return KILN_OK;
}

const char *kiln_shape_str(const kiln_tensor *t, char *buf, size_t cap) {
    if (!cap) return buf;
    size_t used = 0;
    buf[0] = '\0';
    int w = snprintf(buf, cap, "[");
    used = w > 0 ? (size_t)w : 0;
    for (int i = 0; i < t->ndim && used < cap; i++) {
        w = snprintf(buf + used, cap - used, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        if (w < 0) break;
        used += (size_t)w;
    }
    if (used < cap) snprintf(buf + used, cap - used, "]");
    return buf;
}

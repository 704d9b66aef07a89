/* weights.c - named, shape-checked weight fetching (see weights.h). */
#include "models/weights.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "compute/ops.h"
#include "io/fp8_layout.h"
#include "tensor/quant.h"
#include "tensor/convert.h"

/* Declares char name[512] holding the tensor name a kiln_w_* call spells printf-style (fmt and its arguments). */
#define FORMAT_NAME(name, fmt)                                                                                 \
    char name[512];                                                                                            \
    do {                                                                                                       \
        va_list ap_;                                                                                           \
        va_start(ap_, fmt);                                                                                    \
        vsnprintf(name, sizeof name, fmt, ap_);                                                                \
        va_end(ap_);                                                                                           \
    } while (0)

void kiln_wset_init(kiln_wset *ws, const kiln_st_file *ck, const char *what, kiln_err *err) {
    memset(ws, 0, sizeof *ws);
    ws->ck = ck;
    ws->what = what;
    ws->err = err;
}

static void unplace_all(kiln_wset *ws) {
    if (!ws->be) return;
    for (size_t i = 0; i < ws->n_ranges; i++) ws->be->ops->unplace(ws->be, ws->ranges[i].host);
    ws->be = NULL;
}

void kiln_wset_free(kiln_wset *ws) {
    unplace_all(ws);
    for (size_t i = 0; i < ws->n_owned; i++) kiln_free(ws->owned[i]);
    kiln_free(ws->owned);
    kiln_free(ws->ranges);
    ws->owned = NULL;
    ws->ranges = NULL;
    ws->n_owned = ws->cap_owned = ws->n_ranges = ws->cap_ranges = 0;
}

static int by_host(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)((const kiln_wrange *)a)->host, y = (uintptr_t)((const kiln_wrange *)b)->host;
    return x < y ? -1 : x > y;
}

/* Sorts the ranges and merges those that overlap or touch (a tensor fetched twice; neighbours in the file):
 * fewer, larger placements (one upload per contiguous run of used tensors). */
static void merge_ranges(kiln_wset *ws) {
    if (!ws->n_ranges) return;
    qsort(ws->ranges, ws->n_ranges, sizeof *ws->ranges, by_host);
    size_t o = 0;
    for (size_t i = 1; i < ws->n_ranges; i++) {
        kiln_wrange *last = &ws->ranges[o];
        uintptr_t end = (uintptr_t)last->host + last->bytes, b = (uintptr_t)ws->ranges[i].host;
        if (b <= end) {
            uintptr_t e2 = b + ws->ranges[i].bytes;
            if (e2 > end) last->bytes += e2 - end;
        } else {
            ws->ranges[++o] = ws->ranges[i];
        }
    }
    ws->n_ranges = o + 1;
}

kiln_status kiln_wset_place(kiln_wset *ws, kiln_backend *be, kiln_err *err) {
    if (!be) return KILN_FAIL(err, KILN_E_INVALID, "%s: placing weights on a NULL backend", ws->what);
    if (ws->be == be) return KILN_OK;
    if (ws->be) return KILN_FAIL(err, KILN_E_INVALID, "%s: weights are already placed on another backend", ws->what);
    merge_ranges(ws);
    for (size_t i = 0; i < ws->n_ranges; i++) {
        kiln_status s = be->ops->place(be, ws->ranges[i].host, ws->ranges[i].bytes, err);
        if (s != KILN_OK) {
            for (size_t j = 0; j < i; j++) be->ops->unplace(be, ws->ranges[j].host);
            return kiln_err_prefix(err, "%s: placing %zu MiB of weights on %s: ", ws->what,
                                   ws->ranges[i].bytes >> 20, be->ops->name);
        }
    }
    ws->be = be;
    return KILN_OK;
}

size_t kiln_wset_placed_bytes(const kiln_wset *ws) {
    size_t n = 0;
    for (size_t i = 0; ws->be && i < ws->n_ranges; i++) n += ws->ranges[i].bytes;
    return n;
}

/* Records a range handed out (and places it at once when the wset is placed already). */
static kiln_status note_range(kiln_wset *ws, const void *host, size_t bytes) {
    if (!bytes) return KILN_OK;
    if (ws->be) {
        /* Already placed: a tensor inside a placed range needs nothing; anything else is placed now. */
        for (size_t i = 0; i < ws->n_ranges; i++) {
            uintptr_t b = (uintptr_t)ws->ranges[i].host, h = (uintptr_t)host;
            if (h >= b && h - b <= ws->ranges[i].bytes && bytes <= ws->ranges[i].bytes - (h - b)) return KILN_OK;
        }
    }
    if (ws->n_ranges == ws->cap_ranges) {
        size_t cap = ws->cap_ranges ? 2 * ws->cap_ranges : 256;
        kiln_wrange *r = kiln_realloc(ws->ranges, cap * sizeof *r);
        if (!r) return KILN_FAIL(ws->err, KILN_E_NOMEM, "%s: out of memory", ws->what);
        ws->ranges = r;
        ws->cap_ranges = cap;
    }
    if (ws->be) KILN_TRY(ws->be->ops->place(ws->be, host, bytes, ws->err));
    ws->ranges[ws->n_ranges++] = (kiln_wrange){host, bytes};
    return KILN_OK;
}

bool kiln_w_has(const kiln_wset *ws, const char *fmt, ...) {
    FORMAT_NAME(name, fmt);
    return kiln_st_find(ws->ck, name) != NULL;
}

void kiln_to_f32(float *dst, const void *src, kiln_dtype dt, size_t n) {
    const unsigned char *p = src;
    for (size_t i = 0; i < n; i++) {
        if (dt == KILN_DT_F32) memcpy(&dst[i], p + 4 * i, 4);
        else {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            dst[i] = dt == KILN_DT_BF16 ? kiln_bf16_to_f32(h) : kiln_f16_to_f32(h);
        }
    }
}

static bool is_quant(kiln_dtype d) { return d == KILN_DT_QBLOCK || d == KILN_DT_F8_E4M3 || d == KILN_DT_F8_E5M2; }

/* Looks the name up and checks a float dtype (or a quantised one, when quant_ok) and the dims (-1 = any). */
static kiln_status lookup(kiln_wset *ws, const char *name, int ndim, const int64_t *want, bool quant_ok,
                          const kiln_st_tensor **out) {
    if (!ws->fp8_scanned) { /* once: a layout kiln cannot read (NVFP4, ...) is refused by name before any use */
        kiln_fp8_info info;
        if (kiln_fp8_scan(ws->ck, &info, ws->err) != KILN_OK) return kiln_err_prefix(ws->err, "%s", ws->what);
        ws->fp8_scanned = 1;
    }
    const kiln_st_tensor *t = kiln_st_find(ws->ck, name);
    if (!t) return KILN_FAIL(ws->err, KILN_E_NOT_FOUND, "%s: tensor '%s' is missing", ws->what, name);
    if (t->dtype == KILN_DT_QBLOCK) {
        const kiln_qtype_info *q = kiln_qtype_get(t->qtype);
        if (!q || !q->dequant)
            return KILN_FAIL(ws->err, KILN_E_UNSUPPORTED, "%s: tensor '%s' is GGML type %s, which kiln cannot "
                             "dequantise (it reads F32, F16, BF16, Q8_0, Q6_K, Q5_K, Q5_0, Q4_K, Q4_0, Q3_K, Q2_K)",
                             ws->what, name, q ? q->name : "?");
    }
    if (is_quant(t->dtype) && !quant_ok)
        return KILN_FAIL(ws->err, KILN_E_UNSUPPORTED, "%s: tensor '%s' is quantised (%s), which kiln reads only for "
                         "matrix weights", ws->what, name, t->dtype == KILN_DT_QBLOCK ? kiln_qtype_get(t->qtype)->name
                                                                                      : kiln_dtype_name(t->dtype));
    if (t->dtype != KILN_DT_BF16 && t->dtype != KILN_DT_F32 && t->dtype != KILN_DT_F16 && !is_quant(t->dtype))
        return KILN_FAIL(ws->err, KILN_E_UNSUPPORTED, "%s: tensor '%s' has dtype %s (want bf16, f16 or f32)",
                         ws->what, name, kiln_dtype_name(t->dtype));
    bool ok = t->ndim == ndim;
    for (int d = 0; ok && d < ndim; d++) ok = want[d] < 0 || t->shape[d] == want[d];
    if (!ok) {
        char ws_[128] = "[", got[128] = "[";
        for (int d = 0; d < ndim; d++)
            snprintf(ws_ + strlen(ws_), sizeof ws_ - strlen(ws_), want[d] < 0 ? "%s*" : "%s%lld", d ? ", " : "",
                     (long long)want[d]);
        for (int d = 0; d < t->ndim; d++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", d ? ", " : "", (long long)t->shape[d]);
        return KILN_FAIL(ws->err, KILN_E_FORMAT, "%s: tensor '%s' has shape %s], expected %s]", ws->what, name,
                         got, ws_);
    }
    *out = t;
    return KILN_OK;
}

kiln_status kiln_w_mat(kiln_wset *ws, kiln_tensor *out, int64_t rows, int64_t cols, const char *fmt, ...) {
    FORMAT_NAME(name, fmt);
    const kiln_st_tensor *t = kiln_st_find(ws->ck, name);
    int64_t want4[4] = {rows, cols, 1, 1}, want2[2] = {rows, cols};
    const bool four = t && t->ndim == 4 && t->dtype != KILN_DT_QBLOCK;
    KILN_TRY(lookup(ws, name, four ? 4 : 2, four ? want4 : want2, true, &t));
    KILN_TRY(note_range(ws, t->data, t->nbytes));
    if (t->dtype == KILN_DT_QBLOCK) {
        *out = kiln_tensor_make_q((void *)t->data, t->qtype, t->shape[0], t->shape[1]);
        return KILN_OK;
    }
    *out = kiln_tensor_make((void *)t->data, t->dtype, 2, (int64_t[]){t->shape[0], t->shape[1]});
    if (t->dtype == KILN_DT_F8_E4M3 || t->dtype == KILN_DT_F8_E5M2) {
        float sc;
        KILN_TRY(kiln_fp8_weight_scale(ws->ck, name, &sc, ws->err));
        if (!(sc == sc) || sc == 0.0f || sc > 3.0e38f || sc < -3.0e38f)
            return KILN_FAIL(ws->err, KILN_E_FORMAT, "%s: the scale of fp8 weight '%s' is %g (must be finite and "
                             "non-zero)", ws->what, name, (double)sc);
        out->qscale = sc;
    }
    return KILN_OK;
}

kiln_status kiln_w_conv(kiln_wset *ws, kiln_tensor *out, int64_t o, int64_t i, int64_t k, const char *fmt, ...) {
    FORMAT_NAME(name, fmt);
    const kiln_st_tensor *t;
    KILN_TRY(lookup(ws, name, 4, (int64_t[]){o, i, k, k}, false, &t));
    KILN_TRY(note_range(ws, t->data, t->nbytes));
    *out = kiln_st_view(t);
    return KILN_OK;
}

kiln_status kiln_w_vec(kiln_wset *ws, kiln_tensor *out, int64_t n, const char *fmt, ...) {
    FORMAT_NAME(name, fmt);
    const kiln_st_tensor *t;
    KILN_TRY(lookup(ws, name, 1, (int64_t[]){n}, true, &t));
    if (ws->n_owned == ws->cap_owned) {
        size_t cap = ws->cap_owned ? 2 * ws->cap_owned : 64;
        void **p = kiln_realloc(ws->owned, cap * sizeof *p);
        if (!p) return KILN_FAIL(ws->err, KILN_E_NOMEM, "%s: out of memory", ws->what);
        ws->owned = p;
        ws->cap_owned = cap;
    }
    float *buf = kiln_malloc((size_t)t->shape[0] * sizeof(float) + 4);
    if (!buf) return KILN_FAIL(ws->err, KILN_E_NOMEM, "%s: out of memory", ws->what);
    if (t->dtype == KILN_DT_QBLOCK) { /* (lookup checked the type; GGUF rows are whole blocks) */
        kiln_status s = kiln_dequant(buf, t->qtype, t->data, (size_t)t->shape[0], ws->err);
        if (s != KILN_OK) {
            kiln_free(buf);
            return kiln_err_prefix(ws->err, "%s: tensor '%s'", ws->what, name);
        }
    } else if (t->dtype == KILN_DT_F8_E4M3 || t->dtype == KILN_DT_F8_E5M2) {
        float sc = 1.0f;
        kiln_status s = kiln_fp8_weight_scale(ws->ck, name, &sc, ws->err);
        if (s != KILN_OK) {
            kiln_free(buf);
            return s;
        }
        if (t->dtype == KILN_DT_F8_E4M3) kiln_e4m3_to_f32_n(buf, t->data, (size_t)t->shape[0]);
        else kiln_e5m2_to_f32_n(buf, t->data, (size_t)t->shape[0]);
        for (int64_t e = 0; e < t->shape[0]; e++) buf[e] *= sc;
    } else {
        kiln_to_f32(buf, t->data, t->dtype, (size_t)t->shape[0]);
    }
    ws->owned[ws->n_owned++] = buf;
    KILN_TRY(note_range(ws, buf, (size_t)t->shape[0] * sizeof(float)));
    *out = kiln_tensor_make(buf, KILN_DT_F32, 1, (int64_t[]){t->shape[0]});
    return KILN_OK;
}

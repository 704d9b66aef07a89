/* weights.c - named, shape-checked weight fetching (see weights.h). */
#include "models/weights.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
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

void kiln_wset_free(kiln_wset *ws) {
    for (size_t i = 0; i < ws->n_owned; i++) kiln_free(ws->owned[i]);
    kiln_free(ws->owned);
    ws->owned = NULL;
    ws->n_owned = ws->cap_owned = 0;
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

/* Looks the name up and checks a float dtype and the dims (-1 = any). */
static kiln_status lookup(kiln_wset *ws, const char *name, int ndim, const int64_t *want,
                          const kiln_st_tensor **out) {
    const kiln_st_tensor *t = kiln_st_find(ws->ck, name);
    if (!t) return KILN_FAIL(ws->err, KILN_E_NOT_FOUND, "%s: tensor '%s' is missing", ws->what, name);
    if (t->dtype != KILN_DT_BF16 && t->dtype != KILN_DT_F32 && t->dtype != KILN_DT_F16)
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
    KILN_TRY(lookup(ws, name, t && t->ndim == 4 ? 4 : 2, t && t->ndim == 4 ? want4 : want2, &t));
    *out = kiln_tensor_make((void *)t->data, t->dtype, 2, (int64_t[]){t->shape[0], t->shape[1]});
    return KILN_OK;
}

kiln_status kiln_w_conv(kiln_wset *ws, kiln_tensor *out, int64_t o, int64_t i, int64_t k, const char *fmt, ...) {
    FORMAT_NAME(name, fmt);
    const kiln_st_tensor *t;
    KILN_TRY(lookup(ws, name, 4, (int64_t[]){o, i, k, k}, &t));
    *out = kiln_st_view(t);
    return KILN_OK;
}

kiln_status kiln_w_vec(kiln_wset *ws, kiln_tensor *out, int64_t n, const char *fmt, ...) {
    FORMAT_NAME(name, fmt);
    const kiln_st_tensor *t;
    KILN_TRY(lookup(ws, name, 1, (int64_t[]){n}, &t));
    if (ws->n_owned == ws->cap_owned) {
        size_t cap = ws->cap_owned ? 2 * ws->cap_owned : 64;
        void **p = kiln_realloc(ws->owned, cap * sizeof *p);
        if (!p) return KILN_FAIL(ws->err, KILN_E_NOMEM, "%s: out of memory", ws->what);
        ws->owned = p;
        ws->cap_owned = cap;
    }
    float *buf = kiln_malloc((size_t)t->shape[0] * sizeof(float) + 4);
    if (!buf) return KILN_FAIL(ws->err, KILN_E_NOMEM, "%s: out of memory", ws->what);
    kiln_to_f32(buf, t->data, t->dtype, (size_t)t->shape[0]);
    ws->owned[ws->n_owned++] = buf;
    *out = kiln_tensor_make(buf, KILN_DT_F32, 1, (int64_t[]){t->shape[0]});
    return KILN_OK;
}

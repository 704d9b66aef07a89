/* ckpt_convert.c - safetensors -> GGUF / fp8 safetensors (see ckpt_convert.h). */
#include "io/ckpt_convert.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "io/detect.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "tensor/convert.h"
#include "tensor/quant.h"

#define SLICE_VALUES ((size_t)4 << 20) /* f32 values converted at a time (16 MiB) */
#define FP8_E4M3_MAX 448.0f

static const char *const format_names[KILN_CONV_COUNT] = {"gguf-q8_0", "gguf-q4_k", "gguf-f16", "fp8-e4m3"};

bool kiln_conv_format_parse(const char *s, kiln_conv_format *out) {
    for (int i = 0; i < KILN_CONV_COUNT; i++)
        if (!strcmp(s, format_names[i])) {
            *out = (kiln_conv_format)i;
            return true;
        }
    return false;
}

const char *kiln_conv_format_name(kiln_conv_format f) { return (unsigned)f < KILN_CONV_COUNT ? format_names[f] : "?"; }

static bool ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

static bool is_float_src(kiln_dtype d) { return d == KILN_DT_BF16 || d == KILN_DT_F16 || d == KILN_DT_F32; }

static bool is_weight(const kiln_st_tensor *t) {
    return t->ndim == 2 && is_float_src(t->dtype) && ends_with(t->name, ".weight");
}

static int64_t numel(const kiln_st_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

/* Widens n source values starting at element `first` to f32. */
static kiln_status widen(float *dst, const kiln_st_tensor *t, size_t first, size_t n, kiln_err *err) {
    const uint8_t *p = (const uint8_t *)t->data + first * kiln_dtype_size(t->dtype);
    return kiln_convert(dst, KILN_DT_F32, p, t->dtype, n, NULL, err);
}

/* ---- GGUF ----------------------------------------------------------------------------------------------------- */

static uint32_t float_type(kiln_dtype d) {
    return d == KILN_DT_BF16 ? KILN_QT_BF16 : d == KILN_DT_F16 ? KILN_QT_F16 : KILN_QT_F32;
}

/* The GGML type tensor t is written as. */
static kiln_status gguf_type(const kiln_st_tensor *t, kiln_conv_format fmt, uint32_t *type, kiln_err *err) {
    if (!is_float_src(t->dtype)) {
        if (t->dtype == KILN_DT_I32) *type = 26;
        else if (t->dtype == KILN_DT_I64) *type = 27;
        else if (t->dtype == KILN_DT_F64) *type = 28;
        else
            return KILN_FAIL(err, KILN_E_UNSUPPORTED, "tensor '%s' is %s, which GGUF cannot hold (convert takes float "
                             "and signed integer tensors)", t->name, kiln_dtype_name(t->dtype));
        return KILN_OK;
    }
    *type = float_type(t->dtype);
    if (!is_weight(t)) return KILN_OK;
    int64_t row = t->shape[1];
    uint32_t want = fmt == KILN_CONV_GGUF_Q4_K ? KILN_QT_Q4_K : fmt == KILN_CONV_GGUF_Q8_0 ? KILN_QT_Q8_0 : KILN_QT_F16;
    if (want == KILN_QT_Q4_K && row % 256) want = KILN_QT_Q8_0; /* fall back to what fits the row */
    if (want == KILN_QT_Q8_0 && row % 32) want = float_type(t->dtype);
    *type = want;
    return KILN_OK;
}

static kiln_status write_gguf_tensor(kiln_gguf_writer *w, const kiln_st_tensor *t, uint32_t type, float *f32,
                                     uint8_t *q, kiln_err *err) {
    if (type == float_type(t->dtype) || !is_float_src(t->dtype)) /* kept exactly: copy the bytes */
        return kiln_gguf_writer_write(w, t->data, t->nbytes, err);
    const kiln_qtype_info *qi = kiln_qtype_get(type);
    size_t total = (size_t)numel(t), row = (size_t)t->shape[t->ndim - 1];
    size_t step = SLICE_VALUES / row * row; /* whole rows (a row is whole blocks) */
    if (!step) step = row;
    for (size_t first = 0; first < total; first += step) {
        size_t n = total - first < step ? total - first : step;
        KILN_TRY(widen(f32, t, first, n, err));
        KILN_TRY(kiln_quantize(q, type, f32, n, err));
        KILN_TRY(kiln_gguf_writer_write(w, q, kiln_qtype_nbytes(qi, n), err));
    }
    return KILN_OK;
}

static kiln_status to_gguf(const kiln_st_file *f, const char *out, kiln_conv_format fmt, kiln_conv_report *rep,
                           float *f32, uint8_t *q, kiln_err *err) {
    size_t n = kiln_st_count(f), plen = strlen(kiln_st_prefix(f));
    kiln_gguf_wspec *specs = kiln_calloc(n ? n : 1, sizeof *specs);
    if (!specs) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
    kiln_status s = KILN_OK;
    for (size_t i = 0; s == KILN_OK && i < n; i++) {
        const kiln_st_tensor *t = kiln_st_at(f, i);
        specs[i].name = t->name + plen;
        s = gguf_type(t, fmt, &specs[i].type, err);
        if (t->ndim > KILN_GGUF_MAX_DIMS && s == KILN_OK)
            s = KILN_FAIL(err, KILN_E_UNSUPPORTED, "tensor '%s' has %d dimensions; GGUF holds at most 4", t->name, t->ndim);
        specs[i].ndim = t->ndim ? t->ndim : 1; /* a scalar becomes [1] */
        specs[i].shape[0] = 1;
        for (int d = 0; d < t->ndim && d < KILN_GGUF_MAX_DIMS; d++) specs[i].shape[d] = t->shape[d];
        if (s == KILN_OK && numel(t) == 0)
            s = KILN_FAIL(err, KILN_E_UNSUPPORTED, "tensor '%s' is empty; GGUF has no empty tensors", t->name);
    }
    kiln_detect_result d;
    kiln_detect(f, &d);
    const char *arch = d.family == KILN_FAMILY_FLUX2_DIT ? "flux2" : d.family == KILN_FAMILY_FLUX1_DIT ? "flux" : "unknown";
    kiln_gguf_wkv kvs[] = {{"general.architecture", KILN_GGUF_STRING, arch, 0},
                           {"general.quantization_version", KILN_GGUF_U32, NULL, 2},
                           {"kiln.converted_as", KILN_GGUF_STRING, kiln_conv_format_name(fmt), 0}};
    kiln_gguf_writer *w = NULL;
    if (s == KILN_OK) s = kiln_gguf_writer_open(out, specs, n, kvs, sizeof kvs / sizeof *kvs, &w, err);
    for (size_t i = 0; s == KILN_OK && i < n; i++) {
        s = write_gguf_tensor(w, kiln_st_at(f, i), specs[i].type, f32, q, err);
        if (s == KILN_OK) {
            rep->per_type[specs[i].type]++;
            rep->out_bytes += kiln_qtype_nbytes(kiln_qtype_get(specs[i].type), (size_t)numel(kiln_st_at(f, i)));
        } else kiln_err_prefix(err, "tensor '%s'", kiln_st_at(f, i)->name);
    }
    if (s == KILN_OK) s = kiln_gguf_writer_finish(w, err);
    else kiln_gguf_writer_abort(w);
    kiln_free(specs);
    return s;
}

/* ---- fp8 safetensors ------------------------------------------------------------------------------------------ */

static kiln_status absmax(const kiln_st_tensor *t, float *f32, float *amax, kiln_err *err) {
    size_t total = (size_t)numel(t);
    *amax = 0;
    for (size_t first = 0; first < total; first += SLICE_VALUES) {
        size_t n = total - first < SLICE_VALUES ? total - first : SLICE_VALUES;
        KILN_TRY(widen(f32, t, first, n, err));
        for (size_t i = 0; i < n; i++) *amax = fmaxf(*amax, fabsf(f32[i]));
    }
    if (!isfinite(*amax))
        return KILN_FAIL(err, KILN_E_INVALID, "tensor '%s' holds inf or NaN; it cannot be scaled to fp8", t->name);
    return KILN_OK;
}

static kiln_status to_fp8(const kiln_st_file *f, const char *out, kiln_conv_report *rep, float *f32, uint8_t *q,
                          kiln_err *err) {
    size_t n = kiln_st_count(f), n_out = 0, n_q = 0;
    kiln_st_spec *specs = kiln_calloc(2 * n + 1, sizeof *specs);
    float *scales = kiln_calloc(n + 1, sizeof *scales);
    char **names = kiln_calloc(n + 1, sizeof *names);
    kiln_status s = specs && scales && names ? KILN_OK : KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
    size_t meta_cap = 64, meta_len = 0;
    char *meta = s == KILN_OK ? kiln_malloc(meta_cap) : NULL;
    if (s == KILN_OK && !meta) s = KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
    if (meta) meta_len = (size_t)snprintf(meta, meta_cap, "{\"format_version\": \"1.0\", \"layers\": {");
    for (size_t i = 0; s == KILN_OK && i < n; i++) {
        const kiln_st_tensor *t = kiln_st_at(f, i);
        if (t->dtype == KILN_DT_F8_E4M3 || t->dtype == KILN_DT_F8_E5M2)
            s = KILN_FAIL(err, KILN_E_INVALID, "tensor '%s' is already fp8; convert takes a bf16/f16/f32 checkpoint",
                          t->name);
        kiln_st_spec *sp = &specs[n_out++];
        sp->name = t->name;
        sp->dtype = is_weight(t) ? KILN_DT_F8_E4M3 : t->dtype;
        sp->ndim = t->ndim;
        memcpy(sp->shape, t->shape, sizeof sp->shape);
        if (s != KILN_OK || !is_weight(t)) continue;
        s = absmax(t, f32, &scales[i], err);
        /* s = max / 448; an all-zero weight gets 1, and one so small that max / 448 underflows gets max */
        float amax = scales[i];
        scales[i] = amax / FP8_E4M3_MAX > 0 ? amax / FP8_E4M3_MAX : amax > 0 ? amax : 1.0f;
        size_t len = strlen(t->name) - strlen(".weight");
        names[i] = kiln_malloc(len + 14);
        if (!names[i]) {
            s = KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
            break;
        }
        snprintf(names[i], len + 14, "%.*s.weight_scale", (int)len, t->name);
        kiln_st_spec *sc = &specs[n_out++];
        sc->name = names[i];
        sc->dtype = KILN_DT_F32;
        sc->ndim = 0;
        /* the layer's entry in _quantization_metadata (canonical name: without the checkpoint's prefix) */
        const char *layer = t->name + strlen(kiln_st_prefix(f));
        size_t need = meta_len + strlen(layer) + 48;
        if (need > meta_cap) {
            char *m = kiln_realloc(meta, meta_cap = 2 * need);
            if (!m) {
                s = KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
                break;
            }
            meta = m;
        }
        meta_len += (size_t)snprintf(meta + meta_len, meta_cap - meta_len, "%s\"%.*s\": {\"format\": \"float8_e4m3fn\"}",
                                     n_q ? ", " : "", (int)(strlen(layer) - strlen(".weight")), layer);
        n_q++;
    }
    if (s == KILN_OK && meta_len + 3 > meta_cap) {
        char *m = kiln_realloc(meta, meta_cap = meta_len + 3);
        if (m) meta = m;
        else s = KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
    }
    if (s == KILN_OK) snprintf(meta + meta_len, meta_cap - meta_len, "}}");
    const char *mk[] = {"_quantization_metadata"}, *mv[] = {meta};
    kiln_st_writer *w = NULL;
    if (s == KILN_OK) s = kiln_st_writer_open(out, specs, n_out, mk, mv, 1, &w, err);
    for (size_t i = 0; s == KILN_OK && i < n; i++) {
        const kiln_st_tensor *t = kiln_st_at(f, i);
        if (!is_weight(t)) {
            s = kiln_st_writer_write(w, t->data, t->nbytes, err);
            rep->per_type[0]++;
            rep->out_bytes += t->nbytes;
            continue;
        }
        size_t total = (size_t)numel(t);
        float scale = scales[i];
        for (size_t first = 0; s == KILN_OK && first < total; first += SLICE_VALUES) {
            size_t k = total - first < SLICE_VALUES ? total - first : SLICE_VALUES;
            s = widen(f32, t, first, k, err);
            for (size_t j = 0; s == KILN_OK && j < k; j++) f32[j] /= scale;
            if (s == KILN_OK) kiln_f32_to_e4m3_n(q, f32, k);
            if (s == KILN_OK) s = kiln_st_writer_write(w, q, k, err);
        }
        if (s == KILN_OK) s = kiln_st_writer_write(w, &scales[i], 4, err);
        rep->per_type[1]++;
        rep->out_bytes += total + 4;
    }
    if (w && s == KILN_OK) s = kiln_st_writer_finish(w, err);
    else kiln_st_writer_abort(w);
    for (size_t i = 0; names && i < n; i++) kiln_free(names[i]);
    kiln_free(names);
    kiln_free(scales);
    kiln_free(specs);
    kiln_free(meta);
    return s;
}

kiln_status kiln_ckpt_convert(const char *in, const char *out, kiln_conv_format fmt, kiln_conv_report *rep,
                              kiln_err *err) {
    memset(rep, 0, sizeof *rep);
    if ((unsigned)fmt >= KILN_CONV_COUNT) return KILN_FAIL(err, KILN_E_INVALID, "unknown conversion format");
    kiln_st_file *f;
    KILN_TRY(kiln_st_open(in, &f, err));
    rep->tensors = kiln_st_count(f);
    for (size_t i = 0; i < rep->tensors; i++) rep->in_bytes += kiln_st_at(f, i)->nbytes;
    float *f32 = kiln_aligned_alloc(SLICE_VALUES * sizeof *f32);
    uint8_t *q = kiln_aligned_alloc(SLICE_VALUES * sizeof *f32); /* any quantised slice is smaller than its f32 */
    kiln_status s = f32 && q ? KILN_OK : KILN_FAIL(err, KILN_E_NOMEM, "out of memory for the conversion buffers");
    if (s == KILN_OK)
        s = fmt == KILN_CONV_FP8_E4M3 ? to_fp8(f, out, rep, f32, q, err) : to_gguf(f, out, fmt, rep, f32, q, err);
    kiln_aligned_free(f32);
    kiln_aligned_free(q);
    kiln_st_close(f);
    return s;
}

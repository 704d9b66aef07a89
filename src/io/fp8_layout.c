/* fp8_layout.c - detect and check the fp8 checkpoint layouts (see fp8_layout.h). */
#include "io/fp8_layout.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

static bool ends_with(const char *s, const char *suf, size_t *stem) {
    size_t n = strlen(s), m = strlen(suf);
    if (n < m || strcmp(s + n - m, suf) != 0) return false;
    *stem = n - m;
    return true;
}

static bool is_fp8(kiln_dtype d) { return d == KILN_DT_F8_E4M3 || d == KILN_DT_F8_E5M2; }

static int64_t numel(const kiln_st_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

/* The tensor named stem + suffix, stem being the first stem_len bytes of a stored name. */
static const kiln_st_tensor *sibling(const kiln_st_file *f, const char *name, size_t stem_len, const char *suffix) {
    char full[512];
    if (stem_len + strlen(suffix) >= sizeof full) return NULL;
    snprintf(full, sizeof full, "%.*s%s", (int)stem_len, name, suffix);
    return kiln_st_find(f, full);
}

static const char *const supported_formats[] = {"float8_e4m3fn", "float8_e5m2"};

/* One per-layer declaration {"format": F, ...} for layer (a name without ".weight"). */
static kiln_status check_layer_format(const kiln_st_file *f, const char *where, const char *layer, json_t *cfg,
                                      kiln_err *err) {
    const char *label = kiln_st_label(f);
    const char *fmt = json_string_value(json_object_get(cfg, "format"));
    if (!json_is_object(cfg) || !fmt)
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: %s: layer '%s' has no \"format\" string", label, where, layer);
    bool ok = false;
    for (size_t i = 0; i < sizeof supported_formats / sizeof *supported_formats; i++) ok |= !strcmp(fmt, supported_formats[i]);
    if (!ok)
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: layer '%s' uses quantisation format '%s', which kiln does not "
                         "implement (kiln reads float8_e4m3fn and float8_e5m2)", label, layer, fmt);
    char w[512];
    snprintf(w, sizeof w, "%s.weight", layer);
    const kiln_st_tensor *t = kiln_st_find(f, w);
    if (!t || !is_fp8(t->dtype))
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: %s declares layer '%s' as %s, but '%s' %s", label, where, layer, fmt,
                         w, t ? "is not an fp8 tensor" : "does not exist");
    if ((t->dtype == KILN_DT_F8_E4M3) != (strcmp(fmt, "float8_e4m3fn") == 0))
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: %s declares layer '%s' as %s, but '%s' is %s", label, where, layer,
                         fmt, w, kiln_dtype_name(t->dtype));
    return KILN_OK;
}

static kiln_status scan_metadata_json(const kiln_st_file *f, kiln_fp8_info *q, kiln_err *err) {
    const char *text = kiln_st_metadata(f, "_quantization_metadata");
    if (!text) return KILN_OK;
    json_error_t je;
    json_t *root = json_loads(text, 0, &je);
    kiln_status s = KILN_OK;
    json_t *layers = json_object_get(root, "layers");
    if (!json_is_object(root) || !json_is_object(layers))
        s = KILN_FAIL(err, KILN_E_FORMAT, "%s: metadata _quantization_metadata is not a JSON object with a \"layers\" "
                      "object%s%s", kiln_st_label(f), root ? "" : ": ", root ? "" : je.text);
    const char *layer;
    json_t *cfg;
    if (s == KILN_OK) json_object_foreach(layers, layer, cfg) {
        s = check_layer_format(f, "_quantization_metadata", layer, cfg, err);
        if (s != KILN_OK) break;
        q->n_meta_layers++;
    }
    q->has_metadata_json = true;
    json_decref(root);
    return s;
}

static kiln_status scan_comfy_quant(const kiln_st_file *f, const kiln_st_tensor *t, size_t stem, kiln_fp8_info *q,
                                    kiln_err *err) {
    char layer[512];
    snprintf(layer, sizeof layer, "%.*s", (int)stem, t->name);
    if (t->dtype != KILN_DT_U8 || t->ndim != 1)
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: '%s' is not a U8 vector of JSON bytes", kiln_st_label(f), t->name);
    json_error_t je;
    json_t *cfg = json_loadb(t->data, t->nbytes, 0, &je);
    if (!cfg)
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: '%s' is not valid JSON: %s", kiln_st_label(f), t->name, je.text);
    kiln_status s = check_layer_format(f, t->name, layer, cfg, err);
    json_decref(cfg);
    q->has_comfy_quant_tensors = true;
    if (s == KILN_OK) q->n_meta_layers++;
    return s;
}

/* A per-tensor scale: a one-value float32 tensor beside an fp8 weight. */
static kiln_status check_scale(const kiln_st_file *f, const kiln_st_tensor *t, size_t stem, const char *weight_suffix,
                               kiln_err *err) {
    const char *label = kiln_st_label(f);
    const kiln_st_tensor *w = sibling(f, t->name, stem, weight_suffix);
    if (w && w->dtype == KILN_DT_U8 && t->dtype == KILN_DT_F8_E4M3 && numel(t) > 1)
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: '%s' holds NVFP4 block scales (fp8 %lld values beside a packed U8 "
                         "weight); kiln does not implement NVFP4", label, t->name, (long long)numel(t));
    if (!w || !is_fp8(w->dtype))
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: scale '%s' has no fp8 weight '%.*s%s'%s", label, t->name, (int)stem,
                         t->name, weight_suffix, w ? " (that tensor is not fp8)" : "");
    if (t->dtype != KILN_DT_F32) {
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: scale '%s' is %s; a per-tensor fp8 scale is float32", label, t->name,
                         kiln_dtype_name(t->dtype));
    }
    if (numel(t) != 1) {
        char sb[96];
        kiln_tensor v = kiln_st_view(t);
        kiln_shape_str(&v, sb, sizeof sb);
        if (w->ndim >= 1 && numel(t) == w->shape[0])
            return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: scale '%s' of shape %s is per output channel; kiln reads "
                             "per-tensor fp8 scales only", label, t->name, sb);
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: scale '%s' has shape %s; a per-tensor scale holds one value", label,
                         t->name, sb);
    }
    return KILN_OK;
}

kiln_status kiln_fp8_scan(const kiln_st_file *f, kiln_fp8_info *q, kiln_err *err) {
    memset(q, 0, sizeof *q);
    const char *label = kiln_st_label(f);
    bool scaled_marker = kiln_st_find(f, "scaled_fp8") != NULL;
    /* first the declarations (metadata JSON, comfy_quant tensors, NVFP4's second scale), so that a format kiln
     * does not implement is refused by its name before its tensors fail the fp8 checks */
    KILN_TRY(scan_metadata_json(f, q, err));
    for (size_t i = 0; i < kiln_st_count(f); i++) {
        const kiln_st_tensor *t = kiln_st_at(f, i);
        size_t stem;
        if (ends_with(t->name, ".weight_scale_2", &stem))
            return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: '%s' is NVFP4's second-level scale; kiln does not implement "
                             "NVFP4", label, t->name);
        if (ends_with(t->name, ".comfy_quant", &stem)) KILN_TRY(scan_comfy_quant(f, t, stem, q, err));
    }
    for (size_t i = 0; i < kiln_st_count(f); i++) {
        const kiln_st_tensor *t = kiln_st_at(f, i);
        size_t stem;
        if (ends_with(t->name, ".comfy_quant", &stem)) continue;
        else if (ends_with(t->name, ".weight_scale", &stem)) {
            KILN_TRY(check_scale(f, t, stem, ".weight", err));
            q->n_weight_scales++;
        } else if (ends_with(t->name, ".input_scale", &stem) || ends_with(t->name, ".scale_input", &stem)) {
            KILN_TRY(check_scale(f, t, stem, ".weight", err));
            q->n_input_scales++;
        } else if (ends_with(t->name, ".scale_weight", &stem)) {
            KILN_TRY(check_scale(f, t, stem, ".weight", err));
            q->n_weight_scales++;
        } else if (is_fp8(t->dtype) && strcmp(t->name, "scaled_fp8") != 0) {
            if (t->dtype == KILN_DT_F8_E4M3) q->n_e4m3++;
            else q->n_e5m2++;
        }
    }
    if (!q->n_e4m3 && !q->n_e5m2) {
        if (q->n_weight_scales || q->n_meta_layers)
            return KILN_FAIL(err, KILN_E_INTERNAL, "%s: scales without fp8 weights passed the checks", label);
        return KILN_OK;
    }
    if (scaled_marker) q->scheme = KILN_FP8_SCALED;
    else if (q->n_weight_scales || q->n_meta_layers) q->scheme = KILN_FP8_COMFY_QUANT;
    else q->scheme = KILN_FP8_UNSCALED;
    if (q->scheme == KILN_FP8_UNSCALED) return KILN_OK;
    /* in a scaled layout every fp8 weight needs its scale */
    const char *want = q->scheme == KILN_FP8_SCALED ? ".scale_weight" : ".weight_scale";
    for (size_t i = 0; i < kiln_st_count(f); i++) {
        const kiln_st_tensor *t = kiln_st_at(f, i);
        size_t stem;
        if (!is_fp8(t->dtype) || !ends_with(t->name, ".weight", &stem)) continue;
        if (!sibling(f, t->name, stem, want))
            return KILN_FAIL(err, KILN_E_FORMAT, "%s: fp8 weight '%s' has no '%.*s%s' (the %s layout scales every fp8 "
                             "weight)", label, t->name, (int)stem, t->name, want, kiln_fp8_scheme_name(q->scheme));
    }
    return KILN_OK;
}

const char *kiln_fp8_scheme_name(kiln_fp8_scheme s) {
    switch (s) {
    case KILN_FP8_COMFY_QUANT: return "comfy-quant";
    case KILN_FP8_SCALED: return "scaled-fp8";
    case KILN_FP8_UNSCALED: return "unscaled";
    default: return "none";
    }
}

kiln_status kiln_fp8_weight_scale(const kiln_st_file *f, const char *name, float *scale, kiln_err *err) {
    const kiln_st_tensor *w = kiln_st_find(f, name);
    size_t stem;
    if (!w || !is_fp8(w->dtype) || !ends_with(w->name, ".weight", &stem))
        return KILN_FAIL(err, KILN_E_NOT_FOUND, "%s: '%s' is not an fp8 weight", kiln_st_label(f), name);
    const kiln_st_tensor *s = sibling(f, w->name, stem, ".weight_scale");
    if (!s) s = sibling(f, w->name, stem, ".scale_weight");
    if (!s) {
        *scale = 1.0f;
        return KILN_OK;
    }
    if (s->dtype != KILN_DT_F32 || numel(s) != 1)
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: '%s' is not a one-value float32 scale", kiln_st_label(f), s->name);
    memcpy(scale, s->data, 4);
    return KILN_OK;
}

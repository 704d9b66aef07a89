/* fp8_layout.h - which fp8 quantisation layout a safetensors checkpoint uses, checked tensor by tensor.
 *
 *     kiln_fp8_info q;
 *     if (kiln_fp8_scan(ck, &q, &err) != KILN_OK) ...   // corrupt (KILN_E_FORMAT) or not implemented (UNSUPPORTED)
 *     printf("%s: %zu e4m3 weights\n", kiln_fp8_scheme_name(q.scheme), q.n_e4m3);
 *
 * Layouts (facts from ComfyUI's QUANTIZATION.md and its loaders):
 *   comfy-quant  ComfyUI's mixed-precision format, which Black Forest Labs' own fp8 releases use: an fp8
 *                (e4m3fn) `X.weight` with a float32 one-value `X.weight_scale` (real weight = fp8 value x scale)
 *                and optionally a float32 one-value `X.input_scale` (for fp8 activations; kiln computes in bf16
 *                and only records it). Which layers are quantised, and how, is said per layer: by the
 *                `_quantization_metadata` JSON in the safetensors metadata ({"format_version", "layers": {X:
 *                {"format": "float8_e4m3fn"}}}) and/or by a `X.comfy_quant` U8 tensor holding {"format": ...}.
 *   scaled-fp8   ComfyUI's older "scaled fp8" files: a `scaled_fp8` marker tensor, `X.scale_weight` (and
 *                optionally `X.scale_input`) float32 one-value scales beside fp8 `X.weight`.
 *   unscaled     fp8 weights and no scales at all: a plain cast (scale 1).
 *   none         no fp8 weight.
 * Refused by name (KILN_E_UNSUPPORTED): any per-layer format other than float8_e4m3fn / float8_e5m2 (nvfp4,
 * int8_blockwise, mxfp8, ...), NVFP4's block scales (an fp8 `weight_scale` with more than one value beside a U8
 * weight) and `weight_scale_2`, per-channel scales. Refused as corrupt (KILN_E_FORMAT): a scale that is not a
 * one-value float32 tensor, a scale or metadata entry with no matching fp8 weight, an fp8 weight without its
 * scale in a scaled layout, malformed metadata JSON. Every message names the tensor or layer.
 */
#ifndef KILN_IO_FP8_LAYOUT_H
#define KILN_IO_FP8_LAYOUT_H

#include <stddef.h>

#include "io/safetensors.h"

typedef enum kiln_fp8_scheme {
    KILN_FP8_NONE = 0,
    KILN_FP8_COMFY_QUANT,
    KILN_FP8_SCALED,
    KILN_FP8_UNSCALED,
} kiln_fp8_scheme;

typedef struct kiln_fp8_info {
    kiln_fp8_scheme scheme;
    size_t n_e4m3, n_e5m2;               /* fp8 weight tensors */
    size_t n_weight_scales, n_input_scales;
    size_t n_meta_layers;                /* layers named by per-layer metadata (either source) */
    bool has_metadata_json, has_comfy_quant_tensors;
} kiln_fp8_info;

kiln_status kiln_fp8_scan(const kiln_st_file *f, kiln_fp8_info *out, kiln_err *err);
const char *kiln_fp8_scheme_name(kiln_fp8_scheme s); /* "comfy-quant", "scaled-fp8", "unscaled", "none" */
/* The factor that turns the stored fp8 values of weight `name` (canonical name, e.g. "img_in.weight") into real
 * ones: its weight_scale / scale_weight, or 1 for an unscaled layout. KILN_E_NOT_FOUND if name is not an fp8
 * weight. Call on a file kiln_fp8_scan accepted. */
kiln_status kiln_fp8_weight_scale(const kiln_st_file *f, const char *name, float *scale, kiln_err *err);

#endif

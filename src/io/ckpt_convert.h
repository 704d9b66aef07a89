/* ckpt_convert.h - write a bf16 (or f16/f32) safetensors checkpoint as GGUF or as fp8 safetensors, so users can
 * make the quantised files themselves (`kiln convert`).
 *
 *     kiln_ckpt_convert("flux-2-klein-4b.safetensors", "klein-Q4_K.gguf", KILN_CONV_GGUF_Q4_K, &rep, &err);
 *
 * What is quantised: every 2-D tensor whose name ends in ".weight" (the linear layers). Everything else (biases,
 * norm scales, 1-D and scalar tensors) is kept exactly: in GGUF as BF16 / F16 / F32 (its source type), in fp8
 * output as it was. A weight whose row length is not whole blocks of the target falls back, in GGUF, to the
 * next type that fits (Q4_K -> Q8_0 -> the source float type); the report counts each choice.
 * GGUF output: names as in the source minus a detected ComfyUI prefix, shapes reversed into ne (GGUF's order),
 * general.architecture from the detected family ("flux2" or "flux"; "unknown" otherwise) and
 * general.quantization_version 2. Quantisers: tensor/quant.h (Q8_0 bit-exact with the gguf package).
 * fp8 output: ComfyUI's comfy-quant layout (io/fp8_layout.h): X.weight as e4m3fn of w / s with s = max|w| / 448
 * (s = 1 for an all-zero weight, s = max|w| if max|w| / 448 underflows to 0; values round to nearest even and saturate at 448), X.weight_scale = s (float32,
 * shape []), and _quantization_metadata naming every quantised layer as float8_e4m3fn. No input_scale (it needs
 * calibration; kiln computes activations in bf16).
 * Tensors are converted a slice of rows at a time (at most ~16 MiB of f32), so memory stays small. Output is
 * written atomically (PATH.tmp, fsync, rename): a failed conversion leaves nothing at OUT.
 */
#ifndef KILN_IO_CKPT_CONVERT_H
#define KILN_IO_CKPT_CONVERT_H

#include <stdbool.h>
#include <stddef.h>

#include "base/status.h"

typedef enum kiln_conv_format {
    KILN_CONV_GGUF_Q8_0,
    KILN_CONV_GGUF_Q4_K,
    KILN_CONV_GGUF_F16,
    KILN_CONV_FP8_E4M3,
    KILN_CONV_COUNT
} kiln_conv_format;

typedef struct kiln_conv_report {
    size_t tensors;
    size_t per_type[64]; /* GGUF: tensors written per GGML type id; fp8: [0] kept, [1] quantised */
    unsigned long long in_bytes, out_bytes;
} kiln_conv_report;

/* "gguf-q8_0", "gguf-q4_k", "gguf-f16", "fp8-e4m3"; false if unknown. */
bool kiln_conv_format_parse(const char *s, kiln_conv_format *out);
const char *kiln_conv_format_name(kiln_conv_format f);

kiln_status kiln_ckpt_convert(const char *in, const char *out, kiln_conv_format fmt, kiln_conv_report *rep,
                              kiln_err *err);

#endif

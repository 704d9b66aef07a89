/* weights.h - fetching a model's weights from a checkpoint by name, with shapes checked.
 *
 * Matrices and conv kernels stay in the checkpoint's mapping, in their stored dtype (bf16 or f32): the
 * returned kiln_tensor is a view, valid until the checkpoint is closed. Small vectors (norm gains, biases,
 * batch-norm statistics) are converted to f32 copies owned by the kiln_wset, because the ops take them as f32.
 *
 *     kiln_wset ws;
 *     kiln_wset_init(&ws, ck, "DiT");
 *     kiln_tensor w, g;
 *     KILN_TRY(kiln_w_mat(&ws, &w, 3072, 128, "img_in.weight"));              // -1 = any size, read it
 *     KILN_TRY(kiln_w_vec(&ws, &g, 128, "double_blocks.%d.img_attn.norm.query_norm.scale", i));
 *     ...
 *     KILN_TRY(kiln_wset_place(&ws, be, &err));   // once, at load: the weights now live on be
 *     ...
 *     kiln_wset_free(&ws);   // unplaces them and frees the f32 copies (views stay valid while ck is open)
 *
 * Placement (the residency contract of compute/ops.h): ops only receive memory the backend owns. The wset
 * records every byte range it handed out (checkpoint views and its f32 copies); kiln_wset_place places them on a
 * backend once - zero copy on the CPU, one upload on CUDA - merging ranges that touch, so a model's tensors,
 * views into them (the Q/K/V rows of a fused QKV weight, an embedding row) included, are the backend's. Weights
 * fetched after placement are placed at once. The placement ends in kiln_wset_free, which must run before the
 * backend is closed and the checkpoint unmapped; a model released and loaded again is placed again (no cache
 * can hand the new model the old model's copy).
 *
 * Errors (in ws.err, also returned): KILN_E_NOT_FOUND for a missing tensor, KILN_E_FORMAT for a wrong shape
 * or dtype - each message names the model, the tensor, what was expected and what was found.
 */
#ifndef KILN_MODELS_WEIGHTS_H
#define KILN_MODELS_WEIGHTS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "io/safetensors.h"
#include "tensor/tensor.h"

typedef struct kiln_wrange {
    const void *host;
    size_t bytes;
} kiln_wrange;

typedef struct kiln_wset {
    const kiln_st_file *ck;
    const char *what;  /* "DiT", "Qwen3", "VAE": prefix of error messages */
    kiln_err *err;
    void **owned;
    size_t n_owned, cap_owned;
    kiln_wrange *ranges; /* every range handed out (before placement: to place; after: what was placed) */
    size_t n_ranges, cap_ranges;
    struct kiln_backend *be; /* where the ranges are placed; NULL before kiln_wset_place */
    int fp8_scanned;         /* 0 not yet, 1 the checkpoint's fp8 layout (io/fp8_layout.h) was accepted */
} kiln_wset;

void kiln_wset_init(kiln_wset *ws, const kiln_st_file *ck, const char *what, kiln_err *err);
/* Unplaces (if placed) and frees the f32 copies. */
void kiln_wset_free(kiln_wset *ws);
/* Places every weight handed out so far on be (see above). Once per wset: placing on a second backend is
 * KILN_E_INVALID. On failure nothing stays placed. */
kiln_status kiln_wset_place(kiln_wset *ws, struct kiln_backend *be, kiln_err *err);
/* Bytes placed (0 before placement). */
size_t kiln_wset_placed_bytes(const kiln_wset *ws);

/* True when the checkpoint holds the (printf-formatted) name. */
bool kiln_w_has(const kiln_wset *ws, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A 2-D weight [rows, cols] (bf16/f32/f16 view). rows or cols -1: any (the tensor's own). 4-D [o,i,1,1]
 * (1x1 convs) are accepted and viewed as [o, i].
 * Quantised weights stay quantised (views into the mapping; the matmul widens them per K slice, see
 * compute/ops.h): GGML blocks from a GGUF file (dtype KILN_DT_QBLOCK, qtype set; 2-D only) and fp8 e4m3/e5m2
 * with the per-tensor scale of the checkpoint's fp8 layout in qscale (BFL/ComfyUI weight_scale, ComfyUI
 * scaled-fp8 scale_weight, or none). The layout is checked once per wset, on the first fetch (kiln_fp8_scan:
 * NVFP4 block scales and other formats are refused by name there); a scale that is not finite and non-zero is
 * KILN_E_FORMAT. Only kiln_w_mat hands out quantised tensors; kiln_w_vec dequantises into its f32 copy and
 * kiln_w_conv refuses them. */
kiln_status kiln_w_mat(kiln_wset *ws, kiln_tensor *out, int64_t rows, int64_t cols, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* A conv kernel [o, i, k, k] view; any dim -1 = any. */
kiln_status kiln_w_conv(kiln_wset *ws, kiln_tensor *out, int64_t o, int64_t i, int64_t k, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* A 1-D vector [n] as an f32 copy owned by ws. n -1: any. */
kiln_status kiln_w_vec(kiln_wset *ws, kiln_tensor *out, int64_t n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Converts n values of dtype dt (f32, bf16, f16) at src to f32. */
void kiln_to_f32(float *dst, const void *src, kiln_dtype dt, size_t n);

#endif

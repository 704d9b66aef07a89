/* embed.h - token embedding lookup, for a table in any stored dtype (the text encoders share it).
 *
 *     KILN_TRY(kiln_embed_rows(be, &m->embed, ids, R, &X, "Qwen3", &err));   // X f32 [R, D]: row i = embed[ids[i]]
 *
 * A bf16/f16/f32 table: one backend copy per row (widened to f32). A GGML-quantised table (a GGUF token_embd,
 * dtype KILN_DT_QBLOCK) stays quantised: only the rows the ids name are dequantised, on the host from the
 * mapping (row ids[i] is the ids[i]-th run of stride[0] bytes, whole blocks), into a staging buffer uploaded
 * once - never the whole [V, D] table (151936 x 2560 floats would be 1.5 GB for Qwen3-4B).
 * ids must be in [0, rows) (the caller checks, with its own message). X: contiguous f32 [n, D] backend memory.
 * Errors: KILN_E_NOMEM, the backend's, KILN_E_UNSUPPORTED for a GGML type kiln cannot dequantise. */
#ifndef KILN_MODELS_EMBED_H
#define KILN_MODELS_EMBED_H

#include <stdint.h>

#include "base/status.h"
#include "compute/ops.h"

kiln_status kiln_embed_rows(kiln_backend *be, const kiln_tensor *table, const int32_t *ids, int64_t n,
                            kiln_tensor *X, const char *what, kiln_err *err);

#endif

/* safetensors.h - read (mmap, strictly validated) and write safetensors checkpoints.
 *
 * A checkpoint is one .safetensors file, a sharded set named by a *.safetensors.index.json, or a folder
 * holding either. Tensors are memory-mapped: opening copies nothing and tensor data pointers point into the
 * mapping (read-only), valid until kiln_st_close.
 *
 *     kiln_st_file *ck;
 *     if (kiln_st_open("flux-2-klein-4b.safetensors", &ck, &err) != KILN_OK) return err.code;
 *     const kiln_st_tensor *t = kiln_st_find(ck, "img_in.weight");          // O(1); NULL if absent
 *     kiln_tensor w = kiln_st_view(t);                                     // bf16 [3072, 128] view
 *     kiln_st_close(ck);
 *
 * Validation on open (each failure is KILN_E_FORMAT with a message naming the file and the problem): file
 * shorter than 8 bytes; header length 0, over 100 MB or past the end of the file; header not UTF-8 JSON or
 * not an object; duplicate tensor names; a name that is empty or not UTF-8; unknown dtype; shape not a list of
 * non-negative integers or more than KILN_MAX_DIMS dims; data_offsets not [begin, end] with begin <= end;
 * end - begin != numel x dtype size; a range past the end of the file; overlapping ranges; `__metadata__` not a
 * string-to-string object. Shards: every file named in the index exists and holds the tensors the index says.
 *
 * Alignment: a tensor's data is aligned to its element size only if the file was laid out that way (the
 * reference writer and `kiln mkweights` order tensors by decreasing dtype size after an 8-byte-padded header;
 * kiln_st_writer keeps the caller's order). The format does not promise it: check (uintptr_t)t->data % size
 * before loading elements in place from files of unknown origin.
 *
 * Key prefixes: kiln_st_find tries the name as given, then with the prefix detected at open (for example
 * `model.diffusion_model.` in ComfyUI files), so callers use canonical names. A prefix is detected when EVERY
 * tensor name starts with one of: `model.diffusion_model.`, `diffusion_model.`, `first_stage_model.`,
 * `text_encoders.qwen3_4b.transformer.`, `vae.`.
 *
 * Errors: KILN_E_FORMAT for anything malformed (above), KILN_E_NOT_FOUND for a missing file or shard,
 * KILN_E_IO for a failed open/mmap, KILN_E_INVALID for a folder holding several checkpoints, KILN_E_NOMEM.
 * On failure *out is NULL and nothing is left mapped or allocated. Thread safety: an open file is immutable;
 * any number of threads may query it concurrently.
 */
#ifndef KILN_IO_SAFETENSORS_H
#define KILN_IO_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "io/gguf_te.h"
#include "tensor/tensor.h"

#define KILN_ST_MAX_HEADER (100u * 1024 * 1024)

typedef struct kiln_st_file kiln_st_file;

typedef struct kiln_st_tensor {
    const char *name; /* full name as stored (with any prefix) */
    kiln_dtype dtype;
    int ndim;
    int64_t shape[KILN_MAX_DIMS];
    const void *data; /* into the mapping */
    size_t nbytes;
    int shard; /* index of the file that holds it (0 for a single file) */
    uint32_t qtype; /* dtype KILN_DT_QBLOCK (a GGUF file): the GGML type id (tensor/quant.h) */
} kiln_st_tensor;

/* ComfyUI's all-in-one checkpoints (CheckpointLoaderSimple's files: the flux_schnell / flux_dev checkpoint
 * templates' flux1-schnell-fp8.safetensors) hold each model of a FLUX.1 pipeline under its own prefix
 * (comfy/supported_models.py Flux: unet under model.diffusion_model., text_encoder_key_prefix text_encoders. with
 * clip_l. and t5xxl. and their .transformer., vae_key_prefix vae.). */
#define KILN_CKPT_DIT "model.diffusion_model."
#define KILN_CKPT_CLIP_L "text_encoders.clip_l.transformer."
#define KILN_CKPT_T5XXL "text_encoders.t5xxl.transformer."
#define KILN_CKPT_VAE "vae."

/* Opens one model of a file that may be such a checkpoint: when path holds tensors under two or more of the four
 * prefixes above, only the tensors under `part` (one of them) are kept, found by their names without it (every
 * other query sees the part alone: count, at, detection); KILN_E_NOT_FOUND when the checkpoint lacks the part.
 * Any other file opens exactly as kiln_st_open opens it. The part shares nothing with other opens of the file. */
kiln_status kiln_st_open_part(const char *path, const char *part, kiln_st_file **out, kiln_err *err);
/* True when path is such a checkpoint (two or more of the prefixes). Unreadable files: false. */
bool kiln_st_is_checkpoint(const kiln_st_file *f);

/* path: a .safetensors file, a .safetensors.index.json, or a folder with exactly one of those - or a GGUF file
 * (detected by its magic): its tensors as entries of this kind, F32/F16/BF16 as those dtypes,
 * block-quantised ones as KILN_DT_QBLOCK with the GGML type in qtype (PyTorch-order shapes), the GGUF file's
 * strict validation (io/gguf.h) included; GGUF metadata is not exposed as safetensors metadata. A llama.cpp-named
 * Qwen3 / T5 text encoder GGUF is also validated against its metadata and renamed (kiln_st_gguf_te). */
kiln_status kiln_st_open(const char *path, kiln_st_file **out, kiln_err *err);
/* Parses a safetensors image already in memory (for the fuzzer and tests). The buffer must outlive the result. */
kiln_status kiln_st_open_memory(const void *buf, size_t len, const char *label, kiln_st_file **out,
                                kiln_err *err);
void kiln_st_close(kiln_st_file *f);

size_t kiln_st_count(const kiln_st_file *f);
const kiln_st_tensor *kiln_st_at(const kiln_st_file *f, size_t i); /* in file order (sorted by offset) */
const kiln_st_tensor *kiln_st_find(const kiln_st_file *f, const char *name);
/* The common prefix stripped by kiln_st_find ("" if none). */
const char *kiln_st_prefix(const kiln_st_file *f);
/* __metadata__ value for key, or NULL. */
const char *kiln_st_metadata(const kiln_st_file *f, const char *key);
size_t kiln_st_metadata_count(const kiln_st_file *f);
void kiln_st_metadata_at(const kiln_st_file *f, size_t i, const char **key, const char **value);
size_t kiln_st_shard_count(const kiln_st_file *f);
const char *kiln_st_shard_path(const kiln_st_file *f, size_t i);
/* A kiln_tensor view of t (CPU, contiguous, read-only data). */
kiln_tensor kiln_st_view(const kiln_st_tensor *t);
/* Looks a tensor up and checks dtype and shape (ndim + dims); a clear KILN_E_FORMAT / KILN_E_NOT_FOUND else.
 * Wildcards: dtype KILN_DT_COUNT accepts any dtype; ndim -1 accepts any shape; a shape entry -1 accepts any
 * size in that dimension; shape NULL checks ndim only. out may be NULL (existence/shape check only). */
kiln_status kiln_st_get(const kiln_st_file *f, const char *name, kiln_dtype dtype, int ndim,
                        const int64_t *shape, kiln_tensor *out, kiln_err *err);
/* The path (or label) the checkpoint was opened from. Valid until kiln_st_close. */
const char *kiln_st_label(const kiln_st_file *f);
/* A text-encoder GGUF in llama.cpp's naming (Qwen3, T5; io/gguf_te.h): its validated metadata, which the model
 * loaders read instead of a config.json; its tensors are listed under their transformers names. NULL for any
 * other checkpoint. Valid until kiln_st_close. */
const kiln_gguf_te *kiln_st_gguf_te(const kiln_st_file *f);

/* ---- writer: streams tensors to a file; the header is written first, so all names/shapes come up front. ---- */
typedef struct kiln_st_writer kiln_st_writer;
typedef struct kiln_st_spec {
    const char *name;
    kiln_dtype dtype;
    int ndim;
    int64_t shape[KILN_MAX_DIMS];
} kiln_st_spec;

/* Writes to path + ".tmp" and renames on finish, so a failed write never leaves a half file at path.
 * metadata: NULL or n_meta key/value pairs. */
kiln_status kiln_st_writer_open(const char *path, const kiln_st_spec *specs, size_t n, const char *const *meta_keys,
                                const char *const *meta_values, size_t n_meta, kiln_st_writer **out,
                                kiln_err *err);
/* Appends bytes of the current tensor (tensors in spec order; each exactly its byte size in total). */
kiln_status kiln_st_writer_write(kiln_st_writer *w, const void *data, size_t bytes, kiln_err *err);
/* Checks every byte was written, fsyncs, renames into place. Frees w in all cases. */
kiln_status kiln_st_writer_finish(kiln_st_writer *w, kiln_err *err);
/* Abandons the write and removes the temporary file. NULL is a no-op. */
void kiln_st_writer_abort(kiln_st_writer *w);
/* Total data bytes the header declares (sum of all tensors' sizes). */
uint64_t kiln_st_writer_data_bytes(const kiln_st_writer *w);
/* Advances over bytes of data without writing them, leaving a hole (a sparse file: reads give zeros, the
 * disk holds nothing). For tests and layout checks of full-size checkpoints. KILN_E_INVALID past the end. */
kiln_status kiln_st_writer_skip(kiln_st_writer *w, uint64_t bytes, kiln_err *err);

#endif

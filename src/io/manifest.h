/* manifest.h - reads a `kiln-manifest/1` file (kiln_ckpt_manifest; bench/manifest.h is the unrelated prompt
 * bank): the full tensor list (names, dtypes, shapes) of a real checkpoint layout, without the weights.
 * `kiln mkweights` turns one into random-weight files (mkweights.h); loader tests use them to know what a
 * full-size checkpoint holds. Format: tests/data/manifests/README.md.
 *
 *     kiln_ckpt_manifest *m;
 *     if (kiln_ckpt_manifest_load("tests/data/manifests/flux2-klein-4b.dit.bfl.json", &m, &err) != KILN_OK) ...
 *     printf("%s: %zu files, %llu bytes\n", m->model, m->n_files, (unsigned long long)m->total_bytes);
 *     kiln_ckpt_manifest_free(m);
 *
 * Validation is strict (KILN_E_FORMAT naming the manifest and the entry): format must be "kiln-manifest/1";
 * model non-empty; component one of dit|text_encoder|vae|folder; layout one of bfl|diffusers|hf; every path
 * relative, without `..` or empty components; file paths end in .safetensors and are unique; every file has
 * at least one tensor; tensor names non-empty, UTF-8 and unique across the manifest; dtypes known; shapes of
 * at most 8 non-negative integers; every size overflow-checked (total_bytes fits in 63 bits); metadata a
 * string-to-string object; index.files (if given) names files of the manifest. Unknown keys are ignored with
 * a warning (so the format can grow). All strings point into the manifest and live until kiln_ckpt_manifest_free.
 */
#ifndef KILN_IO_MANIFEST_H
#define KILN_IO_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "tensor/tensor.h"

typedef struct kiln_ckpt_manifest_tensor {
    const char *name;
    kiln_dtype dtype;
    int ndim;
    int64_t shape[KILN_MAX_DIMS];
    uint64_t bytes;
} kiln_ckpt_manifest_tensor;

typedef struct kiln_ckpt_manifest_file {
    const char *path; /* relative to the output folder */
    kiln_ckpt_manifest_tensor *tensors;
    size_t n_tensors;
    const char **meta_keys, **meta_values; /* __metadata__ (n_meta pairs) */
    size_t n_meta;
    uint64_t bytes; /* tensor data bytes */
    bool in_index;  /* covered by the shard index */
} kiln_ckpt_manifest_file;

typedef struct kiln_ckpt_manifest_extra {
    const char *path;
    char *json_text; /* the "json" value, pretty-printed, ready to write */
} kiln_ckpt_manifest_extra;

typedef struct kiln_ckpt_manifest {
    const char *model, *component, *layout, *source;
    kiln_ckpt_manifest_file *files;
    size_t n_files;
    const char *index_path; /* NULL: no shard index */
    kiln_ckpt_manifest_extra *extras;
    size_t n_extras;
    const char *copy_tokenizer; /* NULL: none; else the subfolder that receives the tokenizer files */
    uint64_t total_bytes;       /* all tensor data */
    uint64_t total_params;      /* all elements */
    size_t total_tensors;
    void *json_; /* private: the parsed document the strings point into */
} kiln_ckpt_manifest;

kiln_status kiln_ckpt_manifest_load(const char *path, kiln_ckpt_manifest **out, kiln_err *err);
/* Parses text[0..len); label names it in messages. */
kiln_status kiln_ckpt_manifest_parse(const char *text, size_t len, const char *label, kiln_ckpt_manifest **out,
                                kiln_err *err);
void kiln_ckpt_manifest_free(kiln_ckpt_manifest *m);
/* True if p is a safe relative path (no leading '/', no '..' or empty components, no backslash). */
bool kiln_ckpt_manifest_path_ok(const char *p);

#endif

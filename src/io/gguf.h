/* gguf.h - read GGUF files (llama.cpp / ComfyUI-GGUF / stable-diffusion.cpp weights): mmap, strictly validated.
 *
 *     kiln_gguf_file *g;
 *     if (kiln_gguf_open("flux-2-klein-4b-Q4_K.gguf", &g, &err) != KILN_OK) return err.code;
 *     const kiln_gguf_tensor *t = kiln_gguf_find(g, "double_blocks.0.img_attn.qkv.weight");
 *     // t->type (GGML id, tensor/quant.h), t->shape (PyTorch order [out, in]), t->data/t->nbytes in the mapping
 *     kiln_gguf_close(g);
 *
 * Format (versions 2 and 3; little-endian only):
 *   "GGUF" u32 version, u64 n_tensors, u64 n_kv,
 *   n_kv x (string key, u32 value type, value), n_tensors x (string name, u32 n_dims, u64 ne[n_dims], u32 type,
 *   u64 offset), padding to the alignment, then the data section; a string is u64 length + bytes (no NUL).
 *   Value types: 0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool, 8 string, 9 array (u32 element type,
 *   u64 count, elements), 10 u64, 11 i64, 12 f64. The alignment is general.alignment (u32, a power of two) or
 *   32. ne[0] is the fastest-varying dimension (a row), so shape[] here is ne reversed.
 *
 * Validation on open (each failure KILN_E_FORMAT naming the file, the entry and what is wrong): bad magic; a
 * version other than 2 or 3 (a byte-swapped version says "big-endian"); a count that cannot fit in the bytes
 * left; a string, array or entry running past the end; an unknown value type; an array of arrays; a bool byte
 * other than 0 or 1; an empty, non-UTF-8 or duplicate key or tensor name; general.alignment not a u32 power of
 * two up to 1 MiB; n_dims not 1..4; a dimension of 0 or a shape whose size overflows; an unknown GGML type; a
 * row (ne[0]) not a whole number of blocks; an offset not a multiple of the alignment; a tensor past the end of
 * the file; two tensors whose bytes overlap. Types GGML defines but kiln cannot dequantise open fine (inspect
 * lists them); kiln_dequant refuses them by name.
 *
 * Errors: KILN_E_FORMAT as above, KILN_E_NOT_FOUND / KILN_E_IO for the file, KILN_E_NOMEM. On failure *out is
 * NULL and nothing stays mapped or allocated. An open file is immutable: any number of threads may read it.
 */
#ifndef KILN_IO_GGUF_H
#define KILN_IO_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define KILN_GGUF_MAX_DIMS 4

typedef enum kiln_gguf_vtype {
    KILN_GGUF_U8 = 0,
    KILN_GGUF_I8,
    KILN_GGUF_U16,
    KILN_GGUF_I16,
    KILN_GGUF_U32,
    KILN_GGUF_I32,
    KILN_GGUF_F32,
    KILN_GGUF_BOOL,
    KILN_GGUF_STRING,
    KILN_GGUF_ARRAY,
    KILN_GGUF_U64,
    KILN_GGUF_I64,
    KILN_GGUF_F64,
    KILN_GGUF_VTYPE_COUNT
} kiln_gguf_vtype;

typedef struct kiln_gguf_kv {
    const char *key;       /* NUL-terminated copy */
    kiln_gguf_vtype type;  /* of the value; for arrays, elem_type is the elements' */
    kiln_gguf_vtype elem_type;
    uint64_t count;        /* array elements (1 for a scalar) */
    const uint8_t *raw;    /* the value (array: the first element) in the mapping */
    const char *str;       /* STRING: a NUL-terminated copy (embedded NULs are refused); else NULL */
} kiln_gguf_kv;

typedef struct kiln_gguf_tensor {
    const char *name; /* NUL-terminated copy */
    uint32_t type;    /* GGML type id: kiln_qtype_get(type) is never NULL for an opened file */
    int ndim;
    int64_t ne[KILN_GGUF_MAX_DIMS];    /* as stored: ne[0] is a row */
    int64_t shape[KILN_GGUF_MAX_DIMS]; /* PyTorch order: shape[ndim - 1] == ne[0] */
    uint64_t numel;
    uint64_t offset; /* from the start of the data section */
    const void *data;
    size_t nbytes;
} kiln_gguf_tensor;

typedef struct kiln_gguf_file kiln_gguf_file;

kiln_status kiln_gguf_open(const char *path, kiln_gguf_file **out, kiln_err *err);
/* Parses an image in memory (fuzzer, tests); buf must outlive the result. */
kiln_status kiln_gguf_open_memory(const void *buf, size_t len, const char *label, kiln_gguf_file **out,
                                  kiln_err *err);
void kiln_gguf_close(kiln_gguf_file *g);
/* Does this file start with the GGUF magic? (For format detection; reads 4 bytes.) */
bool kiln_gguf_sniff(const char *path);

uint32_t kiln_gguf_version(const kiln_gguf_file *g);
uint32_t kiln_gguf_alignment(const kiln_gguf_file *g);
uint64_t kiln_gguf_data_offset(const kiln_gguf_file *g); /* where the data section starts in the file */
const char *kiln_gguf_label(const kiln_gguf_file *g);

size_t kiln_gguf_count(const kiln_gguf_file *g);
const kiln_gguf_tensor *kiln_gguf_at(const kiln_gguf_file *g, size_t i); /* in file order */
const kiln_gguf_tensor *kiln_gguf_find(const kiln_gguf_file *g, const char *name); /* NULL if absent */

size_t kiln_gguf_kv_count(const kiln_gguf_file *g);
const kiln_gguf_kv *kiln_gguf_kv_at(const kiln_gguf_file *g, size_t i); /* in file order */
const kiln_gguf_kv *kiln_gguf_kv_find(const kiln_gguf_file *g, const char *key);
/* general.architecture, or NULL. */
const char *kiln_gguf_architecture(const kiln_gguf_file *g);

/* Element i of a numeric or bool kv (a scalar is element 0) as the widest type; false if out of range or the
 * element is not of that kind (integers: any integer type or bool; floats: f32 or f64). */
bool kiln_gguf_kv_int(const kiln_gguf_kv *kv, uint64_t i, int64_t *out);
bool kiln_gguf_kv_uint(const kiln_gguf_kv *kv, uint64_t i, uint64_t *out);
bool kiln_gguf_kv_float(const kiln_gguf_kv *kv, uint64_t i, double *out);
/* Element i of an array of strings (walks from the start: O(i)); not NUL-terminated. */
bool kiln_gguf_kv_array_str(const kiln_gguf_kv *kv, uint64_t i, const char **s, size_t *len);

const char *kiln_gguf_vtype_name(kiln_gguf_vtype t); /* "u32", "string", "array", ... */

/* ---- writer (gguf_write.c): GGUF v3, streamed tensor by tensor, atomically (PATH.tmp, fsync, rename) ---------- */
typedef struct kiln_gguf_writer kiln_gguf_writer;
typedef struct kiln_gguf_wspec {
    const char *name;
    uint32_t type; /* GGML type id; the row (shape[ndim - 1]) must be whole blocks */
    int ndim;      /* 1..4 */
    int64_t shape[KILN_GGUF_MAX_DIMS]; /* PyTorch order (written reversed, as GGUF's ne) */
} kiln_gguf_wspec;
typedef struct kiln_gguf_wkv {
    const char *key;
    kiln_gguf_vtype type; /* KILN_GGUF_STRING or KILN_GGUF_U32 */
    const char *str;
    uint32_t u32;
} kiln_gguf_wkv;

/* Writes the header, metadata and tensor infos (tensors in spec order, each at the next multiple of the
 * alignment, 32, or general.alignment if kvs set it). */
kiln_status kiln_gguf_writer_open(const char *path, const kiln_gguf_wspec *specs, size_t n, const kiln_gguf_wkv *kvs,
                                  size_t n_kv, kiln_gguf_writer **out, kiln_err *err);
/* Appends bytes of the current tensor (each tensor exactly its size in total, in spec order). */
kiln_status kiln_gguf_writer_write(kiln_gguf_writer *w, const void *data, size_t bytes, kiln_err *err);
/* Checks every byte was written, fsyncs, renames into place. Frees w in all cases. */
kiln_status kiln_gguf_writer_finish(kiln_gguf_writer *w, kiln_err *err);
/* Abandons the write and removes the temporary file. NULL is a no-op. */
void kiln_gguf_writer_abort(kiln_gguf_writer *w);

#endif

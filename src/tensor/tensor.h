/* tensor.h - a view of n-dimensional data: dtype, shape, strides, and which backend holds the bytes.
 *
 * A kiln_tensor never owns its data: the bytes belong to an mmapped checkpoint, an arena or a backend buffer,
 * and the tensor is a small value type you copy freely. Shapes are row-major (the last dimension varies
 * fastest); strides are in ELEMENTS, not bytes. Linear weights follow PyTorch: [out, in].
 *
 *     kiln_tensor w = kiln_tensor_make(ptr, KILN_DT_BF16, 2, (int64_t[]){3072, 128});
 *     size_t bytes = kiln_tensor_nbytes(&w);              // 3072*128*2
 */
#ifndef KILN_TENSOR_TENSOR_H
#define KILN_TENSOR_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef enum kiln_dtype {
    KILN_DT_F32 = 0,
    KILN_DT_F16,
    KILN_DT_BF16,
    KILN_DT_F8_E4M3,
    KILN_DT_F8_E5M2,
    KILN_DT_I32,
    KILN_DT_I64,
    KILN_DT_BOOL,
    KILN_DT_U8,
    KILN_DT_F64,
    KILN_DT_QBLOCK, /* GGML block-quantised weight rows (GGUF): the GGML type id is in kiln_tensor.qtype */
    KILN_DT_COUNT
} kiln_dtype;

typedef enum kiln_backend_kind {
    KILN_BACKEND_CPU = 0, /* host memory */
    KILN_BACKEND_CUDA,    /* device memory on GPU `device` */
} kiln_backend_kind;

#define KILN_MAX_DIMS 8

typedef struct kiln_tensor {
    void *data;
    kiln_dtype dtype;
    int ndim;
    int64_t shape[KILN_MAX_DIMS];
    int64_t stride[KILN_MAX_DIMS]; /* elements */
    kiln_backend_kind backend;
    int device;
    /* Quantised weights (stay quantised in memory; widened inside the matmul's weight packing):
     * - dtype KILN_DT_QBLOCK: qtype is the GGML type id (tensor/quant.h); a 2-D [rows, cols] view of rows of
     *   blocks whose stride[0] is in BYTES (one row = cols / block blocks), stride[1] = 1.
     * - dtype KILN_DT_F8_E4M3 / F8_E5M2: real value = stored value x qscale (the checkpoint's per-tensor
     *   weight_scale / scale_weight); qscale 0 means 1 (unscaled). */
    uint32_t qtype;
    float qscale;
    /* Low-rank adapters applied beside this weight in matmul (compute/lora.h): y (op)= x w^T + sum of
     * (x A^T) B^T over the list. NULL for every tensor that is not an adapted weight. */
    const struct kiln_lora_term *lora;
} kiln_tensor;

/* Bytes per element (fp8/bool/u8: 1). */
size_t kiln_dtype_size(kiln_dtype dt);
/* Lower-case name: "f32", "bf16", "f8_e4m3", ... */
const char *kiln_dtype_name(kiln_dtype dt);
/* safetensors dtype strings ("F32", "BF16", "F8_E4M3", "BOOL", "U8", ...). Returns false if unknown. */
bool kiln_dtype_from_safetensors(const char *s, kiln_dtype *out);
const char *kiln_dtype_safetensors_name(kiln_dtype dt);
bool kiln_dtype_is_float(kiln_dtype dt);

/* A contiguous tensor over data. ndim in 0..KILN_MAX_DIMS (0 = scalar). */
kiln_tensor kiln_tensor_make(void *data, kiln_dtype dt, int ndim, const int64_t *shape);
int64_t kiln_tensor_numel(const kiln_tensor *t);
size_t kiln_tensor_nbytes(const kiln_tensor *t); /* numel * dtype size (contiguous) */
bool kiln_tensor_is_contiguous(const kiln_tensor *t);
bool kiln_tensor_same_shape(const kiln_tensor *a, const kiln_tensor *b);
/* A [rows, cols] view of GGML-quantised rows (dtype KILN_DT_QBLOCK, see above); cols a whole number of blocks. */
kiln_tensor kiln_tensor_make_q(void *data, uint32_t qtype, int64_t rows, int64_t cols);
/* Rows [start, start+count) of dimension 0. */
kiln_tensor kiln_tensor_rows(const kiln_tensor *t, int64_t start, int64_t count);
/* Reinterpret a contiguous tensor with a new shape of equal numel. */
kiln_status kiln_tensor_reshape(const kiln_tensor *t, int ndim, const int64_t *shape, kiln_tensor *out,
                                kiln_err *err);
/* "[3072, 128]" into buf; returns buf. */
const char *kiln_shape_str(const kiln_tensor *t, char *buf, size_t cap);

#endif

/* cuda_check.h - argument checks for the CUDA ops: kiln_tensors in, plain device matrices out.
 *
 * Pure host logic (no CUDA calls), compiled in every build and unit-tested on the CPU
 * (tests/unit/test_compute_cuda_check.c). The core is shared with the CPU backend (compute/check.h) so that a
 * model gets the same error for the same mistake on either backend; the only difference is that tensors must
 * live on the CUDA backend (device memory) instead of the host.
 *
 *     kcu_mat x;
 *     KILN_TRY(kcu_as_mat(xt, KILN_DT_F32, "rms_norm", "x", &x, err));   // x.rows, x.cols, x.ld, x.data
 */
#ifndef KILN_COMPUTE_CUDA_CHECK_H
#define KILN_COMPUTE_CUDA_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "tensor/tensor.h"

/* A 2-D row-major view of device memory: rows x cols elements, row stride ld (elements), last dim contiguous.
 * Also the argument type of every launcher in the .cu files (so it holds no CUDA types). */
typedef struct kcu_mat {
    void *data;
    int64_t rows, cols, ld;
    kiln_dtype dt;
} kcu_mat;

/* Views t as a matrix (last dim = columns, leading dims collapse into rows). dt < 0 accepts f32, bf16 and f16.
 * Fails with KILN_E_INVALID when t is NULL, on the host, or badly strided; KILN_E_UNSUPPORTED on a wrong dtype. */
kiln_status kcu_as_mat(const kiln_tensor *t, int dt, const char *op, const char *name, kcu_mat *m, kiln_err *err);
/* A contiguous vector of n elements (f32 or bf16: small weights are used as stored). NULL t: out->data = NULL
 * when optional, else KILN_E_INVALID. */
kiln_status kcu_as_vec(const kiln_tensor *t, int64_t n, bool optional, const char *op, const char *name,
                       kcu_mat *out, kiln_err *err);
/* A contiguous 4-D NCHW image on the device, f32 or bf16 (bf16 activations); its element type into *dt. */
kiln_status kcu_as_nchw(const kiln_tensor *t, const char *op, const char *name, int64_t dims[4], kiln_dtype *dt,
                        kiln_err *err);
/* Two views have the same rows and cols. */
kiln_status kcu_same_shape(const kcu_mat *a, const kcu_mat *b, const char *op, const char *an, const char *bn,
                           kiln_err *err);

/* A weight matrix as its checkpoint stores it, for the matmul to widen on the device (cuda_dequant.cu): GGUF
 * blocks (dt KILN_DT_QBLOCK, qtype the GGML type id, row_bytes = the blocks of one row) or one byte per value
 * (KILN_DT_F8_E4M3 / F8_E5M2, row_bytes = the row stride; real value = stored value x scale), or f16. */
typedef struct kcu_qmat {
    const void *data;
    int64_t rows, cols, row_bytes;
    kiln_dtype dt;
    uint32_t qtype;
    float scale;
} kcu_qmat;
/* true when the weight t is stored quantised or in a float format the GEMM does not take (f16): the matmul
 * widens it first. */
bool kcu_is_stored_quantised(const kiln_tensor *t);
/* Views a quantised weight (see kcu_is_stored_quantised). KILN_E_UNSUPPORTED for a GGML type without a device
 * dequantisation (the error names it), KILN_E_INVALID for a shape that is not whole blocks. */
kiln_status kcu_as_qmat(const kiln_tensor *t, const char *op, const char *name, kcu_qmat *q, kiln_err *err);

/* Up to 4-D strided view for copy: dims padded at the front with 1s. */
typedef struct kcu_view4 {
    void *data;
    int64_t shape[4], stride[4];
    kiln_dtype dt;
} kcu_view4;
kiln_status kcu_as_view4(const kiln_tensor *t, const char *op, const char *name, kcu_view4 *v, kiln_err *err);

#endif

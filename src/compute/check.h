/* check.h - the argument checks both backends share, so that a model gets the same error for the same mistake
 * on the CPU and on CUDA: a tensor argument is present, lives on the backend that runs the op, has sane dims
 * and data; viewed as a row-major matrix or an NCHW image. Host logic only (t->data is never dereferenced).
 *
 * Each backend wraps these in its own view types and adds what only it needs (cpu/cpu_check.c,
 * cuda/cuda_check.c):
 *
 *     kiln_mat_view v;
 *     KILN_TRY(kiln_check_mat(t, KILN_BACKEND_CPU, KILN_DT_F32, "rms_norm", "x", &v, err));
 */
#ifndef KILN_COMPUTE_CHECK_H
#define KILN_COMPUTE_CHECK_H

#include <stdint.h>

#include "base/status.h"
#include "tensor/tensor.h"

/* A 2-D row-major view: rows x cols elements, row stride ld (elements), last dim contiguous. */
typedef struct kiln_mat_view {
    void *data;
    int64_t rows, cols, ld;
    kiln_dtype dt;
} kiln_mat_view;

/* The dtypes kiln_check_mat accepts, when not one exact dtype (a kiln_dtype, >= 0). */
enum {
    KILN_CHECK_ANY_DTYPE = -1,   /* any: the op checks the dtype itself */
    KILN_CHECK_FLOAT_DTYPE = -2, /* f32, bf16 or f16 */
};

/* t is not NULL, lives on backend `be`, has 1..KILN_MAX_DIMS non-negative dims and data unless it is empty.
 * KILN_E_INVALID otherwise, with a message naming op and name. */
kiln_status kiln_check_tensor(const kiln_tensor *t, kiln_backend_kind be, const char *op, const char *name,
                              kiln_err *err);
/* Views t as a matrix: the last dim (contiguous) is the columns, the leading dims (which must collapse into one
 * evenly strided dim) are the rows. dt: an exact kiln_dtype or a KILN_CHECK_*_DTYPE. KILN_E_UNSUPPORTED on a
 * wrong dtype or strides the view cannot express, KILN_E_INVALID on the rest; *m is written only on success. */
kiln_status kiln_check_mat(const kiln_tensor *t, kiln_backend_kind be, int dt, const char *op, const char *name,
                           kiln_mat_view *m, kiln_err *err);
/* A contiguous 4-D f32 NCHW image: dims = {N, C, H, W}. */
kiln_status kiln_check_nchw(const kiln_tensor *t, kiln_backend_kind be, const char *op, const char *name,
                            int64_t dims[4], kiln_err *err);

#endif

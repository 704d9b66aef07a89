/* views.h - small helpers that make activation views for the ops (no copies, no ownership).
 *
 *     kiln_tensor qkv = kiln_f32_2d(buf, S, 3 * D);        // contiguous [S, 3D]
 *     kiln_tensor h = kiln_view_2d(buf, dt, S, D);         // the same in dt (kiln_backend_act_dtype)
 *     kiln_tensor q = kiln_cols(&qkv, 0, D);               // [S, D] with row stride 3D
 *     kiln_tensor shift = kiln_f32_1d(mod + 0 * D, D);     // a [D] slice of a modulation vector
 */
#ifndef KILN_MODELS_VIEWS_H
#define KILN_MODELS_VIEWS_H

#include "tensor/tensor.h"

static inline kiln_tensor kiln_f32_2d(float *p, int64_t rows, int64_t cols) {
    return kiln_tensor_make(p, KILN_DT_F32, 2, (int64_t[]){rows, cols});
}

static inline kiln_tensor kiln_f32_1d(float *p, int64_t n) {
    return kiln_tensor_make(p, KILN_DT_F32, 1, (int64_t[]){n});
}

static inline kiln_tensor kiln_f32_4d(float *p, int64_t n, int64_t c, int64_t h, int64_t w) {
    return kiln_tensor_make(p, KILN_DT_F32, 4, (int64_t[]){n, c, h, w});
}

/* Contiguous views in dtype dt: a model's activation buffers in the backend's activation dtype. */
static inline kiln_tensor kiln_view_2d(void *p, kiln_dtype dt, int64_t rows, int64_t cols) {
    return kiln_tensor_make(p, dt, 2, (int64_t[]){rows, cols});
}
static inline kiln_tensor kiln_view_4d(void *p, kiln_dtype dt, int64_t n, int64_t c, int64_t h, int64_t w) {
    return kiln_tensor_make(p, dt, 4, (int64_t[]){n, c, h, w});
}
/* p advanced by n elements of dtype dt. */
static inline void *kiln_elems_at(void *p, kiln_dtype dt, int64_t n) {
    return (char *)p + (size_t)n * kiln_dtype_size(dt);
}

/* Columns [c0, c0 + n) of a 2-D tensor (keeps its row stride). */
static inline kiln_tensor kiln_cols(const kiln_tensor *t, int64_t c0, int64_t n) {
    kiln_tensor v = *t;
    v.data = (char *)t->data + (size_t)c0 * t->stride[1] * kiln_dtype_size(t->dtype);
    v.shape[1] = n;
    return v;
}

/* Rows [r0, r0 + n) and columns [c0, c0 + m). */
static inline kiln_tensor kiln_block(const kiln_tensor *t, int64_t r0, int64_t n, int64_t c0, int64_t m) {
    kiln_tensor r = kiln_tensor_rows(t, r0, n);
    return kiln_cols(&r, c0, m);
}

#endif

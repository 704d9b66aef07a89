/* test_compute_cuda_check.c - the CUDA ops' argument checks (host logic, no GPU needed: the tensors carry fake
 * device addresses that are never dereferenced). */
#include <stdint.h>

#include "compute/cuda/cuda_check.h"
#include "test.h"

static kiln_tensor dev2(kiln_dtype dt, int64_t r, int64_t c) {
    kiln_tensor t = kiln_tensor_make((void *)(uintptr_t)0x7f0000000000ull, dt, 2, (int64_t[]){r, c});
    t.backend = KILN_BACKEND_CUDA;
    return t;
}

static void test_mat(void) {
    kcu_mat m;
    kiln_err err = {0};
    kiln_tensor t = dev2(KILN_DT_F32, 7, 33);
    CHECK_EQ_INT(kcu_as_mat(&t, KILN_DT_F32, "op", "x", &m, &err), KILN_OK);
    CHECK_EQ_INT(m.rows, 7);
    CHECK_EQ_INT(m.cols, 33);
    CHECK_EQ_INT(m.ld, 33);
    /* a column block of a wider buffer (Q of a fused QKV) */
    t.shape[1] = 11;
    CHECK_EQ_INT(kcu_as_mat(&t, -1, "op", "q", &m, &err), KILN_OK);
    CHECK_EQ_INT(m.ld, 33);
    CHECK_EQ_INT(m.cols, 11);
    /* 3-D collapses into rows */
    kiln_tensor t3 = kiln_tensor_make((void *)(uintptr_t)0x1000, KILN_DT_BF16, 3, (int64_t[]){2, 5, 8});
    t3.backend = KILN_BACKEND_CUDA;
    CHECK_EQ_INT(kcu_as_mat(&t3, -1, "op", "x", &m, &err), KILN_OK);
    CHECK_EQ_INT(m.rows, 10);
    CHECK_EQ_INT(m.dt, KILN_DT_BF16);
}

static void test_mat_errors(void) {
    kcu_mat m;
    kiln_err err = {0};
    CHECK_EQ_INT(kcu_as_mat(NULL, -1, "rms_norm", "x", &m, &err), KILN_E_INVALID);
    CHECK_ERR_CONTAINS(&err, "rms_norm: x is NULL");
    kiln_tensor host = kiln_tensor_make((void *)(uintptr_t)0x1000, KILN_DT_F32, 2, (int64_t[]){2, 2});
    CHECK_EQ_INT(kcu_as_mat(&host, -1, "add", "a", &m, &err), KILN_E_INVALID);
    CHECK_ERR_CONTAINS(&err, "host memory");
    kiln_tensor t = dev2(KILN_DT_I32, 2, 2);
    CHECK_EQ_INT(kcu_as_mat(&t, -1, "add", "a", &m, &err), KILN_E_UNSUPPORTED);
    CHECK_ERR_CONTAINS(&err, "i32");
    t = dev2(KILN_DT_F32, 2, 8);
    CHECK_EQ_INT(kcu_as_mat(&t, KILN_DT_BF16, "matmul", "w", &m, &err), KILN_E_UNSUPPORTED);
    t.stride[1] = 2;
    CHECK_EQ_INT(kcu_as_mat(&t, -1, "op", "x", &m, &err), KILN_E_UNSUPPORTED);
    CHECK_ERR_CONTAINS(&err, "not contiguous");
    t = dev2(KILN_DT_F32, 4, 8);
    t.stride[0] = 4;
    CHECK_EQ_INT(kcu_as_mat(&t, -1, "op", "x", &m, &err), KILN_E_INVALID);
    CHECK_ERR_CONTAINS(&err, "below its width");
    t = dev2(KILN_DT_F32, 4, 8);
    t.data = NULL;
    CHECK_EQ_INT(kcu_as_mat(&t, -1, "op", "x", &m, &err), KILN_E_INVALID);
    t = dev2(KILN_DT_F32, 4, 8);
    t.shape[0] = -1;
    CHECK_EQ_INT(kcu_as_mat(&t, -1, "op", "x", &m, &err), KILN_E_INVALID);
}

static void test_vec(void) {
    kcu_mat v;
    kiln_err err = {0};
    CHECK_EQ_INT(kcu_as_vec(NULL, 16, true, "op", "bias", &v, &err), KILN_OK);
    CHECK(v.data == NULL);
    CHECK_EQ_INT(kcu_as_vec(NULL, 16, false, "op", "gate", &v, &err), KILN_E_INVALID);
    kiln_tensor g = kiln_tensor_make((void *)(uintptr_t)0x2000, KILN_DT_BF16, 1, (int64_t[]){128});
    g.backend = KILN_BACKEND_CUDA;
    CHECK_EQ_INT(kcu_as_vec(&g, 128, false, "rms_norm", "gain", &v, &err), KILN_OK);
    CHECK_EQ_INT(v.dt, KILN_DT_BF16);
    CHECK_EQ_INT(kcu_as_vec(&g, 64, false, "rms_norm", "gain", &v, &err), KILN_E_INVALID);
    CHECK_ERR_CONTAINS(&err, "contiguous vector of 64");
    g.dtype = KILN_DT_F16;
    CHECK_EQ_INT(kcu_as_vec(&g, 128, false, "op", "gain", &v, &err), KILN_E_UNSUPPORTED);
    /* a [1, n] row counts as a vector; a strided column does not */
    kiln_tensor r = dev2(KILN_DT_F32, 1, 32);
    CHECK_EQ_INT(kcu_as_vec(&r, 32, false, "op", "shift", &v, &err), KILN_OK);
    kiln_tensor c = dev2(KILN_DT_F32, 32, 1);
    c.stride[0] = 3;
    CHECK_EQ_INT(kcu_as_vec(&c, 32, false, "op", "shift", &v, &err), KILN_E_INVALID);
}

static void test_nchw_view4_shape(void) {
    int64_t d[4];
    kiln_err err = {0};
    kiln_tensor x = kiln_tensor_make((void *)(uintptr_t)0x3000, KILN_DT_F32, 4, (int64_t[]){1, 3, 8, 8});
    x.backend = KILN_BACKEND_CUDA;
    kiln_dtype dt = KILN_DT_COUNT;
    CHECK_EQ_INT(kcu_as_nchw(&x, "conv2d", "x", d, &dt, &err), KILN_OK);
    CHECK_EQ_INT(d[1], 3);
    CHECK_EQ_INT(dt, KILN_DT_F32);
    kiln_tensor xb = kiln_tensor_make((void *)(uintptr_t)0x3000, KILN_DT_BF16, 4, (int64_t[]){1, 3, 8, 8});
    xb.backend = KILN_BACKEND_CUDA;
    CHECK_EQ_INT(kcu_as_nchw(&xb, "conv2d", "x", d, &dt, &err), KILN_OK); /* bf16 activations */
    CHECK_EQ_INT(dt, KILN_DT_BF16);
    xb.dtype = KILN_DT_F16;
    CHECK_EQ_INT(kcu_as_nchw(&xb, "conv2d", "x", d, &dt, &err), KILN_E_UNSUPPORTED);
    CHECK_ERR_CONTAINS(&err, "f16");
    x.stride[3] = 2;
    CHECK_EQ_INT(kcu_as_nchw(&x, "conv2d", "x", d, &dt, &err), KILN_E_UNSUPPORTED);
    kiln_tensor t = dev2(KILN_DT_F32, 3, 4);
    CHECK_EQ_INT(kcu_as_nchw(&t, "conv2d", "x", d, &dt, &err), KILN_E_INVALID);
    kcu_view4 v;
    CHECK_EQ_INT(kcu_as_view4(&t, "copy", "x", &v, &err), KILN_OK);
    CHECK_EQ_INT(v.shape[0], 1);
    CHECK_EQ_INT(v.shape[2], 3);
    CHECK_EQ_INT(v.stride[2], 4);
    kiln_tensor t5 = kiln_tensor_make((void *)(uintptr_t)0x3000, KILN_DT_F32, 5, (int64_t[]){1, 1, 1, 1, 2});
    t5.backend = KILN_BACKEND_CUDA;
    CHECK_EQ_INT(kcu_as_view4(&t5, "copy", "x", &v, &err), KILN_E_UNSUPPORTED);
    kcu_mat a = {0, 2, 3, 3, KILN_DT_F32}, b = {0, 3, 2, 2, KILN_DT_F32};
    CHECK_EQ_INT(kcu_same_shape(&a, &b, "add", "a", "b", &err), KILN_E_INVALID);
    CHECK_ERR_CONTAINS(&err, "a is 2 x 3 but b is 3 x 2");
}

int main(void) {
    RUN(test_mat);
    RUN(test_mat_errors);
    RUN(test_vec);
    RUN(test_nchw_view4_shape);
    return test_summary();
}

/* test_compute_strict.c - the residency contract (compute/ops.h) on the host: the address-range set both
 * backends keep (compute/mem_ranges.h), and the CPU backend's strict-residency mode (cpu/cpu_strict.c), in which
 * an op given memory the backend did not allocate or place fails with the op's and the argument's name. The
 * whole pipeline under strict mode is test_pipeline_golden_strict. */
#include <stdlib.h>

#include "base/alloc.h"
#include "compute/mem_ranges.h"
#include "compute/ops.h"
#include "test.h"

static void test_ranges(void) {
    kiln_ranges rs;
    kiln_ranges_init(&rs);
    kiln_err err = {0};
    char buf[300];
    int tag_a, tag_b;
    CHECK_EQ_INT(kiln_ranges_add(&rs, buf + 100, 50, &tag_a, &err), KILN_OK);
    CHECK_EQ_INT(kiln_ranges_add(&rs, buf, 100, &tag_b, &err), KILN_OK); /* touching is not overlapping */
    CHECK(kiln_ranges_find(&rs, buf + 149)->value == &tag_a);
    CHECK(kiln_ranges_find(&rs, buf + 99)->value == &tag_b);
    CHECK(kiln_ranges_find(&rs, buf + 150) == NULL);
    CHECK(kiln_ranges_covers(&rs, buf + 100, 50));
    CHECK(!kiln_ranges_covers(&rs, buf + 101, 50)); /* one byte past the end */
    CHECK(!kiln_ranges_covers(&rs, buf + 90, 20));  /* spans two ranges: not ONE buffer */
    CHECK_EQ_INT(kiln_ranges_add(&rs, buf + 149, 10, NULL, &err), KILN_E_INVALID);
    CHECK_EQ_INT(kiln_ranges_add(&rs, buf + 200, 1000, NULL, &err), KILN_OK);
    CHECK_EQ_INT(kiln_ranges_add(&rs, buf + 160, 41, NULL, &err), KILN_E_INVALID); /* runs into the next */
    void *v = NULL;
    CHECK(!kiln_ranges_remove(&rs, buf + 101, &v)); /* only by its start */
    CHECK(kiln_ranges_remove(&rs, buf + 100, &v) && v == &tag_a);
    CHECK(kiln_ranges_find(&rs, buf + 120) == NULL);
    CHECK(kiln_ranges_find(&rs, buf + 50)->value == &tag_b);
    kiln_ranges_free(&rs);
}

static kiln_backend *open_strict(void) {
    setenv("KILN_STRICT_RESIDENCY", "1", 1);
    kiln_backend *be = NULL;
    kiln_err err = {0};
    CHECK_MSG(kiln_backend_open_cpu(1, &be, &err) == KILN_OK, "%s", err.msg);
    unsetenv("KILN_STRICT_RESIDENCY");
    return be;
}

static void test_strict_ops(void) {
    kiln_backend *be = open_strict();
    if (!be) return;
    kiln_err err = {0};
    float *xd = be->ops->alloc(be, 4 * 8 * sizeof(float)), *yd = be->ops->alloc(be, 4 * 6 * sizeof(float));
    float *host_w = kiln_malloc(6 * 8 * sizeof(float)); /* "a mapped checkpoint" */
    for (int i = 0; i < 32; i++) xd[i] = (float)i / 32;
    for (int i = 0; i < 48; i++) host_w[i] = (float)(i % 5) - 2;
    kiln_tensor x = kiln_tensor_make(xd, KILN_DT_F32, 2, (int64_t[]){4, 8});
    kiln_tensor y = kiln_tensor_make(yd, KILN_DT_F32, 2, (int64_t[]){4, 6});
    kiln_tensor w = kiln_tensor_make(host_w, KILN_DT_F32, 2, (int64_t[]){6, 8});
    /* an unplaced weight: refused, naming the op and the argument */
    CHECK_EQ_INT(kiln_matmul(be, &y, &x, &w, NULL, &err), KILN_E_INVALID);
    CHECK_ERR_CONTAINS(&err, "matmul: w (f32 [6, 8]");
    CHECK_ERR_CONTAINS(&err, "not memory this backend allocated or placed");
    /* placed: accepted, and so is a view into it (rows 2..3, the shape of a fused QKV split) */
    CHECK_MSG(be->ops->place(be, host_w, 6 * 8 * sizeof(float), &err) == KILN_OK, "%s", err.msg);
    CHECK_MSG(kiln_matmul(be, &y, &x, &w, NULL, &err) == KILN_OK, "%s", err.msg);
    kiln_tensor w_rows = kiln_tensor_rows(&w, 2, 2), y2 = kiln_tensor_make(yd, KILN_DT_F32, 2, (int64_t[]){4, 2});
    CHECK_MSG(kiln_matmul(be, &y2, &x, &w_rows, NULL, &err) == KILN_OK, "%s", err.msg);
    /* a placement twice is an overlap */
    CHECK_EQ_INT(be->ops->place(be, host_w + 8, 8, &err), KILN_E_INVALID);
    /* unplaced again: refused again (no stale record) */
    be->ops->unplace(be, host_w);
    CHECK_EQ_INT(kiln_matmul(be, &y, &x, &w, NULL, &err), KILN_E_INVALID);
    /* an activation that runs past the end of its allocation */
    kiln_tensor x_long = kiln_tensor_make(xd, KILN_DT_F32, 2, (int64_t[]){5, 8});
    kiln_tensor y_long = kiln_tensor_make(xd, KILN_DT_F32, 2, (int64_t[]){5, 8});
    CHECK_EQ_INT(be->ops->copy(be, &y_long, &x_long, &err), KILN_E_INVALID);
    CHECK_ERR_CONTAINS(&err, "copy: y (f32 [5, 8]");
    /* a host source handed to copy (the Qwen3 embedding-lookup bug): refused as x */
    kiln_tensor row = kiln_tensor_make(host_w, KILN_DT_F32, 2, (int64_t[]){1, 8});
    kiln_tensor dst = kiln_tensor_rows(&x, 0, 1);
    CHECK_EQ_INT(be->ops->copy(be, &dst, &row, &err), KILN_E_INVALID);
    CHECK_ERR_CONTAINS(&err, "copy: x (");
    /* upload/download: the backend side must be its own */
    CHECK_EQ_INT(be->ops->upload(be, host_w, xd, 16, &err), KILN_E_INVALID);
    CHECK_ERR_CONTAINS(&err, "upload: destination");
    CHECK_EQ_INT(be->ops->download(be, xd, host_w, 16, &err), KILN_E_INVALID);
    CHECK_MSG(be->ops->upload(be, xd + 4, host_w, 16, &err) == KILN_OK, "%s", err.msg);
    /* freed memory is no longer the backend's */
    be->ops->free(be, yd);
    CHECK_EQ_INT(be->ops->silu(be, &y, &y, &err), KILN_E_INVALID);
    CHECK_ERR_CONTAINS(&err, "silu: y (");
    be->ops->free(be, xd);
    kiln_free(host_w);
    kiln_backend_close(be);
}

/* Without the mode, host memory is accepted as before (the CPU's ops read any pointer). */
static void test_default_mode_accepts_host(void) {
    kiln_backend *be = NULL;
    kiln_err err = {0};
    unsetenv("KILN_STRICT_RESIDENCY");
    CHECK_MSG(kiln_backend_open_cpu(1, &be, &err) == KILN_OK, "%s", err.msg);
    if (!be) return;
    float a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[8];
    kiln_tensor x = kiln_tensor_make(a, KILN_DT_F32, 1, (int64_t[]){8}), y = kiln_tensor_make(b, KILN_DT_F32, 1, (int64_t[]){8});
    CHECK_MSG(be->ops->copy(be, &y, &x, &err) == KILN_OK, "%s", err.msg);
    CHECK(b[7] == 8);
    CHECK_EQ_INT(be->ops->place(be, a, sizeof a, &err), KILN_OK);
    be->ops->unplace(be, a);
    kiln_backend_close(be);
}

int main(void) {
    RUN(test_ranges);
    RUN(test_strict_ops);
    RUN(test_default_mode_accepts_host);
    return test_summary();
}

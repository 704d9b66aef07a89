/* test_compute_comm_nccl.c - the NCCL communicator's host-side logic (compute/comm_nccl.h), no GPU, no NCCL:
 * dtype mapping, ncclResult_t translation, rank -> GPU mapping, collective size checks; and that a kiln without
 * NCCL refuses it by name. */
#include <stdint.h>
#include <string.h>

#include "compute/comm_nccl.h"
#include "test.h"

static void test_dtype(void) {
    kiln_err err = {0};
    int t = -1;
    CHECK(kiln_nccl_dtype(KILN_DT_F32, &t, &err) == KILN_OK && t == KILN_NCCL_FLOAT32);
    CHECK(kiln_nccl_dtype(KILN_DT_BF16, &t, &err) == KILN_OK && t == KILN_NCCL_BFLOAT16);
    CHECK(kiln_nccl_dtype(KILN_DT_F16, &t, &err) == KILN_OK && t == KILN_NCCL_FLOAT16);
    CHECK(kiln_nccl_dtype(KILN_DT_I32, &t, &err) == KILN_OK && t == KILN_NCCL_INT32);
    CHECK(kiln_nccl_dtype(KILN_DT_U8, &t, &err) == KILN_OK && t == KILN_NCCL_UINT8);
    CHECK(kiln_nccl_dtype(KILN_DT_QBLOCK, &t, &err) == KILN_E_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, kiln_dtype_name(KILN_DT_QBLOCK)) != NULL, "%s", err.msg);
    CHECK(kiln_nccl_dtype(KILN_DT_I64, &t, &err) == KILN_E_UNSUPPORTED);
}

static void test_status(void) {
    kiln_err err = {0};
    CHECK(kiln_nccl_status(KILN_NCCL_SUCCESS, "all-reduce", NULL, &err) == KILN_OK);
    CHECK(kiln_nccl_status(KILN_NCCL_REMOTE_ERROR, "all-reduce", "peer 3 closed", &err) == KILN_E_DEVICE);
    CHECK_MSG(strstr(err.msg, "all-reduce") && strstr(err.msg, "another rank") && strstr(err.msg, "peer 3 closed"),
              "%s", err.msg);
    CHECK(kiln_nccl_status(KILN_NCCL_CUDA_ERROR, "all-gather", "", &err) == KILN_E_DEVICE);
    CHECK_MSG(strstr(err.msg, "CUDA") && strstr(err.msg, "no detail"), "%s", err.msg);
    CHECK(kiln_nccl_status(KILN_NCCL_SYSTEM_ERROR, "x", NULL, &err) == KILN_E_IO);
    CHECK(kiln_nccl_status(KILN_NCCL_INTERNAL_ERROR, "x", NULL, &err) == KILN_E_INTERNAL);
    CHECK(kiln_nccl_status(KILN_NCCL_INVALID_ARGUMENT, "x", NULL, &err) == KILN_E_INVALID);
    CHECK_MSG(strstr(err.msg, "argument"), "%s", err.msg);
    CHECK(kiln_nccl_status(KILN_NCCL_INVALID_USAGE, "x", NULL, &err) == KILN_E_INVALID);
    CHECK_MSG(strstr(err.msg, "usage"), "%s", err.msg);
    CHECK(kiln_nccl_status(KILN_NCCL_IN_PROGRESS, "x", NULL, &err) == KILN_E_INTERNAL);
    CHECK(kiln_nccl_status(99, "x", NULL, &err) == KILN_E_INTERNAL);
    CHECK_MSG(strstr(err.msg, "99"), "%s", err.msg);
}

static void test_device(void) {
    kiln_err err = {0};
    int d = -1;
    CHECK(kiln_nccl_local_device(0, NULL, 1, &d, &err) == KILN_OK && d == 0);
    CHECK(kiln_nccl_local_device(0, "", 1, &d, &err) == KILN_OK && d == 0);
    CHECK(kiln_nccl_local_device(0, "3", 4, &d, &err) == KILN_OK && d == 3);
    CHECK(kiln_nccl_local_device(2, "1", 4, &d, &err) == KILN_OK && d == 3); /* --device cuda:2, local rank 1 */
    CHECK(kiln_nccl_local_device(2, "2", 4, &d, &err) == KILN_E_DEVICE);   /* GPU 4 of 4 */
    CHECK_MSG(strstr(err.msg, "needs GPU 4") && strstr(err.msg, "has 4"), "%s", err.msg);
    CHECK(kiln_nccl_local_device(0, "1", 1, &d, &err) == KILN_E_DEVICE); /* two ranks on a one-GPU host */
    CHECK(kiln_nccl_local_device(0, "x1", 4, &d, &err) == KILN_E_INVALID);
    CHECK_MSG(strstr(err.msg, "OMPI_COMM_WORLD_LOCAL_RANK"), "%s", err.msg);
    CHECK(kiln_nccl_local_device(0, "-1", 4, &d, &err) == KILN_E_INVALID);
    CHECK(kiln_nccl_local_device(-1, "0", 4, &d, &err) == KILN_E_INVALID);
}

static void test_count(void) {
    kiln_err err = {0};
    CHECK(kiln_nccl_check_count("all-gather", 1000, 4, 4, 0, &err) == KILN_OK);
    CHECK(kiln_nccl_check_count("all-gather", 1000, 4, 4, 16000, &err) == KILN_OK);
    CHECK(kiln_nccl_check_count("all-gather", 1000, 4, 4, 15999, &err) == KILN_E_INVALID);
    CHECK_MSG(strstr(err.msg, "16000 bytes") && strstr(err.msg, "15999"), "%s", err.msg);
    CHECK(kiln_nccl_check_count("all-to-all", SIZE_MAX / 8, 4, 4, 0, &err) == KILN_E_LIMIT);
    CHECK_MSG(strstr(err.msg, "overflows"), "%s", err.msg);
    CHECK(kiln_nccl_check_count("x", 1, 0, 4, 0, &err) == KILN_E_INVALID);
    CHECK(kiln_nccl_check_count("x", 0, 8, 4, 0, &err) == KILN_OK);
}

static void test_open_refused(void) {
#ifndef KILN_HAVE_NCCL
    kiln_err err = {0};
    kiln_comm *c = (kiln_comm *)1;
    CHECK(kiln_comm_open_nccl(NULL, NULL, &c, &err) == KILN_E_UNSUPPORTED);
    CHECK(c == NULL);
    CHECK_MSG(strstr(err.msg, "without NCCL"), "%s", err.msg);
    CHECK(kiln_nccl_gpu_count() == -1);
#endif
}

int main(void) {
    RUN(test_dtype);
    RUN(test_status);
    RUN(test_device);
    RUN(test_count);
    RUN(test_open_refused);
    return test_summary();
}

/* test_compute_cuda_device.c - `--device` parsing, and the CUDA backend skipped cleanly where there is no GPU.
 *
 * Runs in every build. Without a GPU (or without CUDA compiled in) kiln_backend_open_cuda must answer
 * KILN_E_DEVICE with a message that says what to do, set *out to NULL, and leave the process fit to carry on
 * with the CPU backend. With a GPU it must open and close. KILN_REQUIRE_GPU=1 (tests/gpu/run.sh) turns "no GPU"
 * into a failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compute/cuda/cuda_backend.h"
#include "compute/cuda/cuda_device.h"
#include "compute/ops.h"
#include "test.h"

static void test_parse(void) {
    kiln_backend_kind kind;
    int idx;
    CHECK_EQ_INT(kiln_device_parse("cpu", &kind, &idx, NULL), KILN_OK);
    CHECK_EQ_INT(kind, KILN_BACKEND_CPU);
    CHECK_EQ_INT(kiln_device_parse(NULL, &kind, &idx, NULL), KILN_OK);
    CHECK_EQ_INT(kind, KILN_BACKEND_CPU);
    CHECK_EQ_INT(kiln_device_parse("", &kind, &idx, NULL), KILN_OK);
    CHECK_EQ_INT(kiln_device_parse("cuda", &kind, &idx, NULL), KILN_OK);
    CHECK_EQ_INT(kind, KILN_BACKEND_CUDA);
    CHECK_EQ_INT(idx, 0);
    CHECK_EQ_INT(kiln_device_parse("cuda:3", &kind, &idx, NULL), KILN_OK);
    CHECK_EQ_INT(kind, KILN_BACKEND_CUDA);
    CHECK_EQ_INT(idx, 3);
    CHECK_EQ_INT(kiln_device_parse("cuda:63", &kind, &idx, NULL), KILN_OK);
    CHECK_EQ_INT(idx, 63);
    const char *bad[] = {"cuda:", "cuda:-1", "cuda:1x", "gpu", "cuda:64", "cuda:99999999999999999999", "CUDA",
                         "cuda0", "cpu:0", " cuda", "cuda:0 "};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        kiln_err err = {0};
        CHECK_MSG(kiln_device_parse(bad[i], &kind, &idx, &err) == KILN_E_INVALID, "\"%s\" accepted", bad[i]);
        CHECK_ERR_CONTAINS(&err, "expected cpu, cuda or cuda:N");
        CHECK_EQ_INT(kind, KILN_BACKEND_CPU);
    }
}

static void test_open_cuda_or_skip(void) {
    kiln_err err = {0};
    kiln_backend *be = (kiln_backend *)1;
    kiln_status s = kiln_backend_open_cuda(0, &be, &err);
    const char *req = getenv("KILN_REQUIRE_GPU");
    if (s == KILN_OK) {
        printf("  cuda:0 opened: %s\n", be->ops->name);
        CHECK_EQ_INT(be->kind, KILN_BACKEND_CUDA);
        kiln_backend_close(be);
        /* the backend's switches: a value they do not take is refused by name, with the values they do */
        static const char *const bad[][3] = {
            {"KILN_CUDA_ATTENTION", "bogus", "expected auto, simple, tc or cudnn"},
            {"KILN_CUDA_TC_BQ", "96", "expected 64 or 128"},
            {"KILN_CUDA_FP8", "yes", "expected 0 or 1"},
            {"KILN_CUDA_WIDE_ATTENTION", "GEMM", "expected tc or gemm"},
            {"KILN_CUDA_ACT", "f16", "expected bf16 or f32"},
            {"KILN_DETERMINISTIC", "true", "expected 0 or 1"},
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            kiln_err e = {0};
            kiln_backend *b = (kiln_backend *)1;
            const char *was = getenv(bad[i][0]);
            char keep[256];
            snprintf(keep, sizeof keep, "%s", was ? was : "");
            setenv(bad[i][0], bad[i][1], 1);
            CHECK_EQ_INT(kiln_backend_open_cuda(0, &b, &e), KILN_E_INVALID);
            if (was) setenv(bad[i][0], keep, 1);
            else unsetenv(bad[i][0]);
            CHECK_ERR_CONTAINS(&e, bad[i][2]);
            CHECK_ERR_CONTAINS(&e, bad[i][0]);
        }
        /* a device index past the last one is a device error, not a crash */
        kiln_err e2 = {0};
        kiln_backend *b2 = NULL;
        CHECK_EQ_INT(kiln_backend_open_cuda(KILN_MAX_CUDA_DEVICE, &b2, &e2), KILN_E_DEVICE);
        CHECK(b2 == NULL);
        return;
    }
    printf("  skipped: no CUDA backend here (%s)\n", err.msg);
    CHECK_MSG(!(req && strcmp(req, "1") == 0), "KILN_REQUIRE_GPU=1 but: %s", err.msg);
    CHECK_EQ_INT(s, KILN_E_DEVICE);
    CHECK(be == NULL);
    CHECK(strlen(err.msg) > 10);
    CHECK(strstr(err.msg, "CUDA") != NULL || strstr(err.msg, "cuda") != NULL);
    /* asking twice gives the same clean answer (no sticky state), and a bad index or NULL out is refused */
    kiln_err e2 = {0};
    CHECK_EQ_INT(kiln_backend_open_cuda(0, &be, &e2), KILN_E_DEVICE);
    CHECK(kiln_backend_open_cuda(0, NULL, NULL) != KILN_OK);
    /* the --device path gives the same answer, and the CPU still opens afterwards */
    CHECK_EQ_INT(kiln_backend_open_device("cuda:0", 0, &be, NULL), KILN_E_DEVICE);
    CHECK(be == NULL);
}

static void test_open_device_cpu(void) {
    kiln_backend *be = NULL;
    kiln_err err = {0};
    CHECK_EQ_INT(kiln_backend_open_device("cpu", 1, &be, &err), KILN_OK);
    CHECK(be && be->kind == KILN_BACKEND_CPU);
    kiln_backend_close(be);
    be = (kiln_backend *)1;
    CHECK_EQ_INT(kiln_backend_open_device("tpu", 1, &be, &err), KILN_E_INVALID);
    CHECK(be == NULL);
}

static int body_calls;
static kiln_status body(kiln_backend *be, void *ctx, kiln_err *err) {
    body_calls++;
    return *(kiln_status *)ctx == KILN_OK ? KILN_OK : KILN_FAIL(err, *(kiln_status *)ctx, "body failed");
}

static void test_graph_run_on_cpu(void) {
    kiln_backend *be = NULL;
    CHECK_EQ_INT(kiln_backend_open_cpu(1, &be, NULL), KILN_OK);
    if (!be) return;
    kiln_status want = KILN_OK;
    body_calls = 0;
    for (int i = 0; i < 3; i++) CHECK_EQ_INT(kiln_backend_graph_run(be, 42, body, &want, NULL), KILN_OK);
    CHECK_EQ_INT(body_calls, 3); /* the CPU has no graphs: the body runs every time */
    want = KILN_E_LIMIT;
    kiln_err err = {0};
    CHECK_EQ_INT(kiln_backend_graph_run(be, 42, body, &want, &err), KILN_E_LIMIT);
    CHECK_ERR_CONTAINS(&err, "body failed");
    CHECK_EQ_INT(kiln_backend_graph_run(NULL, 42, body, &want, NULL), KILN_E_INVALID);
    kiln_backend_close(be);
}

int main(void) {
    RUN(test_parse);
    RUN(test_open_cuda_or_skip);
    RUN(test_open_device_cpu);
    RUN(test_graph_run_on_cpu);
    return test_summary();
}

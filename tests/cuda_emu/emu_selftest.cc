/* emu_selftest.cc - the CUDA emulator's own test (ctest emu_selftest, KILN_CUDA_EMU build): every check it claims
 * (kcu_emu.h) is shown to fire on a kernel or call with that bug, and the same code without the bug to pass.
 * A case that must be reported runs in a child process; it passes when the child aborts and its stderr holds
 * the expected words. Kernels here are written as a .cu file is (KCU_LAUNCH, __shared__, shuffles, mma.sync). */
#include "kcu_emu.h"

#include <cublasLt.h>
#include <cuda_fp8.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

static int failures;

#define EXPECT(cond, ...)                                                                                     \
    do {                                                                                                      \
        if (!(cond)) {                                                                                        \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                       \
            printf(__VA_ARGS__);                                                                              \
            printf("\n");                                                                                     \
            failures++;                                                                                       \
        }                                                                                                     \
    } while (0)

/* Runs fn in a child; true when it aborted (SIGABRT) with want in its stderr. */
static bool dies_with(void (*fn)(), const char *want, const char *name) {
    char path[] = "/tmp/kcu-emu-selftest.XXXXXX";
    int fd = mkstemp(path);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd, 2);
        fn();
        _exit(0); /* not reported */
    }
    int st = 0;
    waitpid(pid, &st, 0);
    std::string err;
    char buf[4096];
    ssize_t n;
    lseek(fd, 0, SEEK_SET);
    while ((n = read(fd, buf, sizeof buf)) > 0) err.append(buf, (size_t)n);
    close(fd);
    unlink(path);
    bool ok = WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && err.find(want) != std::string::npos;
    printf("%s %-44s %s\n", ok ? "ok  " : "FAIL", name, ok ? "reported" : "NOT reported as expected");
    if (!ok) {
        printf("     wanted \"%s\"; child status %d; stderr: %.400s\n", want, st, err.c_str());
        failures++;
    }
    return ok;
}

static float *dev_floats(size_t n) {
    void *p = nullptr;
    if (cudaMalloc(&p, n * sizeof(float)) != cudaSuccess) abort();
    return (float *)p;
}

/* ---- kernels ---- */

static __global__ void k_fill(float *y, int n, float v) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = v;
}
static __global__ void k_fill_past_end(float *y, int n, float v) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) y[i] = v; /* one past the end */
}
/* thread 0 publishes a value through shared memory; every thread reads it (with or without the barrier) */
static __global__ void k_publish(float *y, int barrier) {
    __shared__ float box[1];
    if (threadIdx.x == 0) box[0] = 42.f;
    if (barrier) __syncthreads();
    y[threadIdx.x] = box[0];
}
static __global__ void k_divergent_sync(float *y) {
    if (threadIdx.x < 32) __syncthreads();
    else __syncthreads();
    y[threadIdx.x] = 1.f;
}
static __global__ void k_warp_sum(float *y) {
    float v = (float)threadIdx.x;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    y[threadIdx.x] = v;
}
static __global__ void k_shfl_after_exit(float *y) {
    if (threadIdx.x & 1) return;
    y[threadIdx.x] = __shfl_sync(0xffffffffu, 1.f, 0);
}
/* half a warp in a shuffle that needs all 32 lanes, the other half in a barrier that needs them too */
static __global__ void k_deadlock(float *y) {
    if (threadIdx.x < 16) y[threadIdx.x] = __shfl_sync(0xffffffffu, 1.f, 0);
    else __syncthreads();
}
static __global__ void k_dyn(float *y) {
    KCU_DYNAMIC_SMEM(float, sm);
    sm[threadIdx.x] = (float)threadIdx.x;
    __syncthreads();
    y[threadIdx.x] = sm[blockDim.x - 1 - threadIdx.x];
}
/* one mma.sync m16n8k16: A[r][k] = r + k / 16 (k's share distinguishes the halves), B[k][n] = (k + 1) * (n + 1) / 8,
 * fragments filled by the PTX ISA's layout (cuda_kernels.cuh); y[r * 8 + n] = D[r][n] */
static uint32_t pack2(float lo, float hi) {
    return (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(lo)) | ((uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(hi)) << 16);
}
static __global__ void k_mma(float *y) {
    const int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
    auto A = [](int r, int k) { return (float)r + (float)k / 16.f; };
    auto B = [](int k, int n) { return (float)((k + 1) * (n + 1)) / 8.f; };
    uint32_t a[4], b[2];
    for (int i = 0; i < 4; i++) {
        int r = g + (i & 1) * 8, k = 2 * t + (i >> 1) * 8;
        a[i] = pack2(A(r, k), A(r, k + 1));
    }
    for (int i = 0; i < 2; i++) b[i] = pack2(B(2 * t + 8 * i, g), B(2 * t + 8 * i + 1, g));
    float d[4] = {1.f, 1.f, 1.f, 1.f};
    kcu_emu::mma_m16n8k16_bf16(d, a, b, __LINE__);
    for (int i = 0; i < 4; i++) y[(g + (i >> 1) * 8) * 8 + 2 * t + (i & 1)] = d[i];
}
/* ldmatrix x4, plain and transposed: 32 rows of 8 b16 (stride 16: the rows need not be adjacent), element
 * [r][c] = 8 r + c; lane l names row l; y[(trans * 32 + lane) * 8 + 2 j + half] = register j's half */
static __global__ void k_ldmatrix(float *y) {
    KCU_DYNAMIC_SMEM(uint16_t, sm);
    const int lane = threadIdx.x;
    for (int c = 0; c < 16; c++) sm[lane * 16 + c] = (uint16_t)(c < 8 ? 8 * lane + c : 0xffff);
    __syncwarp();
    uint32_t r[2][4];
    kcu_emu::ldmatrix_x4(r[0], sm + lane * 16, false, __LINE__);
    kcu_emu::ldmatrix_x4(r[1], sm + lane * 16, true, __LINE__);
    for (int tr = 0; tr < 2; tr++)
        for (int j = 0; j < 4; j++)
            for (int hf = 0; hf < 2; hf++) y[(tr * 32 + lane) * 8 + 2 * j + hf] = (float)((r[tr][j] >> (16 * hf)) & 0xffffu);
}

/* ---- the cases ---- */

static std::vector<float> download(const float *d, size_t n) {
    std::vector<float> h(n);
    cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost);
    return h;
}

static void host_pointer_to_kernel() {
    static float host[64];
    KCU_LAUNCH(k_fill, 1, 64, 0, 0)(host, 64, 1.f);
}
static void kernel_past_end() {
    float *y = dev_floats(256);
    KCU_LAUNCH(k_fill_past_end, 2, 256, 0, 0)(y, 256, 1.f);
}
static void host_reads_device() {
    float *y = dev_floats(64);
    KCU_LAUNCH(k_fill, 1, 64, 0, 0)(y, 64, 1.f);
    volatile float v = y[3]; /* as if the host code forgot the download */
    (void)v;
}
static void divergent_barrier() {
    float *y = dev_floats(64);
    KCU_LAUNCH(k_divergent_sync, 1, 64, 0, 0)(y);
}
static void shuffle_after_exit() {
    float *y = dev_floats(32);
    KCU_LAUNCH(k_shfl_after_exit, 1, 32, 0, 0)(y);
}
static void deadlock() {
    float *y = dev_floats(32);
    KCU_LAUNCH(k_deadlock, 1, 32, 0, 0)(y);
}
static void graph_replays_freed_buffer() {
    cudaStream_t s;
    cudaStreamCreate(&s);
    float *y = dev_floats(64);
    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    KCU_LAUNCH(k_fill, 1, 64, 0, s)(y, 64, 2.f);
    cudaGraph_t g;
    cudaStreamEndCapture(s, &g);
    cudaGraphExec_t x;
    cudaGraphInstantiate(&x, g, 0);
    cudaFree(y); /* the graph still holds y */
    cudaGraphLaunch(x, s);
}

static void test_results() {
    float *y = dev_floats(256);
    KCU_LAUNCH(k_warp_sum, 1, 64, 0, 0)(y);
    std::vector<float> h = download(y, 64);
    EXPECT(h[0] == 496.f && h[31] == 496.f && h[63] == 1520.f, "warp sums %g %g %g (want 496, 496, 1520)", h[0], h[31],
           h[63]);

    /* the barrier-less publish: forward order hides the race (thread 0 runs first), reverse order shows it */
    KCU_LAUNCH(k_publish, 1, 64, 0, 0)(y, 1);
    h = download(y, 64);
    EXPECT(h[0] == 42.f && h[63] == 42.f, "with the barrier every thread reads 42 (got %g, %g)", h[0], h[63]);
    const char *order = getenv("KCU_EMU_ORDER");
    bool reverse = order && !strcmp(order, "reverse");
    KCU_LAUNCH(k_publish, 1, 64, 0, 0)(y, 0);
    h = download(y, 64);
    if (reverse) EXPECT(h[63] != 42.f, "reverse order: a read before the missing barrier sees the value (%g)", h[63]);

    /* dynamic shared memory: over 48 KB without the attribute is a launch error, with it a launch */
    cudaGetLastError();
    KCU_LAUNCH(k_dyn, 1, 64, 64 * 1024, 0)(y);
    EXPECT(cudaGetLastError() == cudaErrorInvalidConfiguration, "64 KB of dynamic shared memory without the attribute");
    cudaFuncSetAttribute(k_dyn, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024);
    KCU_LAUNCH(k_dyn, 1, 64, 64 * 1024, 0)(y);
    EXPECT(cudaGetLastError() == cudaSuccess, "64 KB with the attribute");
    h = download(y, 64);
    EXPECT(h[0] == 63.f && h[63] == 0.f, "dynamic shared memory reversed (%g, %g)", h[0], h[63]);

    /* mma.sync: D = 1 + A . B against the product computed here (every value exact in bf16 and f32) */
    KCU_LAUNCH(k_mma, 1, 32, 0, 0)(y);
    h = download(y, 128);
    int mma_bad = 0;
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 8; n++) {
            float want = 1.f;
            for (int k = 0; k < 16; k++) want += ((float)r + (float)k / 16.f) * ((float)((k + 1) * (n + 1)) / 8.f);
            if (h[r * 8 + n] != want) mma_bad++;
        }
    EXPECT(mma_bad == 0, "mma.sync m16n8k16 product: %d of 128 values wrong (D[5][3] %g)", mma_bad, h[43]);

    /* ldmatrix: lane i = 4 g + t, register j = matrix j (rows 8 j ..): row g, columns 2t, 2t + 1; transposed,
     * rows 2t, 2t + 1 of column g */
    float *ym = dev_floats(512);
    KCU_LAUNCH(k_ldmatrix, 1, 32, 32 * 16 * 2, 0)(ym);
    h = download(ym, 512);
    int ldm_bad = 0;
    for (int tr = 0; tr < 2; tr++)
        for (int i = 0; i < 32; i++)
            for (int j = 0; j < 4; j++)
                for (int hf = 0; hf < 2; hf++) {
                    int g = i / 4, t = i % 4;
                    int want = tr ? 8 * (8 * j + 2 * t + hf) + g : 8 * (8 * j + g) + 2 * t + hf;
                    if (h[(size_t)(tr * 32 + i) * 8 + 2 * j + hf] != (float)want) ldm_bad++;
                }
    EXPECT(ldm_bad == 0, "ldmatrix x4 (plain and .trans): %d of 512 halves wrong", ldm_bad);
    cudaFree(ym);

    /* a capture: a launch is recorded, not run; a cudaMalloc inside invalidates it */
    cudaStream_t s;
    cudaStreamCreate(&s);
    KCU_LAUNCH(k_fill, 1, 64, 0, s)(y, 64, 0.f);
    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    KCU_LAUNCH(k_fill, 1, 64, 0, s)(y, 64, 7.f);
    h = download(y, 1); /* a synchronous copy while capturing: refused */
    void *p = nullptr;
    EXPECT(cudaMalloc(&p, 16) == cudaErrorStreamCaptureUnsupported, "cudaMalloc during capture is refused");
    cudaGraph_t g = nullptr;
    EXPECT(cudaStreamEndCapture(s, &g) == cudaErrorStreamCaptureInvalidated && !g, "the capture is invalidated");
    cudaGetLastError();
    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    KCU_LAUNCH(k_fill, 1, 64, 0, s)(y, 64, 7.f);
    EXPECT(cudaStreamEndCapture(s, &g) == cudaSuccess && g, "a clean capture");
    h = download(y, 1);
    EXPECT(h[0] == 0.f, "captured work does not run at capture (%g)", h[0]);
    cudaGraphExec_t x;
    cudaGraphInstantiate(&x, g, 0);
    cudaGraphLaunch(x, s);
    h = download(y, 1);
    EXPECT(h[0] == 7.f, "the replay runs it (%g)", h[0]);
    cudaGraphExecDestroy(x);
    cudaGraphDestroy(g);
}

/* cuBLASLt: D[m,n] = op(A) op(B) column-major against a loop here, both transposes of A; a wrong shape refused */
static void test_cublaslt() {
    const int m = 5, n = 3, k = 7;
    std::vector<float> a(k * m), b(k * n); /* A stored k x m (TRANSA = T), B k x n */
    for (size_t i = 0; i < a.size(); i++) a[i] = (float)(i % 11) - 5.f;
    for (size_t i = 0; i < b.size(); i++) b[i] = (float)(i % 5) * 0.5f;
    float *da = dev_floats(a.size() + 8), *db = dev_floats(b.size()), *dd = dev_floats(m * n);
    cudaMemcpy(da, a.data(), a.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(db, b.data(), b.size() * 4, cudaMemcpyHostToDevice);
    cublasLtHandle_t h;
    cublasLtCreate(&h);
    cublasLtMatmulDesc_t op;
    cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasOperation_t t = CUBLAS_OP_T;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t);
    cublasLtMatrixLayout_t la, lb, ld, bad;
    cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, k, m, k);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n, k);
    cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, m);
    cublasLtMatrixLayoutCreate(&bad, CUDA_R_32F, n, m, n);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    uint64_t ws = 0;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    EXPECT(cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, ld, ld, pref, 1, &res, &found) == CUBLAS_STATUS_SUCCESS &&
               found == 1, "heuristic");
    EXPECT(cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, bad, bad, pref, 1, &res, &found) == CUBLAS_STATUS_INVALID_VALUE,
           "D of the transposed shape refused");
    cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, ld, ld, pref, 1, &res, &found);
    float al = 1.f, be = 0.f;
    EXPECT(cublasLtMatmul(h, op, &al, da, la, db, lb, &be, dd, ld, dd, ld, &res.algo, nullptr, 0, 0) ==
               CUBLAS_STATUS_SUCCESS, "matmul");
    std::vector<float> d = download(dd, m * n);
    double worst = 0;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double s = 0;
            for (int l = 0; l < k; l++) s += (double)a[l + i * k] * b[l + j * k];
            worst = fmax(worst, fabs(s - d[i + j * m]));
        }
    EXPECT(worst == 0, "TN product off by %g", worst);
    EXPECT(cublasLtMatmul(h, op, &al, (const char *)da + 4, la, db, lb, &be, dd, ld, dd, ld, &res.algo, nullptr, 0, 0) ==
               CUBLAS_STATUS_NOT_SUPPORTED, "A less aligned than the algorithm was chosen for");
    static float host[64];
    EXPECT(cublasLtMatmul(h, op, &al, host, la, db, lb, &be, dd, ld, dd, ld, &res.algo, nullptr, 0, 0) ==
               CUBLAS_STATUS_INVALID_VALUE, "A in host memory");
    printf("ok   cuBLASLt checks\n");
}

/* cuBLASLt fp8: e4m3 x e4m3 with the scales' product as a device alpha (CUBLASLT_POINTER_MODE_DEVICE, beta in
 * device memory too) against a loop; A/B scale pointers refused at the matmul (as cuBLASLt 13.1 on an H200 did);
 * the fp8 layout rules refused when broken (not TN, k or a leading dimension not a multiple of 16), and scale
 * pointers on an f32 GEMM */
static void test_cublaslt_fp8() {
    const int m = 8, n = 4, k = 32;
    std::vector<uint8_t> a(k * m), b(k * n); /* e4m3 codes of small integers and halves: exact products */
    for (size_t i = 0; i < a.size(); i++) a[i] = (uint8_t)(0x30 + i % 16); /* 0.5 .. 1.9375 */
    for (size_t i = 0; i < b.size(); i++) b[i] = (uint8_t)((i % 3 ? 0x38 : 0xb8) + i % 8); /* +-1 .. 1.875 */
    auto val = [](uint8_t c) { return (float)__half(__nv_cvt_fp8_to_halfraw(c, __NV_E4M3)); };
    uint8_t *da, *db;
    float *dd, *ds;
    cudaMalloc((void **)&da, a.size());
    cudaMalloc((void **)&db, b.size());
    cudaMalloc((void **)&dd, m * n * 4);
    cudaMalloc((void **)&ds, 16);
    float scales[4] = {0.25f, 3.0f, 0.75f, 0.f}; /* the two scales, alpha = their product, beta */
    cudaMemcpy(da, a.data(), a.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(db, b.data(), b.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(ds, scales, 16, cudaMemcpyHostToDevice);
    cublasLtHandle_t h;
    cublasLtCreate(&h);
    cublasLtMatmulDesc_t op;
    cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasOperation_t t = CUBLAS_OP_T;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t);
    cublasLtMatmulDesc_t sop; /* the same GEMM with A/B scale pointers */
    cublasLtMatmulDescCreate(&sop, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatmulDescSetAttribute(sop, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t);
    const float *sa = ds, *sb = ds + 1;
    cublasLtMatmulDescSetAttribute(sop, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa);
    cublasLtMatmulDescSetAttribute(sop, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb);
    cublasLtPointerMode_t pm = CUBLASLT_POINTER_MODE_DEVICE;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm, sizeof pm);
    cublasLtMatrixLayout_t la, lb, ld, la_nt, lb24;
    cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, k, m, k);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, k, n, k);
    cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, m);
    cublasLtMatrixLayoutCreate(&la_nt, CUDA_R_8F_E4M3, m, k, m); /* A not transposed */
    cublasLtMatrixLayoutCreate(&lb24, CUDA_R_8F_E4M3, k, m, 40); /* A with ld 40: not a multiple of 16 */
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    uint64_t ws = 0;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    EXPECT(cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, ld, ld, pref, 1, &res, &found) == CUBLAS_STATUS_SUCCESS &&
               found == 1, "fp8 heuristic");
    float al = 1.f, be = 0.f;
    EXPECT(cublasLtMatmul(h, op, &al, da, la, db, lb, &be, dd, ld, dd, ld, &res.algo, nullptr, 0, 0) ==
               CUBLAS_STATUS_INVALID_VALUE, "fp8 matmul with POINTER_MODE_DEVICE and host alpha/beta refused");
    EXPECT(cublasLtMatmul(h, op, ds + 2, da, la, db, lb, ds + 3, dd, ld, dd, ld, &res.algo, nullptr, 0, 0) ==
               CUBLAS_STATUS_SUCCESS, "fp8 matmul with a device alpha and beta");
    std::vector<float> d = download(dd, m * n);
    double worst = 0;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double s = 0;
            for (int l = 0; l < k; l++) s += (double)val(a[l + i * k]) * val(b[l + j * k]);
            worst = fmax(worst, fabs(0.75 * s - d[i + j * m]));
        }
    EXPECT(worst == 0, "fp8 TN product with a device alpha off by %g", worst);
    EXPECT(cublasLtMatmulAlgoGetHeuristic(h, sop, la, lb, ld, ld, pref, 1, &res, &found) == CUBLAS_STATUS_SUCCESS &&
               found == 1, "fp8 heuristic with scale pointers (the H200 offers algorithms)");
    EXPECT(cublasLtMatmul(h, sop, &al, da, la, db, lb, &be, dd, ld, dd, ld, &res.algo, nullptr, 0, 0) ==
               CUBLAS_STATUS_NOT_SUPPORTED, "fp8 matmul with A/B scale pointers refused (as on the H200)");
    int found2 = 0;
    EXPECT(cublasLtMatmulAlgoGetHeuristic(h, op, lb24, lb, ld, ld, pref, 1, &res, &found2) != CUBLAS_STATUS_SUCCESS,
           "an fp8 leading dimension of 40 refused");
    cublasLtMatmulDesc_t nt;
    cublasLtMatmulDescCreate(&nt, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    EXPECT(cublasLtMatmulAlgoGetHeuristic(h, nt, la_nt, lb, ld, ld, pref, 1, &res, &found2) != CUBLAS_STATUS_SUCCESS,
           "an fp8 GEMM in the NN layout refused");
    cublasLtMatmulDesc_t f32s;
    cublasLtMatmulDescCreate(&f32s, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatmulDescSetAttribute(f32s, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa);
    cublasLtMatrixLayout_t fa, fb;
    cublasLtMatrixLayoutCreate(&fa, CUDA_R_32F, m, k, m);
    cublasLtMatrixLayoutCreate(&fb, CUDA_R_32F, k, n, k);
    EXPECT(cublasLtMatmulAlgoGetHeuristic(h, f32s, fa, fb, ld, ld, pref, 1, &res, &found2) != CUBLAS_STATUS_SUCCESS,
           "a scale pointer on an f32 GEMM refused");
    printf("ok   cuBLASLt fp8 checks\n");
}

int main() {
    test_results();
    test_cublaslt();
    test_cublaslt_fp8();
    dies_with(host_pointer_to_kernel, "is host memory, not device memory", "host pointer handed to a kernel");
    dies_with(kernel_past_end, "past the end of a 1024-byte device allocation", "kernel writes past an allocation");
    dies_with(host_reads_device, "host code touched device memory", "host dereferences device memory");
    dies_with(divergent_barrier, "divergent __syncthreads", "divergent __syncthreads");
    dies_with(shuffle_after_exit, "with exited lanes", "shuffle with exited lanes");
    dies_with(deadlock, "deadlock", "shuffle and __syncthreads deadlock");
    dies_with(graph_replays_freed_buffer, "freed device memory", "graph replays a freed buffer");
    printf(failures ? "emu_selftest: %d FAILED\n" : "emu_selftest: all passed\n", failures);
    return failures ? 1 : 0;
}

/* gemm_peak.cu - the bf16 GEMM ceiling on this GPU, measured with cuBLASLt, for tests/gpu/run.sh.
 *
 * Prints one line per shape: "gemm M N K out TFLOP/s", then "peak_tflops X" (the best of the square 8192 runs,
 * bf16 output) - the number the DiT's fraction of peak is computed against. The DiT-shaped rows (f32 output, as
 * kiln's matmul writes it) show what the library reaches at the shapes kiln actually runs.
 *
 * Build: nvcc -O2 -arch=sm_90 tests/gpu/gemm_peak.cu -lcublasLt -o gemm_peak
 * Method (METHOD.md): random inputs (never zeros), 10 warm-up runs, then the median of 30 event-timed runs, the
 * inputs rotated among 4 copies so that L2 does not hold them. */
#include <cuda_bf16.h>
#include <string.h>

#include "lt_tn.cuh"

static __global__ void fill(__nv_bfloat16 *p, size_t n, unsigned seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
        p[i] = __float2bfloat16((float)(h & 0xffff) / 32768.0f - 1.0f);
    }
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* Row-major y[m,n] = x[m,k] . w[n,k]^T as kiln computes it (TN in cuBLASLt's column-major terms). */
static double run(cublasLtHandle_t lt, int m, int n, int k, bool f32_out, void *ws, size_t ws_bytes) {
    const int copies = 4;
    __nv_bfloat16 *x[4], *w[4];
    void *y;
    for (int i = 0; i < copies; i++) {
        CK(cudaMalloc(&x[i], (size_t)m * k * 2));
        CK(cudaMalloc(&w[i], (size_t)n * k * 2));
        fill<<<1024, 256>>>(x[i], (size_t)m * k, 17u + i);
        fill<<<1024, 256>>>(w[i], (size_t)n * k, 91u + i);
    }
    CK(cudaMalloc(&y, (size_t)m * n * (f32_out ? 4 : 2)));
    lt_tn g = {};
    LK(lt_tn_make(&g, CUDA_R_16BF, f32_out ? CUDA_R_32F : CUDA_R_16BF, m, n, k, ws_bytes, false, true));
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    LK(lt_tn_heuristic(lt, &g, 1, &res, &found));
    if (!found) {
        fprintf(stderr, "no algorithm for %d %d %d\n", m, n, k);
        exit(1);
    }
    float alpha = 1, beta = 0;
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int i = 0; i < 10; i++)
        LK(lt_tn_run(lt, &g, &res.algo, &alpha, w[i % copies], x[i % copies], &beta, y, ws, ws_bytes));
    enum { REPS = 30 };
    float ms[REPS];
    for (int i = 0; i < REPS; i++) {
        CK(cudaEventRecord(e0));
        LK(lt_tn_run(lt, &g, &res.algo, &alpha, w[i % copies], x[i % copies], &beta, y, ws, ws_bytes));
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms[i], e0, e1));
    }
    CK(cudaGetLastError());
    qsort(ms, REPS, sizeof *ms, cmp_float);
    double med = ms[REPS / 2];
    double tflops = 2.0 * m * n * (double)k / (med * 1e-3) / 1e12;
    printf("gemm %6d %6d %6d %s %8.1f TFLOP/s  (median %.3f ms)\n", m, n, k, f32_out ? "f32 " : "bf16", tflops, med);
    lt_tn_free(&g);
    for (int i = 0; i < copies; i++) cudaFree(x[i]), cudaFree(w[i]);
    cudaFree(y);
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    return tflops;
}

int main(int argc, char **argv) {
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    printf("device %s sm_%d%d %d SMs\n", p.name, p.major, p.minor, p.multiProcessorCount);
    cublasLtHandle_t lt;
    LK(cublasLtCreate(&lt));
    size_t ws_bytes = 32u << 20;
    void *ws;
    CK(cudaMalloc(&ws, ws_bytes));
    double peak = 0;
    for (int i = 0; i < 2; i++) {
        double t = run(lt, 8192, 8192, 8192, false, ws, ws_bytes);
        if (t > peak) peak = t;
    }
    /* The DiT at 1024x1024 (4096 image + 512 text tokens) and 512x512 batch 3 (3 x (1024 + 512) tokens). */
    const int shapes[][3] = {{4608, 27648, 3072}, {4608, 3072, 12288}, {4096, 9216, 3072}, {4096, 18432, 3072},
                             {4096, 3072, 9216},  {4096, 3072, 3072},  {4608, 9216, 3072}, {512, 9216, 3072}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) run(lt, shapes[i][0], shapes[i][1], shapes[i][2], true, ws, ws_bytes);
    printf("peak_tflops %.1f\n", peak);
    cudaFree(ws);
    cublasLtDestroy(lt);
    return 0;
}

/* cuda_kernels.cuh - helpers the .cu files share: the C interface include, launch checks, element loads and
 * stores for f32/bf16/f16, warp and block reductions. Device code only; C style. */
#ifndef KILN_COMPUTE_CUDA_KERNELS_CUH
#define KILN_COMPUTE_CUDA_KERNELS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

extern "C" {
#include "compute/cuda/cuda_internal.h"
}

#define KCU_STREAM(cb) ((cudaStream_t)(cb)->stream)

/* A kernel launch, written so that the emulator (tests/cuda_emu/kcu_emu.h, which defines both macros when the .cu
 * files are compiled as C++ for the CPU) can run the same source:
 *     KCU_LAUNCH(k_add, grid, threads, smem_bytes, KCU_STREAM(cb))(y, a, b);
 *     KCU_DYNAMIC_SMEM(float, sm);   // the block's dynamic shared memory, 128-byte aligned */
#ifndef KCU_EMU
#define KCU_LAUNCH(kernel, grid, block, smem, stream) kernel<<<grid, block, smem, stream>>>
#define KCU_DYNAMIC_SMEM(type, name) extern __shared__ __align__(128) type name[]
#else
/* the emulator checks that every matrix a kernel is given lies inside one device allocation */
static inline void kcu_emu_check_arg(const kcu_mat &m, const char *kernel, int arg) {
    if (m.data && m.rows > 0 && m.cols > 0)
        kcu_emu::check_device_range(m.data, (size_t)((m.rows - 1) * m.ld + m.cols) * kiln_dtype_size(m.dt), kernel, arg);
}
static inline void kcu_emu_check_arg(const kcu_qmat &q, const char *kernel, int arg) {
    if (q.data && q.rows > 0 && q.cols > 0) kcu_emu::check_device_range(q.data, (size_t)(q.rows * q.row_bytes), kernel, arg);
}
static inline void kcu_emu_check_arg(const kcu_view4 &v, const char *kernel, int arg) {
    int64_t last = 0;
    for (int d = 0; d < 4; d++) {
        if (v.shape[d] <= 0) return;
        last += (v.shape[d] - 1) * v.stride[d];
    }
    if (v.data) kcu_emu::check_device_range(v.data, (size_t)(last + 1) * kiln_dtype_size(v.dt), kernel, arg);
}
#endif

/* After a launch: a bad configuration or an earlier asynchronous fault becomes a status with the op's name. */
#define KCU_LAUNCHED(err, what)                                                                               \
    do {                                                                                                      \
        cudaError_t kcu_e_ = cudaGetLastError();                                                              \
        if (kcu_e_ != cudaSuccess)                                                                            \
            return KILN_FAIL((err), KILN_E_DEVICE, "%s: CUDA kernel launch failed: %s", (what),               \
                             cudaGetErrorString(kcu_e_));                                                     \
    } while (0)

#define KCU_CALL(err, call)                                                                                   \
    do {                                                                                                      \
        cudaError_t kcu_e_ = (call);                                                                          \
        if (kcu_e_ != cudaSuccess)                                                                            \
            return KILN_FAIL((err), KILN_E_DEVICE, "%s failed: %s", #call, cudaGetErrorString(kcu_e_));       \
    } while (0)

/* Element access by run-time dtype (f32, bf16, f16): every kernel computes in f32. */
static __device__ __forceinline__ float kcu_ld(const void *p, int64_t i, int dt) {
    if (dt == KILN_DT_BF16) return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    if (dt == KILN_DT_F16) return __half2float(((const __half *)p)[i]);
    return ((const float *)p)[i];
}
static __device__ __forceinline__ void kcu_st(void *p, int64_t i, int dt, float v) {
    if (dt == KILN_DT_BF16) ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
    else if (dt == KILN_DT_F16) ((__half *)p)[i] = __float2half_rn(v);
    else ((float *)p)[i] = v;
}

static __device__ __forceinline__ float kcu_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
static __device__ __forceinline__ float kcu_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
/* Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread gets the result. The fixed tree keeps
 * the order of additions the same on every run (deterministic). */
static __device__ __forceinline__ float kcu_block_sum(float v, float *shared32) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = kcu_warp_sum(v);
    __syncthreads(); /* shared32 may still be read by a previous call */
    if (lane == 0) shared32[warp] = v;
    __syncthreads();
    v = lane < nw ? shared32[lane] : 0.f;
    return kcu_warp_sum(v);
}
static __device__ __forceinline__ float kcu_block_max(float v, float *shared32) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = kcu_warp_max(v);
    __syncthreads();
    if (lane == 0) shared32[warp] = v;
    __syncthreads();
    v = lane < nw ? shared32[lane] : -INFINITY;
    return kcu_warp_max(v);
}

static inline unsigned kcu_blocks(int64_t n, int threads) {
    int64_t b = (n + threads - 1) / threads;
    return (unsigned)(b < 1 ? 1 : b > 0x7fffffff ? 0x7fffffff : b);
}

#endif

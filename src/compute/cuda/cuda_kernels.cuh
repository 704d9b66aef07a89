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

/* ---- tensor cores: mma.sync.m16n8k16, bf16 operands, f32 accumulation (sm_80+) ----
 * d (16 x 8, f32) += a (16 x 16, bf16) . b (16 x 8, bf16), one warp collectively. Fragments, as the PTX ISA
 * ("Matrix Fragments for mma.m16n8k16 with floating point type") lays them out, with g = lane / 4 and
 * t = lane % 4, each 32-bit register holding two bf16, the lower column (or row, for b) in the low half:
 *   a[0] = A[g][2t, 2t+1]   a[1] = A[g+8][2t, 2t+1]   a[2] = A[g][2t+8, 2t+9]   a[3] = A[g+8][2t+8, 2t+9]
 *   b[0] = B[2t, 2t+1][g]   b[1] = B[2t+8, 2t+9][g]
 *   d[0], d[1] = D[g][2t, 2t+1]                         d[2], d[3] = D[g+8][2t, 2t+1]
 * The emulator (tests/cuda_emu) computes the same product from the same layout. */
static __device__ __forceinline__ void kcu_mma_bf16_16816(float d[4], const uint32_t a[4], const uint32_t b[2]) {
#if defined(KCU_EMU)
    kcu_emu::mma_m16n8k16_bf16(d, a, b, __LINE__);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    __trap(); /* bf16 mma needs sm_80; the launchers never select it below that */
#endif
}
/* ldmatrix.m8n8.x4 (sm_75+), b16, one warp collectively: lane l gives the shared-memory address of row l % 8 of
 * matrix l / 8 (8 bf16, 16-byte aligned); register j of lane i = g * 4 + t then holds matrix j's row g, columns
 * 2t, 2t + 1 - or with TRANS its rows 2t, 2t + 1 of column g: the B fragment of an mma from a row-major
 * [k][n] tile. The emulator computes the same distribution. */
template <bool TRANS> static __device__ __forceinline__ void kcu_ldmatrix_x4(uint32_t r[4], const void *row) {
#if defined(KCU_EMU)
    kcu_emu::ldmatrix_x4(r, row, TRANS, __LINE__);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
    const unsigned a = (unsigned)__cvta_generic_to_shared(row);
    if (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(a));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(a));
#else
    (void)r, (void)row;
    __trap();
#endif
}
/* cp.async (sm_80+): 16 bytes from global to shared memory without passing through registers, so the warp goes
 * on computing while the copy is in flight; commit closes a group of copies, wait<N> blocks until at most N
 * committed groups are still in flight (then a __syncthreads makes the data visible to the other warps). Both
 * addresses 16-byte aligned. The emulator writes the bytes only at the wait that covers them. */
static __device__ __forceinline__ void kcu_cp_async_16(void *smem, const void *gmem) {
#if defined(KCU_EMU)
    kcu_emu::cp_async_16(smem, gmem, __LINE__);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned a = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(a), "l"(gmem) : "memory");
#else
    *(uint4 *)smem = *(const uint4 *)gmem;
#endif
}
static __device__ __forceinline__ void kcu_cp_async_commit() {
#if defined(KCU_EMU)
    kcu_emu::cp_async_commit();
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int N> static __device__ __forceinline__ void kcu_cp_async_wait() {
#if defined(KCU_EMU)
    kcu_emu::cp_async_wait(N, __LINE__);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}
/* Two f32 rounded to bf16 in one register, lo in the low half (a fragment's lower column). */
static __device__ __forceinline__ uint32_t kcu_pack_bf16(float lo, float hi) {
    return (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(lo)) |
           ((uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(hi)) << 16);
}
/* The 32 bits at p (4-byte aligned): two bf16 of shared memory as one fragment register. */
static __device__ __forceinline__ uint32_t kcu_ld_u32(const void *p) {
#ifdef KCU_EMU
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
#else
    return *(const uint32_t *)p;
#endif
}

static inline unsigned kcu_blocks(int64_t n, int threads) {
    int64_t b = (n + threads - 1) / threads;
    return (unsigned)(b < 1 ? 1 : b > 0x7fffffff ? 0x7fffffff : b);
}

#endif

/* kcu_emu.h - the device side of the CUDA emulator: force-included (-include) before every .cu file of the CUDA
 * backend when they are compiled as plain C++ for the CPU (cmake -DKILN_CUDA_EMU=ON, `make cuda-emu`).
 *
 * Why: a GPU is lent to this project rarely and for minutes. Everything a GPU run could find that does not
 * depend on the GPU's speed - a kernel indexing past its buffer, a missing __syncthreads, a host pointer handed
 * to a kernel, a tensor-core fragment filled from the wrong rows, a cuBLASLt layout the wrong way round, a graph replaying stale
 * pointers, a download during capture - this emulator finds on every commit, by running the backend's own .cu
 * sources unchanged (bar the KCU_LAUNCH macro) on the CPU, one emulated GPU thread per fiber:
 *
 *   blocks     run one after another; the threads of a block are fibers (emu_fiber.c), each runs until it
 *              reaches a barrier (__syncthreads, __syncwarp, a shuffle, an mma.sync) or returns
 *   __shared__ static storage: shared by the threads of the block that is running, as on the GPU, and
 *              filled with NaN bytes before each block (so is dynamic shared memory)
 *   shuffles   each lane posts its value and waits for the whole warp; a shuffle with lanes that have exited
 *              is reported (undefined on the GPU)
 *   mma.sync   m16n8k16 bf16: warp-collective; each lane's fragment registers are read with the PTX ISA's
 *              layout, so a kernel that fills a fragment from the wrong rows or columns computes a wrong product
 *   ldmatrix   x4 (.trans): warp-collective, the rows the lanes name distributed in the PTX ISA's layout; a row
 *              outside shared memory or not 16-byte aligned is reported
 *   cp.async   16-byte copies to shared memory land only at the cp.async.wait_group that covers their commit
 *              group: a tile read before its wait sees the NaN bytes shared memory starts with
 *   order      KCU_EMU_ORDER=reverse runs the threads of each phase last-to-first: a read of shared memory that
 *              lacks its barrier then sees stale data and the op's comparison fails
 *   memory     kernel pointer arguments (and every kcu_mat / kcu_view4 range) must lie inside one device
 *              allocation; device memory is unreadable to host code outside emulated device work (a host
 *              dereference of device memory is reported with its address, as the GPU would fault); freed
 *              addresses are never handed out again, so a stale pointer is reported, not silently valid
 *
 * The runtime and cuBLASLt subsets kiln calls are in emu_runtime.cc and emu_cublaslt.cc, declared by the real
 * CUDA headers. Not emulated: timing, memory coalescing, bank conflicts, and the asynchrony of streams (work
 * runs when it is enqueued, unless a graph is being captured). */
#ifndef KILN_TESTS_CUDA_EMU_KCU_EMU_H
#define KILN_TESTS_CUDA_EMU_KCU_EMU_H

#ifndef __cplusplus
#error "kcu_emu.h is for the .cu files compiled as C++"
#endif

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <tuple>
#include <type_traits>
#include <utility>

#define KCU_EMU 1

/* kernel argument checks, found by ordinary lookup for any argument; kcu_mat and kcu_view4 add overloads in
 * cuda_kernels.cuh that argument-dependent lookup finds */
template <class T> inline void kcu_emu_check_arg(const T &v, const char *kernel, int arg);

/* ---- the emulated thread, block and launch ---- */
namespace kcu_emu {

struct launch_state {
    dim3 grid, block;
    size_t dyn_smem;
    const char *kernel;
};

/* the built-ins of the running fiber, set by the scheduler at every switch (__thread: no TLS wrapper calls) */
extern __thread const uint3 *cur_tid, *cur_bid;
extern __thread int cur_lane;
extern __thread const launch_state *cur_launch;
void *dynamic_smem();

/* barriers (line: the call site, to report divergent barriers) */
void syncthreads(int line);
void syncwarp(unsigned mask, int line);
/* lane posts bits and waits for the whole warp; returns the bits lane src posted */
uint64_t warp_exchange(unsigned mask, uint64_t bits, int src_lane, int line);
[[noreturn]] void trap(const char *what);

/* The launch: checks the configuration (block size, dynamic shared memory against the limit the function was
 * given with cudaFuncSetAttribute), then runs body(thread) for every thread of every block - or records it when
 * the stream is being captured into a graph. Sets the error cudaGetLastError returns. */
typedef void (*body_fn)(void *ctx);
void launch(const void *func, const char *name, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
            void *ctx, body_fn body, body_fn check, void (*ctx_free)(void *ctx));

/* kernel argument checks: a pointer must be NULL or lie inside one device allocation, with bytes after it */
void check_device_range(const void *p, size_t bytes, const char *kernel, int arg);

template <class T> inline void check_arg(const T &, const char *, int) {}
template <class T> inline void check_arg(T *const &p, const char *kernel, int arg) {
    if (p) check_device_range((const void *)p, 1, kernel, arg);
}

template <class... P> struct kernel_call {
    void (*fn)(P...);
    const char *name;
    std::tuple<typename std::decay<P>::type...> args;

    template <size_t... I> void check(std::index_sequence<I...>) const {
        (kcu_emu_check_arg(std::get<I>(args), name, (int)I), ...);
    }
};

template <class... P> struct launcher {
    void (*fn)(P...);
    const char *name;
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;

    template <class... A> void operator()(A &&...a) {
        typedef kernel_call<P...> call;
        auto *c = new call{fn, name, std::tuple<typename std::decay<P>::type...>(std::forward<A>(a)...)};
        launch((const void *)fn, name, grid, block, smem, stream, c,
               [](void *ctx) { /* one emulated thread: its own copy of the parameters */
                   auto *k = (call *)ctx;
                   auto args = k->args;
                   std::apply(k->fn, args);
               },
               [](void *ctx) { ((call *)ctx)->check(std::index_sequence_for<P...>{}); },
               [](void *ctx) { delete (call *)ctx; });
    }
};

template <class... P>
inline launcher<P...> make_launcher(void (*fn)(P...), const char *name, dim3 g, dim3 b, size_t smem,
                                    cudaStream_t st) {
    return launcher<P...>{fn, name, g, b, smem, st};
}

} /* namespace kcu_emu */

template <class T> inline void kcu_emu_check_arg(const T &v, const char *kernel, int arg) {
    kcu_emu::check_arg(v, kernel, arg);
}

/* cuda_runtime.h's template overload for kernels is for nvcc only */
template <class... P> inline cudaError_t cudaFuncSetAttribute(void (*f)(P...), enum cudaFuncAttribute attr, int value) {
    return cudaFuncSetAttribute((const void *)f, attr, value);
}

#define KCU_LAUNCH(kernel, grid, block, smem, stream) kcu_emu::make_launcher(kernel, #kernel, grid, block, smem, stream)
#define KCU_DYNAMIC_SMEM(type, name) type *name = (type *)kcu_emu::dynamic_smem()

/* ---- CUDA C++ built-ins as the fibers see them ---- */
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif
/* One block runs at a time, so function statics are the running block's shared memory. They live in one ELF
 * section, which the scheduler fills with 0xff bytes (NaN) before every block: shared memory starts undefined
 * on a GPU, and a read the kernel did not write first must not see a previous block's values. */
#undef __shared__
#define __shared__ static __attribute__((section("kcu_emu_shared")))
#define threadIdx (*kcu_emu::cur_tid)
#define blockIdx (*kcu_emu::cur_bid)
#define blockDim (kcu_emu::cur_launch->block)
#define gridDim (kcu_emu::cur_launch->grid)
#define __syncthreads() kcu_emu::syncthreads(__LINE__)
#define __syncwarp(...) kcu_emu::syncwarp(kcu_emu_mask_(__VA_ARGS__ + 0), __LINE__)
static inline unsigned kcu_emu_mask_(unsigned m) { return m ? m : 0xffffffffu; }
#define __trap() kcu_emu::trap("__trap()")

template <class T> static inline T kcu_emu_shfl_(unsigned mask, T v, int src, int line) {
    static_assert(sizeof(T) <= 8, "shuffle of a value over 8 bytes");
    uint64_t b = 0;
    memcpy(&b, &v, sizeof v);
    b = kcu_emu::warp_exchange(mask, b, src, line);
    T r;
    memcpy(&r, &b, sizeof r);
    return r;
}
#define __shfl_sync(mask, v, src) kcu_emu_shfl_((mask), (v), (int)(src) & 31, __LINE__)
#define __shfl_xor_sync(mask, v, o) kcu_emu_shfl_((mask), (v), (kcu_emu::cur_lane ^ (int)(o)) & 31, __LINE__)

static inline float rsqrtf_emu_(float x) { return 1.0f / sqrtf(x); }
#define rsqrtf rsqrtf_emu_

/* f32 arithmetic rounded step by step (nvcc never contracts these into an FMA) */
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
/* bit casts (the CUDA headers declare them for device code only) */
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }

/* ---- tensor cores: mma.sync.m16n8k16 bf16 x bf16 -> f32 (cuda_kernels.cuh kcu_mma_bf16_16816) ---- */
namespace kcu_emu {
/* Warp-collective: every lane posts its fragments and waits for the whole warp; each lane then gets its share
 * of D = A . B + D from the fragment layout of the PTX ISA (products of bf16 exact in f32, summed in f32). */
void mma_m16n8k16_bf16(float d[4], const uint32_t a[4], const uint32_t b[2], int line);
/* ldmatrix .x4 (.trans), b16: warp-collective; each lane names one row of one of the four 8 x 8 matrices and gets
 * its registers from the rows all lanes named, in the PTX ISA's layout (cuda_kernels.cuh kcu_ldmatrix_x4) */
void ldmatrix_x4(uint32_t r[4], const void *row, bool trans, int line);
/* cp.async (sm_80): 16 bytes global -> shared, read at issue and written at the cp.async.wait_group that covers
 * its commit group; a thread that returns with copies in flight is reported (cuda_kernels.cuh kcu_cp_async_16) */
void cp_async_16(void *smem, const void *gmem, int line);
void cp_async_commit();
void cp_async_wait(int pending, int line);
} /* namespace kcu_emu */

#endif

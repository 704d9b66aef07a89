/* cuda_internal.h - what the CUDA backend's host C files and its .cu files share: the backend struct and the
 * launchers. Not a public header (models see only compute/ops.h).
 *
 * Split of work:
 *   cuda_ops.c, cuda_backend.c (host C, compiled only with KILN_HAVE_CUDA): argument checks (cuda_check.h),
 *     algorithm-cache lookups, scratch carving, then one launcher call per op. No CUDA API calls.
 *   *.cu (C-style CUDA, in the kiln_cuda library): the kernels, their launchers, and thin wrappers over the CUDA
 *     runtime and cuBLASLt. They never call back into host C of kiln_compute (the link order is
 *     kiln_compute -> kiln_cuda -> kiln_tensor -> kiln_base; a call back would be a cycle).
 * Launchers take already-checked kcu_mat views, enqueue on the backend's stream, check the launch, and return a
 * status; they never synchronise (except the runtime wrappers that say so).
 *
 * Numerics (docs/cuda-backend.md): activations live on the device as f32 or, where a model asks for the
 * backend's activation dtype in FAST (compute/ops.h kiln_backend_act_dtype), bf16; kernels compute in f32.
 * FAST matmuls round an f32 activation operand to bf16 into scratch and run bf16 x bf16 tensor-core GEMMs with
 * f32 accumulation and f32 (or bf16) output (the same numbers as the CPU backend's FAST path: bf16 products, f32 sums);
 * EXACT widens the weight to f32 and runs an f32 GEMM without TF32. Norms, softmax, RoPE and attention compute
 * in f32.
 *
 * The .cu files include this header inside extern "C" { }.
 */
#ifndef KILN_COMPUTE_CUDA_INTERNAL_H
#define KILN_COMPUTE_CUDA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "compute/cuda/cuda_algo_cache.h"
#include "compute/cuda/cuda_arena.h"
#include "compute/cuda/cuda_check.h"
#include "compute/cuda/cuda_graph_cache.h"
#include "compute/cuda/cuda_profile.h"
#include "compute/cuda/cuda_residency.h"
#include "compute/ops.h"
#include "tensor/tensor.h"

typedef struct kiln_cuda_backend {
    kiln_backend base; /* must be first */
    void *stream;      /* cudaStream_t: every op of this backend runs in order on it */
    void *lt;          /* cublasLtHandle_t */
    void *workspace;   /* cuBLASLt workspace, owned by this stream alone (sharing one across streams races) */
    size_t workspace_bytes;
    void *scratch; /* staging: bf16 copies of GEMM inputs, GEMM products for epilogues, im2col columns */
    size_t scratch_bytes;
    void *arena_base;   /* one device reservation that alloc() carves (NULL: every alloc is a cudaMalloc) */
    kcu_arena arena;    /* offsets into arena_base */
    bool arena_fixed;   /* KILN_CUDA_ARENA_MB set: sized at open, not per request */
    uint64_t arena_peak; /* the largest arena.peak of any arena this backend had (they are replaced per request) */
    uint64_t placed_peak; /* the most weight bytes placed at once */
    uint64_t devmem_bytes, devmem_peak; /* ops->alloc bytes outside the arena: now, at most */
    uint64_t arena_gen; /* bumps when arena_base, scratch or workspace move: captured graphs hold their pointers */
    kcu_algo_cache algos;
    kcu_graph_cache graphs;
    kiln_ranges devmem;    /* cudaMalloc'd allocations outside the arena (ops->alloc fallback) */
    kcu_placements placed; /* weights placed at load: host range -> device copy (ops->place) */
    bool deterministic; /* KILN_DETERMINISTIC=1: no split-K GEMMs, fixed reduction orders everywhere */
    bool capturing;     /* inside a CUDA-graph capture: no allocation, no synchronisation allowed */
    kcu_profile *prof;  /* KILN_CUDA_PROFILE=1: GPU time per op (cuda_profile.h); NULL otherwise */
    int tc_bq;          /* KILN_CUDA_TC_BQ=128: the tensor-core attention's blocks take 128 query rows (8 warps) */
    int tc_async;       /* KILN_CUDA_TC_ASYNC=0: the tensor-core attention loads K and V without cp.async (A/B) */
    bool tc_qsmem;      /* KILN_CUDA_TC_QSMEM=1: its Q stays in shared memory, read per key tile (fewer registers; A/B) */
    int attention;      /* KILN_CUDA_ATTENTION: 0 = auto (default: tensor cores in FAST, simple in EXACT), 1 = the
                         * simple f32 kernel ("simple"), 2 = tensor cores ("tc") in both precisions, 3 = cuDNN's
                         * SDPA where it takes the call, else tensor cores ("cudnn", cuda_cudnn.h) */
    bool conv_cudnn;    /* KILN_CUDA_CONV=cudnn: convolutions through cuDNN where it takes them (cuda_cudnn.h) */
    bool wide_gemm;     /* KILN_CUDA_WIDE_ATTENTION=gemm: one head over 128 dims (the VAE's) as GEMMs + softmax */
    void *cudnn;        /* cuda_cudnn.cpp's state (handle, plans) when attention = 3 or conv_cudnn; else NULL */
    uint64_t cudnn_calls, cudnn_fallbacks; /* attention calls cuDNN ran / passed to variant 2 (the close line) */
    uint64_t cudnn_convs, conv_fallbacks;  /* convolutions likewise, with KILN_CUDA_CONV=cudnn */
    bool fp8_gemm;      /* KILN_CUDA_FP8=1: fp8 weights as e4m3 x e4m3 GEMMs (activations quantised per tensor) */
    bool fuse_epilogues; /* bias and gated residual in cuBLASLt's epilogue where it takes them (KILN_CUDA_FUSE=0: never) */
    uint64_t gemm_fused; /* GEMMs that ran with a fused epilogue (the close line) */
    int sm_count, cc_major, cc_minor;
    size_t smem_optin; /* max dynamic shared memory per block after opt-in */
    size_t total_mem;
    char name[256];
} kiln_cuda_backend;

static inline kiln_cuda_backend *cuda_be(kiln_backend *be) { return (kiln_cuda_backend *)be; }

/* ---- host C in cuda_backend.c ---- */
/* true when p points into device memory this backend allocated (the arena or a tracked cudaMalloc). */
bool kcu_owns(const kiln_cuda_backend *cb, const void *p);

/* ---- runtime wrappers (cuda_rt.cu) ---- */
/* Number of usable devices; KILN_E_DEVICE with the driver's reason when there is none (no driver, no GPU). */
kiln_status kcu_device_count(int *n, kiln_err *err);
/* Selects the device, creates the stream and the cuBLASLt handle, reads the device properties into cb. */
kiln_status kcu_open(kiln_cuda_backend *cb, int device, kiln_err *err);
/* Destroys what kcu_open and the scratch/workspace/arena functions created. Safe on a half-opened cb. */
void kcu_close(kiln_cuda_backend *cb);
/* Makes cb's GPU the calling thread's current device (CUDA's current device is per host thread: a request may
 * run on another thread than the one that opened the backend). Every entry point calls it first. */
kiln_status kcu_use(kiln_cuda_backend *cb, kiln_err *err);
/* An op's entry: kcu_use, and with KILN_CUDA_PROFILE=1 an event on the stream marking where op `name` starts. */
kiln_status kcu_op_begin(kiln_cuda_backend *cb, const char *name, kiln_err *err);
/* KILN_CUDA_PROFILE: waits for the marked work and adds each op's interval to cb->prof's rows; the events are
 * reused. Outside capture only. */
kiln_status kcu_prof_flush(kiln_cuda_backend *cb, kiln_err *err);
/* Destroys the profile's events. */
void kcu_prof_free(kcu_profile *p);
void *kcu_malloc(size_t bytes);          /* cudaMalloc; NULL on failure */
void kcu_free(void *p);                  /* cudaFree; NULL is a no-op */
kiln_status kcu_memcpy_h2d(kiln_cuda_backend *cb, void *dst, const void *src, size_t bytes, kiln_err *err);
/* Weight placement: host -> device through pinned double-buffered staging (synchronous, like h2d). */
kiln_status kcu_upload_staged(kiln_cuda_backend *cb, void *dst, const void *src, size_t bytes, kiln_err *err);
kiln_status kcu_memcpy_d2h(kiln_cuda_backend *cb, void *dst, const void *src, size_t bytes, kiln_err *err);
kiln_status kcu_memset(kiln_cuda_backend *cb, void *dst, int byte, size_t bytes, kiln_err *err);
kiln_status kcu_sync(kiln_cuda_backend *cb, kiln_err *err);
/* Grows cb->scratch to at least bytes (synchronises when it grows; fails while capturing). */
kiln_status kcu_scratch_reserve(kiln_cuda_backend *cb, size_t bytes, kiln_err *err);
/* Grows the cuBLASLt workspace likewise. */
kiln_status kcu_workspace_reserve(kiln_cuda_backend *cb, size_t bytes, kiln_err *err);
/* Free and total device memory (bytes) and the peak this process reached, if the driver tells. */
kiln_status kcu_mem_info(size_t *free_b, size_t *total_b, kiln_err *err);

/* ---- CUDA graphs (cuda_graph.cu) ---- */
kiln_status kcu_capture_begin(kiln_cuda_backend *cb, kiln_err *err);
/* Ends the capture and instantiates it: *exec = cudaGraphExec_t, or NULL when capture failed (status says why). */
kiln_status kcu_capture_end(kiln_cuda_backend *cb, void **exec, kiln_err *err);
kiln_status kcu_graph_launch(kiln_cuda_backend *cb, void *exec, kiln_err *err);
void kcu_graph_destroy(void *ctx, void *exec);

/* ---- GEMM (cuda_gemm.cu): row-major y[m,n] (beta? +=) x[m,k] . w[n,k]^T, x/w both bf16, both f32 or both
 * e4m3; y f32 (or bf16 for bf16/e4m3 operands). ---- */
/* The device memory a GEMM reads besides its operands. */
typedef struct kcu_gemm_extra {
    /* e4m3 operands: KCU_FP8_SCALES floats in device memory, written by kcu_quantize_fp8: the GEMM's alpha
     * (w's scale times x's) and beta are read from there (CUBLASLT_POINTER_MODE_DEVICE) */
    const float *scales;
    const void *bias;    /* key->epilogue KCU_GEMM_BIAS: [n] in y's dtype */
    const float *gate;   /* key->epilogue KCU_GEMM_GATE: [n] f32, y += gate[col] * P */
} kcu_gemm_extra;
/* Asks cuBLASLt's heuristic for the best algorithm for key (deterministic mode: no split-K reductions).
 * KILN_E_UNSUPPORTED when it has none (for a fused epilogue: the caller falls back to the epilogue kernel). */
kiln_status kcu_gemm_pick(kiln_cuda_backend *cb, const kcu_gemm_key *key, const kcu_gemm_extra *ex, kcu_algo *algo,
                          kiln_err *err);
kiln_status kcu_gemm_run(kiln_cuda_backend *cb, const kcu_gemm_key *key, const kcu_algo *algo, void *y,
                         const void *x, const void *w, const kcu_gemm_extra *ex, kiln_err *err);

/* ---- elementwise (cuda_elementwise.cu) ---- */
/* dst[r, c] = bf16(src[r, c]) (f32 -> bf16 into a contiguous [rows, cols] buffer); also widens bf16 -> f32. */
kiln_status kcu_convert(kiln_cuda_backend *cb, const kcu_mat *dst, const kcu_mat *src, kiln_err *err);
/* dst (bf16 or f32 [rows, cols] at dst->ld) = the values of the quantised weight w (cuda_dequant.cu): bit-exact
 * with tensor/quant.h's kiln_dequant (fp8: times w->scale, in f32), then rounded to dst's dtype. */
kiln_status kcu_dequant(kiln_cuda_backend *cb, const kcu_mat *dst, const kcu_qmat *w, kiln_err *err);
/* Per-tensor fp8 quantisation of an activation for an e4m3 GEMM (cuda_dequant.cu): s = max|x| / 448 (1 when x
 * is all zeros), dst (e4m3 [rows, cols] at dst->ld) = e4m3(x / s), rounded to nearest even and saturated;
 * scales (device memory, KCU_FP8_SCALES floats): [KCU_FP8_W] = w_scale, [KCU_FP8_X] = s, [KCU_FP8_ALPHA] =
 * w_scale * s and [KCU_FP8_BETA] = beta (0 or 1), the GEMM's alpha and beta as device pointers - cuBLASLt 13.1
 * on an H200 refused every e4m3 GEMM given A/B scale pointers (cuda_gemm.cu). Written by a kernel on the stream,
 * so a captured graph replays them. tmp: KCU_FP8_TMP_BYTES of device scratch for the partial maxima. */
#define KCU_FP8_TMP_BYTES (1024 * sizeof(float))
enum { KCU_FP8_W = 0, KCU_FP8_X = 1, KCU_FP8_ALPHA = 2, KCU_FP8_BETA = 3, KCU_FP8_SCALES = 4 };
kiln_status kcu_quantize_fp8(kiln_cuda_backend *cb, const kcu_mat *dst, const kcu_mat *x, float w_scale, float beta,
                             float *scales, float *tmp, kiln_err *err);
/* Matmul epilogue: y (op)= p + bias (bias, gate may be NULL). op: KILN_EPI_NONE stores, ADD adds, GATED adds
 * gate[col] * (p + bias). */
kiln_status kcu_epilogue(kiln_cuda_backend *cb, const kcu_mat *y, const kcu_mat *p, const kcu_mat *bias,
                         const kcu_mat *gate, int kind, kiln_err *err);
kiln_status kcu_swiglu(kiln_cuda_backend *cb, const kcu_mat *y, const kcu_mat *ab, kiln_err *err);
/* act: 0 SiLU, 1 GELU (tanh approximation), here and in kcu_activation. */
#define KCU_ACT_SILU 0
#define KCU_ACT_GELU 1
/* y = act(a) * b (silu_mul, gelu_mul): f32 arithmetic, one rounding to y's dtype. */
kiln_status kcu_act_mul(kiln_cuda_backend *cb, const kcu_mat *y, const kcu_mat *a, const kcu_mat *b, int act,
                        kiln_err *err);
kiln_status kcu_activation(kiln_cuda_backend *cb, const kcu_mat *y, const kcu_mat *x, int act, kiln_err *err);
kiln_status kcu_add(kiln_cuda_backend *cb, const kcu_mat *y, const kcu_mat *a, const kcu_mat *b, kiln_err *err);
kiln_status kcu_gated_add(kiln_cuda_backend *cb, const kcu_mat *x, const kcu_mat *gate, const kcu_mat *y,
                          kiln_err *err);
kiln_status kcu_scale_shift(kiln_cuda_backend *cb, const kcu_mat *y, const kcu_mat *x, float a, float b,
                            kiln_err *err);
kiln_status kcu_copy4(kiln_cuda_backend *cb, const kcu_view4 *y, const kcu_view4 *x, kiln_err *err);
/* dst [cols, rows] = src^T for bf16/f16 (the wide attention's V^T) */
kiln_status kcu_transpose16(kiln_cuda_backend *cb, const kcu_mat *dst, const kcu_mat *src, kiln_err *err);

/* ---- norms, softmax, RoPE (cuda_norm.cu, cuda_rope.cu) ---- */
kiln_status kcu_rms_norm(kiln_cuda_backend *cb, const kcu_mat *y, const kcu_mat *x, const kcu_mat *gain, float eps,
                         kiln_err *err);
kiln_status kcu_layer_norm_modulate(kiln_cuda_backend *cb, const kcu_mat *y, const kcu_mat *x, const kcu_mat *shift,
                                    const kcu_mat *scale, float eps, kiln_err *err);
kiln_status kcu_softmax(kiln_cuda_backend *cb, const kcu_mat *y, const kcu_mat *x, kiln_err *err);
/* y = softmax(x * scale) per row (the wide attention's scores: cuda_ops.c) */
kiln_status kcu_softmax_scaled(kiln_cuda_backend *cb, const kcu_mat *y, const kcu_mat *x, float scale, kiln_err *err);
kiln_status kcu_rope(kiln_cuda_backend *cb, const kcu_mat *x, const kcu_mat *cos, const kcu_mat *sin, int n_heads,
                     bool interleaved, kiln_err *err);

/* ---- attention variant 3 (cuda_cudnn.cpp, built with KILN_HAVE_CUDNN): cuDNN's SDPA, cuda_cudnn.h ---- */
/* Loads cuDNN (once per process) and makes a handle on cb's stream; KILN_E_UNSUPPORTED naming what failed to load. */
kiln_status kcu_cudnn_open(kiln_cuda_backend *cb, kiln_err *err);
void kcu_cudnn_close(kiln_cuda_backend *cb);
/* out = softmax(q k^T scale) v by cuDNN; KILN_E_UNSUPPORTED when cuDNN does not take the call (the caller runs
 * variant 2), another status when it failed. No key mask or bias: kcu_cudnn_attention_refusal. */
kiln_status kcu_cudnn_attention(kiln_cuda_backend *cb, const kcu_mat *out, const kcu_mat *q, const kcu_mat *k,
                                const kcu_mat *v, int n_q_heads, int n_kv_heads, float scale, bool causal,
                                kiln_err *err);
/* y = conv(x, w) (+ bias) by cuDNN, NCHW (x is [xd], w [co, xd[1], kh, kh]); KILN_E_UNSUPPORTED as above
 * (kcu_cudnn_conv_refusal first). */
kiln_status kcu_cudnn_conv2d(kiln_cuda_backend *cb, void *y, kiln_dtype ydt, const void *x, const int64_t xd[4],
                             const void *w, int64_t co, int kh, int stride, int pad_begin, int pad_end,
                             const kcu_mat *bias, kiln_err *err);
/* Load cuDNN and validate the graph kcu_cudnn_attention / kcu_cudnn_conv2d would build for this shape on sm (no GPU
 * needed; bias_dt -1: none). */
kiln_status kcu_cudnn_check_graph(int sm, int64_t sq, int64_t sk, int hq, int hk, int dh, int64_t ld_q, int64_t ld_kv,
                                  bool causal, float scale, kiln_err *err);
kiln_status kcu_cudnn_check_conv(int sm, const int64_t xd[4], int64_t co, int kh, int stride, int pad_begin,
                                 int pad_end, kiln_dtype ydt, int bias_dt, kiln_err *err);

/* ---- attention (cuda_attention.cu) ---- */
/* bias: NULL or f32 [n_q_heads * Sq, Sk] at bias->ld (compute/ops.h), added to the scaled scores. */
kiln_status kcu_attention(kiln_cuda_backend *cb, const kcu_mat *out, const kcu_mat *q, const kcu_mat *k,
                          const kcu_mat *v, int n_q_heads, int n_kv_heads, float scale, bool causal,
                          const kcu_mat *key_mask, const kcu_mat *bias, kiln_err *err);
/* Largest head dim the attention kernel takes on this device (shared-memory bound). */
int kcu_attention_max_head_dim(const kiln_cuda_backend *cb);
/* Variant 2 (cuda_attention_tc.cu): tensor cores (mma.sync), bf16 operands; head dims up to 512 on sm_80+; bias
 * as kcu_attention's. */
bool kcu_attention_tc_supported(const kiln_cuda_backend *cb, int dh);
kiln_status kcu_attention_tc(kiln_cuda_backend *cb, const kcu_mat *out, const kcu_mat *q, const kcu_mat *k,
                             const kcu_mat *v, int n_q_heads, int n_kv_heads, float scale, bool causal,
                             const kcu_mat *key_mask, const kcu_mat *bias, kiln_err *err);

/* ---- images (cuda_image.cu): NCHW, f32 or bf16 (x / y of dtype xdt / ydt), computed in f32 ---- */
/* col[p, (ci*kh + i)*kw + j] for output pixels p in [p0, p0+np) of image n: the im2col matrix, dtype col->dt. */
kiln_status kcu_im2col(kiln_cuda_backend *cb, const kcu_mat *col, const void *x, kiln_dtype xdt, const int64_t xdims[4],
                       int64_t n, int kh, int kw, int stride, int pad_begin, int64_t ho, int64_t wo, int64_t p0,
                       int64_t np, kiln_err *err);
/* y[n, c, p] += bias[c] for an NCHW tensor seen as [N*C, HW] rows. */
kiln_status kcu_bias_nchw(kiln_cuda_backend *cb, void *y, kiln_dtype ydt, const kcu_mat *bias, int64_t n, int64_t c,
                          int64_t hw, kiln_err *err);
/* tmp: kcu_group_norm_scratch(dims, groups) bytes of device scratch for the per-chunk statistics. */
size_t kcu_group_norm_scratch(const int64_t dims[4], int groups);
kiln_status kcu_group_norm(kiln_cuda_backend *cb, void *y, kiln_dtype ydt, const void *x, kiln_dtype xdt,
                           const int64_t dims[4], int groups, const kcu_mat *gamma, const kcu_mat *beta, float eps,
                           bool silu, void *tmp, kiln_err *err);
kiln_status kcu_upsample2x(kiln_cuda_backend *cb, void *y, kiln_dtype ydt, const void *x, kiln_dtype xdt,
                           const int64_t xdims[4], kiln_err *err);

#endif

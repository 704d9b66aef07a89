/* ops.h - the compute interface every model calls. One table of operations, implemented per backend
 * (cpu/ now, cuda/ next). Models never call intrinsics or CUDA directly.
 *
 * Conventions (hold for every op unless its comment says otherwise):
 * - Activations are f32 [rows, cols] in "token-major" layout: a sequence of S tokens with H heads of Dh dims is
 *   [S, H*Dh]. A backend may keep them in bf16 instead (kiln_backend_act_dtype: CUDA in FAST mode): its ops then
 *   read bf16, compute in f32 and round what they store to bf16, as PyTorch runs a bf16 model; a model that
 *   allocates its activations in that dtype keeps f32 only where the official code does (the latents, the
 *   scheduler's and CFG's arithmetic, the timestep and modulation vectors, RoPE tables). Tensors may be strided views (e.g. the Q, K and V column blocks of one fused QKV output
 *   [S, 3*D] with row stride 3*D): ops honour the row stride (stride[0]) of 2-D inputs and outputs; the last
 *   dimension must be contiguous (stride 1).
 * - Weights are used as stored (bf16, or f32 for small ones) - never converted to an f32 copy.
 *   Linear weights are PyTorch-style [out, in]:  y = x . W^T.
 * - Output tensors are preallocated by the caller with the right shape; ops write every element.
 *   In-place (y == x) is allowed where the comment says so.
 * - Every op returns KILN_OK or a status with a message (shape mismatch, unsupported dtype, device error).
 *   Shape checks are cheap and always on.
 *
 *     kiln_backend *be;
 *     kiln_backend_open_cpu(0, &be, &err);                  // 0 threads = all cores
 *     KILN_TRY(kiln_matmul(be, &y, &x, &w, NULL, &err));    // y[S,N] = x[S,K] . w[N,K]^T
 *     kiln_backend_close(be);
 */
#ifndef KILN_COMPUTE_OPS_H
#define KILN_COMPUTE_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "tensor/tensor.h"

typedef struct kiln_backend kiln_backend;

/* Numeric mode of matmul/attention. EXACT: f32 activations times weights widened to f32, f32 accumulation
 * (matches fp32 references to ~1e-6 relative). FAST: activations rounded to bf16 for bf16 dot products with
 * f32 accumulation (AVX512-BF16 / AMX / tensor cores; matches bf16 references). Default: FAST. */
typedef enum kiln_precision { KILN_PREC_FAST = 0, KILN_PREC_EXACT = 1 } kiln_precision;

/* What a matmul does with its product P = x . w^T before storing. */
typedef enum kiln_epilogue_kind {
    KILN_EPI_NONE = 0,       /* y = P (+ bias) */
    KILN_EPI_GATED_RESIDUAL, /* y += gate[col] * (P (+ bias))   (y holds the residual stream; gate is [N]) */
    KILN_EPI_ADD,            /* y += P (+ bias)                  (plain residual) */
} kiln_epilogue_kind;

typedef struct kiln_epilogue {
    kiln_epilogue_kind kind;
    const kiln_tensor *gate; /* f32 [N], for GATED_RESIDUAL */
} kiln_epilogue;

/* The operations. Every function pointer must be set by a backend. */
typedef struct kiln_ops {
    const char *name; /* "cpu-avx512bf16", "cpu-avx2", "cpu-generic", "cuda" */

    /* y[M,N] (op)= x[M,K] . w[N,K]^T + bias[N]. x f32 (or the backend's activation dtype); w bf16 or f32; bias f32
     * or NULL; y f32 (or the activation dtype). w may also be quantised (tensor/tensor.h: GGML blocks as
     * KILN_DT_QBLOCK, fp8 with qscale): it stays quantised in memory and is widened per K slice inside the weight
     * packing (CPU; such products run EXACT) or per matmul into scratch (CUDA: cuda_dequant.cu), never copied whole
     * for good. */
    kiln_status (*matmul)(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, const kiln_tensor *w,
                          const kiln_tensor *bias, const kiln_epilogue *epi, kiln_err *err);

    /* Multi-head attention, softmax(q k^T * scale + bias + mask) v, O(seq) extra memory (online softmax, tiled).
     * q [Sq, Hq*Dh], k/v [Sk, Hkv*Dh], out [Sq, Hq*Dh]; Hq % Hkv == 0 (GQA: q head h reads kv head h/(Hq/Hkv)).
     * causal: query i sees keys j <= i. key_mask: NULL or u8/bool [Sk], 0 = key excluded. bias: NULL or an
     * additive score bias, f32 contiguous [Hq*Sq, Sk] (row h*Sq + i: query i of head h over the keys; T5's
     * relative-position bias), added to the scaled scores before the softmax; a -inf entry excludes that key.
     * The bias is f32 on every backend (also where the activations are bf16). A query row whose keys are all
     * excluded gets zeros. */
    kiln_status (*attention)(kiln_backend *be, kiln_tensor *out, const kiln_tensor *q, const kiln_tensor *k,
                             const kiln_tensor *v, int n_q_heads, int n_kv_heads, float scale, bool causal,
                             const kiln_tensor *key_mask, const kiln_tensor *bias, kiln_err *err);

    /* y = x * rsqrt(mean(x^2, last dim of size gain->shape[0]) + eps) * gain. x is [R, C] with C a multiple of
     * the gain length G: normalises each G-wide group (per-head q/k norms: G = Dh). y == x allowed. */
    kiln_status (*rms_norm)(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, const kiln_tensor *gain,
                            float eps, kiln_err *err);

    /* y = (1 + scale) * LN(x) + shift, LN without affine over the last dim (eps). shift/scale f32 [C]
     * (broadcast over rows); both NULL = plain LayerNorm. y == x allowed. */
    kiln_status (*layer_norm_modulate)(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x,
                                       const kiln_tensor *shift, const kiln_tensor *scale, float eps,
                                       kiln_err *err);

    /* RoPE in place on x [S, H*Dh] with per-token angle tables cos/sin f32 [T, Dh/2] (same for every head).
     * interleaved: pairs (2i, 2i+1) (FLUX DiT). half-split: pairs (i, i+Dh/2) (Qwen3).
     * S may be a multiple of T: row r uses table row r % T (a batch of sequences stacked as [B*T, H*Dh]). */
    kiln_status (*rope)(kiln_backend *be, kiln_tensor *x, const kiln_tensor *cos, const kiln_tensor *sin,
                        int n_heads, bool interleaved, kiln_err *err);

    /* y[R, F] = SiLU(ab[:, :F]) * ab[:, F:2F]   (ab [R, 2F]). */
    kiln_status (*swiglu)(kiln_backend *be, kiln_tensor *y, const kiln_tensor *ab, kiln_err *err);
    /* y[R, F] = SiLU(a) * b for two separate [R, F] inputs (Qwen3's gate/up). y == a allowed. */
    kiln_status (*silu_mul)(kiln_backend *be, kiln_tensor *y, const kiln_tensor *a, const kiln_tensor *b,
                            kiln_err *err);
    /* y[R, F] = GELU_tanh(a) * b, as silu_mul (T5's gated-GELU: gelu_new(wi_0 h) * wi_1 h). y == a allowed. */
    kiln_status (*gelu_mul)(kiln_backend *be, kiln_tensor *y, const kiln_tensor *a, const kiln_tensor *b,
                            kiln_err *err);
    /* Elementwise, y == x allowed. */
    kiln_status (*silu)(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, kiln_err *err);
    kiln_status (*gelu_tanh)(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, kiln_err *err);
    /* Row softmax over the last dim. */
    kiln_status (*softmax)(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, kiln_err *err);
    /* y = a + b (same shape), y == a allowed. */
    kiln_status (*add)(kiln_backend *be, kiln_tensor *y, const kiln_tensor *a, const kiln_tensor *b,
                       kiln_err *err);
    /* x += gate[col] * y   (x, y [R, C]; gate f32 [C]). */
    kiln_status (*gated_add)(kiln_backend *be, kiln_tensor *x, const kiln_tensor *gate, const kiln_tensor *y,
                             kiln_err *err);
    /* y = a * x + b elementwise (scalars). */
    kiln_status (*scale_shift)(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, float a, float b,
                               kiln_err *err);
    /* Strided copy with dtype conversion: y and x have equal shapes (any strides, up to 4-D). Used for
     * concat (copy into a row/column range of y), split, transposes and casts. */
    kiln_status (*copy)(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, kiln_err *err);

    /* Images are NCHW f32. y[N,Co,Ho,Wo] = conv(x[N,Ci,H,W], w[Co,Ci,kh,kw] (bf16 or f32), bias f32 [Co] or NULL)
     * kh = kw in {1, 3}; stride 1 or 2; pad_top/left and pad_bottom/right separately (FLUX.2 VAE downsample
     * pads only right/bottom). */
    kiln_status (*conv2d)(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, const kiln_tensor *w,
                          const kiln_tensor *bias, int stride, int pad_begin, int pad_end, kiln_err *err);
    /* GroupNorm over NCHW with affine gamma/beta f32 [C]; optionally SiLU fused after. y == x allowed. */
    kiln_status (*group_norm)(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, int groups,
                              const kiln_tensor *gamma, const kiln_tensor *beta, float eps, bool silu,
                              kiln_err *err);
    /* Nearest-neighbour 2x upsample, NCHW. */
    kiln_status (*upsample2x)(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, kiln_err *err);

    /* Residency contract: every tensor an op receives lies in memory this backend owns - allocated by alloc, or
     * placed by place - and nothing else (a host-mapped checkpoint tensor handed to a CUDA op is a bug).
     * Weights are placed once, at load (models/weights.h kiln_wset_place), and unplaced when the model is freed:
     *   CPU: zero copy, the host bytes are used as they are (the placement only records them: strict mode).
     *   CUDA: a device copy is uploaded now; an op given a tensor inside [host, host+bytes) uses the copy.
     * The host bytes must not change and must stay mapped while placed. Placements of one backend must not
     * overlap. KILN_E_NOMEM when the backend is full, KILN_E_INVALID for an overlap or NULL. */
    kiln_status (*place)(kiln_backend *be, const void *host, size_t bytes, kiln_err *err);
    /* Ends the placement that starts at host (frees a device copy). Unknown host: logged, ignored. */
    void (*unplace)(kiln_backend *be, const void *host);
    /* The coming request's plan: its activations peak at `bytes` (the pipeline's estimate). CUDA sizes its arena
     * from it (cuda_arena.h kcu_arena_capacity_for); the CPU ignores it. Never fails a request that could run:
     * what does not fit the arena is allocated outside it. */
    kiln_status (*reserve)(kiln_backend *be, size_t bytes, kiln_err *err);
    /* Memory on this backend (host memory for the CPU). 64-byte aligned. */
    void *(*alloc)(kiln_backend *be, size_t bytes);
    void (*free)(kiln_backend *be, void *p);
    /* Copies between host and this backend's memory (memcpy on the CPU). */
    kiln_status (*upload)(kiln_backend *be, void *dst, const void *src, size_t bytes, kiln_err *err);
    kiln_status (*download)(kiln_backend *be, void *dst, const void *src, size_t bytes, kiln_err *err);
    /* Waits for queued work (no-op on the CPU). */
    kiln_status (*sync)(kiln_backend *be, kiln_err *err);
    void (*close)(kiln_backend *be);
} kiln_ops;

/* Every backend's struct begins with this header. */
struct kiln_backend {
    const kiln_ops *ops;
    kiln_backend_kind kind;
    int device;
    kiln_precision precision;
    bool bf16_activations; /* its ops take bf16 activations, and FAST models keep theirs in bf16 (CUDA) */
    /* Bytes of memory from alloc that are live now, and the most live since the last reset of alloc_peak (the
     * pipeline resets it per request and reports the peak beside its plan: kiln_result.act_peak_bytes). Kept by
     * the backend's alloc/free (CUDA: the arena's rounded blocks); one caller at a time, like the backend. */
    size_t alloc_live, alloc_peak;
};

/* alloc/free's bookkeeping of alloc_live and alloc_peak. */
static inline void kiln_backend_count_alloc(kiln_backend *be, size_t bytes) {
    be->alloc_live += bytes;
    if (be->alloc_live > be->alloc_peak) be->alloc_peak = be->alloc_live;
}
static inline void kiln_backend_count_free(kiln_backend *be, size_t bytes) {
    be->alloc_live = bytes < be->alloc_live ? be->alloc_live - bytes : 0;
}

/* The dtype a model allocates its activations in on be: bf16 where the backend takes them and the precision is
 * FAST (CUDA; KILN_CUDA_ACT=f32 keeps f32), else f32 (the CPU; EXACT everywhere). */
static inline kiln_dtype kiln_backend_act_dtype(const kiln_backend *be) {
    return be->bf16_activations && be->precision == KILN_PREC_FAST ? KILN_DT_BF16 : KILN_DT_F32;
}

/* CPU backend: n_threads 0 = KILN_THREADS or all cores. Picks the best kernels for this CPU at run time
 * (AMX-BF16, AVX-512 BF16, AVX2+FMA, portable C); KILN_CPU=generic|avx2|avx512|amx forces a lower tier
 * (KILN_E_UNSUPPORTED if above what the CPU has). FAST applies to bf16 weights (f32 weights always run EXACT).
 * A backend serves one caller at a time (like a CUDA stream): it owns grow-only scratch that ops reuse.
 * KILN_STRICT_RESIDENCY=1 opens it in strict-residency mode (cpu/cpu_strict.c): every op first checks that each
 * tensor it is given lies inside memory this backend allocated or placed, and fails naming the op and the
 * argument otherwise - the CUDA contract enforced on the CPU, so that a model handing an op host memory is caught
 * on every commit without a GPU. Decisions and measurements: docs/cpu-backend.md. */
kiln_status kiln_backend_open_cpu(int n_threads, kiln_backend **out, kiln_err *err);
/* CUDA backend on GPU `device`; KILN_E_DEVICE when kiln was built without CUDA or no GPU is present. */
kiln_status kiln_backend_open_cuda(int device, kiln_backend **out, kiln_err *err);
/* A CUDA backend's GPU as major * 10 + minor (90: H100/H200); 0 for any other backend. What a device can take
 * depends on it (e4m3 GEMMs from 89, the shared memory per block): tests and reports say which path ran. */
int kiln_backend_cuda_cc(const kiln_backend *be);
void kiln_backend_close(kiln_backend *be);

/* Convenience wrappers: kiln_matmul(be, ...) == be->ops->matmul(be, ...). */
#define kiln_matmul(be, y, x, w, bias, err) (be)->ops->matmul((be), (y), (x), (w), (bias), NULL, (err))
#define kiln_matmul_epi(be, y, x, w, bias, epi, err) (be)->ops->matmul((be), (y), (x), (w), (bias), (epi), (err))

/* What kiln_backend_alloc_elems asks the backend for: n elements of dt and 64 bytes of slack (the memory plan's
 * unit: models' workspace functions sum it over the buffers they allocate). */
static inline size_t kiln_backend_elems_bytes(size_t n, kiln_dtype dt) { return n * kiln_dtype_size(dt) + 64; }
/* n elements of dtype dt (an activation buffer in kiln_backend_act_dtype; plus 64 bytes of slack for vector
 * tails) of backend memory, NOT initialised: for workspaces whose every element is written before it is read. On
 * failure NULL and *ok = false, so a run of allocations is checked once at its end. Free with be->ops->free. */
static inline void *kiln_backend_alloc_elems(kiln_backend *be, size_t n, kiln_dtype dt, bool *ok) {
    void *p = be->ops->alloc(be, kiln_backend_elems_bytes(n, dt));
    if (!p) *ok = false;
    return p;
}
/* n floats, as kiln_backend_alloc_elems. */
static inline float *kiln_backend_alloc_floats(kiln_backend *be, size_t n, bool *ok) {
    return (float *)kiln_backend_alloc_elems(be, n, KILN_DT_F32, ok); /* the cast: CUDA sources include this as C++ */
}

#endif

/* cuda_elementwise.cu - row-wise elementwise kernels over strided 2-D views: dtype conversion, the matmul
 * epilogue, SwiGLU / SiLU*mul / GELU*mul, activations, add, gated residual, scale-shift, and the 4-D strided copy.
 *
 * One thread per element over a flat index (grid-stride); the row/column split costs a 64-bit division, which
 * is noise next to the memory traffic of these memory-bound kernels. First correct, then fast (the fused
 * variants the DiT needs most are listed in docs/cuda-backend.md). */
#include "compute/cuda/cuda_kernels.cuh"

#define THREADS 256
#define GRID(n) dim3(kcu_blocks((n), THREADS) > 65536u ? 65536u : kcu_blocks((n), THREADS))
#define FOR_EACH(i, n) for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

static __device__ __forceinline__ float silu_f(float a) { return a / (1.f + expf(-a)); }
static __device__ __forceinline__ float gelu_f(float v) {
    return 0.5f * v * (1.f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
}
/* KCU_ACT_SILU or KCU_ACT_GELU: uniform across a launch, so the branch costs nothing */
static __device__ __forceinline__ float act_f(float v, int act) { return act == KCU_ACT_SILU ? silu_f(v) : gelu_f(v); }

static __global__ void k_convert(kcu_mat d, kcu_mat s) {
    FOR_EACH(i, d.rows * d.cols) {
        int64_t r = i / d.cols, c = i - r * d.cols;
        kcu_st(d.data, r * d.ld + c, d.dt, kcu_ld(s.data, r * s.ld + c, s.dt));
    }
}

kiln_status kcu_convert(kiln_cuda_backend *cb, const kcu_mat *dst, const kcu_mat *src, kiln_err *err) {
    int64_t n = dst->rows * dst->cols;
    if (n == 0) return KILN_OK;
    KCU_LAUNCH(k_convert, GRID(n), THREADS, 0, KCU_STREAM(cb))(*dst, *src);
    KCU_LAUNCHED(err, "convert");
    return KILN_OK;
}

static __global__ void k_epilogue(kcu_mat y, kcu_mat p, kcu_mat bias, kcu_mat gate, int kind) {
    FOR_EACH(i, y.rows * y.cols) {
        int64_t r = i / y.cols, c = i - r * y.cols;
        float v = kcu_ld(p.data, r * p.ld + c, p.dt);
        if (bias.data) v += kcu_ld(bias.data, c, bias.dt);
        const int64_t yi = r * y.ld + c; /* y f32 or bf16: the sum in f32, rounded once */
        if (kind == KILN_EPI_GATED_RESIDUAL) v = kcu_ld(y.data, yi, y.dt) + kcu_ld(gate.data, c, gate.dt) * v;
        else if (kind == KILN_EPI_ADD) v = kcu_ld(y.data, yi, y.dt) + v;
        kcu_st(y.data, yi, y.dt, v);
    }
}

kiln_status kcu_epilogue(kiln_cuda_backend *cb, const kcu_mat *y, const kcu_mat *p, const kcu_mat *bias,
                         const kcu_mat *gate, int kind, kiln_err *err) {
    int64_t n = y->rows * y->cols;
    if (n == 0) return KILN_OK;
    kcu_mat none = {NULL, 0, 0, 0, KILN_DT_F32};
    KCU_LAUNCH(k_epilogue, GRID(n), THREADS, 0, KCU_STREAM(cb))(*y, *p, bias ? *bias : none, gate ? *gate : none, kind);
    KCU_LAUNCHED(err, "matmul epilogue");
    return KILN_OK;
}

static __global__ void k_swiglu(kcu_mat y, kcu_mat ab) {
    FOR_EACH(i, y.rows * y.cols) {
        int64_t r = i / y.cols, c = i - r * y.cols;
        float a = kcu_ld(ab.data, r * ab.ld + c, ab.dt), b = kcu_ld(ab.data, r * ab.ld + y.cols + c, ab.dt);
        kcu_st(y.data, r * y.ld + c, y.dt, silu_f(a) * b);
    }
}

kiln_status kcu_swiglu(kiln_cuda_backend *cb, const kcu_mat *y, const kcu_mat *ab, kiln_err *err) {
    int64_t n = y->rows * y->cols;
    if (n == 0) return KILN_OK;
    KCU_LAUNCH(k_swiglu, GRID(n), THREADS, 0, KCU_STREAM(cb))(*y, *ab);
    KCU_LAUNCHED(err, "swiglu");
    return KILN_OK;
}

static __global__ void k_act_mul(kcu_mat y, kcu_mat a, kcu_mat b, int act) {
    FOR_EACH(i, y.rows * y.cols) {
        int64_t r = i / y.cols, c = i - r * y.cols;
        float av = kcu_ld(a.data, r * a.ld + c, a.dt), bv = kcu_ld(b.data, r * b.ld + c, b.dt);
        kcu_st(y.data, r * y.ld + c, y.dt, act_f(av, act) * bv);
    }
}

kiln_status kcu_act_mul(kiln_cuda_backend *cb, const kcu_mat *y, const kcu_mat *a, const kcu_mat *b, int act,
                        kiln_err *err) {
    int64_t n = y->rows * y->cols;
    if (n == 0) return KILN_OK;
    KCU_LAUNCH(k_act_mul, GRID(n), THREADS, 0, KCU_STREAM(cb))(*y, *a, *b, act);
    KCU_LAUNCHED(err, act == KCU_ACT_SILU ? "silu_mul" : "gelu_mul");
    return KILN_OK;
}

static __global__ void k_activation(kcu_mat y, kcu_mat x, int act) {
    FOR_EACH(i, y.rows * y.cols) {
        int64_t r = i / y.cols, c = i - r * y.cols;
        kcu_st(y.data, r * y.ld + c, y.dt, act_f(kcu_ld(x.data, r * x.ld + c, x.dt), act));
    }
}

kiln_status kcu_activation(kiln_cuda_backend *cb, const kcu_mat *y, const kcu_mat *x, int act, kiln_err *err) {
    int64_t n = y->rows * y->cols;
    if (n == 0) return KILN_OK;
    KCU_LAUNCH(k_activation, GRID(n), THREADS, 0, KCU_STREAM(cb))(*y, *x, act);
    KCU_LAUNCHED(err, act == KCU_ACT_SILU ? "silu" : "gelu_tanh");
    return KILN_OK;
}

static __global__ void k_add(kcu_mat y, kcu_mat a, kcu_mat b) {
    FOR_EACH(i, y.rows * y.cols) {
        int64_t r = i / y.cols, c = i - r * y.cols;
        kcu_st(y.data, r * y.ld + c, y.dt, kcu_ld(a.data, r * a.ld + c, a.dt) + kcu_ld(b.data, r * b.ld + c, b.dt));
    }
}

kiln_status kcu_add(kiln_cuda_backend *cb, const kcu_mat *y, const kcu_mat *a, const kcu_mat *b, kiln_err *err) {
    int64_t n = y->rows * y->cols;
    if (n == 0) return KILN_OK;
    KCU_LAUNCH(k_add, GRID(n), THREADS, 0, KCU_STREAM(cb))(*y, *a, *b);
    KCU_LAUNCHED(err, "add");
    return KILN_OK;
}

static __global__ void k_gated_add(kcu_mat x, kcu_mat gate, kcu_mat y) {
    FOR_EACH(i, x.rows * x.cols) {
        int64_t r = i / x.cols, c = i - r * x.cols;
        float v = kcu_ld(x.data, r * x.ld + c, x.dt) + kcu_ld(gate.data, c, gate.dt) * kcu_ld(y.data, r * y.ld + c, y.dt);
        kcu_st(x.data, r * x.ld + c, x.dt, v);
    }
}

kiln_status kcu_gated_add(kiln_cuda_backend *cb, const kcu_mat *x, const kcu_mat *gate, const kcu_mat *y,
                          kiln_err *err) {
    int64_t n = x->rows * x->cols;
    if (n == 0) return KILN_OK;
    KCU_LAUNCH(k_gated_add, GRID(n), THREADS, 0, KCU_STREAM(cb))(*x, *gate, *y);
    KCU_LAUNCHED(err, "gated_add");
    return KILN_OK;
}

static __global__ void k_scale_shift(kcu_mat y, kcu_mat x, float a, float b) {
    FOR_EACH(i, y.rows * y.cols) {
        int64_t r = i / y.cols, c = i - r * y.cols;
        kcu_st(y.data, r * y.ld + c, y.dt, a * kcu_ld(x.data, r * x.ld + c, x.dt) + b);
    }
}

kiln_status kcu_scale_shift(kiln_cuda_backend *cb, const kcu_mat *y, const kcu_mat *x, float a, float b,
                            kiln_err *err) {
    int64_t n = y->rows * y->cols;
    if (n == 0) return KILN_OK;
    KCU_LAUNCH(k_scale_shift, GRID(n), THREADS, 0, KCU_STREAM(cb))(*y, *x, a, b);
    KCU_LAUNCHED(err, "scale_shift");
    return KILN_OK;
}

/* 4-D strided copy. Float dtypes convert through f32; equal dtypes (any, e.g. i32 or u8) copy raw bytes. */
static __global__ void k_copy4(kcu_view4 y, kcu_view4 x, int raw_size) {
    int64_t n = y.shape[0] * y.shape[1] * y.shape[2] * y.shape[3];
    FOR_EACH(i, n) {
        int64_t t = i, c[4];
        for (int d = 3; d >= 0; d--) {
            c[d] = t % y.shape[d];
            t /= y.shape[d];
        }
        int64_t yo = 0, xo = 0;
        for (int d = 0; d < 4; d++) {
            yo += c[d] * y.stride[d];
            xo += c[d] * x.stride[d];
        }
        if (raw_size == 8) ((uint64_t *)y.data)[yo] = ((const uint64_t *)x.data)[xo];
        else if (raw_size == 4) ((uint32_t *)y.data)[yo] = ((const uint32_t *)x.data)[xo];
        else if (raw_size == 2) ((uint16_t *)y.data)[yo] = ((const uint16_t *)x.data)[xo];
        else if (raw_size == 1) ((uint8_t *)y.data)[yo] = ((const uint8_t *)x.data)[xo];
        else kcu_st(y.data, yo, y.dt, kcu_ld(x.data, xo, x.dt));
    }
}

kiln_status kcu_copy4(kiln_cuda_backend *cb, const kcu_view4 *y, const kcu_view4 *x, kiln_err *err) {
    int64_t n = y->shape[0] * y->shape[1] * y->shape[2] * y->shape[3];
    if (n == 0) return KILN_OK;
    int raw = y->dt == x->dt ? (int)kiln_dtype_size(y->dt) : 0;
    KCU_LAUNCH(k_copy4, GRID(n), THREADS, 0, KCU_STREAM(cb))(*y, *x, raw);
    KCU_LAUNCHED(err, "copy");
    return KILN_OK;
}

/* dst[c][r] = src[r][c] for 2-byte elements, through 32 x 32 tiles in shared memory (a column of the tile padded
 * by one: no bank conflicts), so both the reads and the writes of a warp are one contiguous row segment. Block:
 * 32 x 8 threads, each moving 4 elements of its tile. */
static __global__ void k_transpose16(kcu_mat dst, kcu_mat src) {
    __shared__ uint16_t tile[32][33];
    const int64_t r0 = (int64_t)blockIdx.y * 32, c0 = (int64_t)blockIdx.x * 32;
    const uint16_t *s = (const uint16_t *)src.data;
    uint16_t *d = (uint16_t *)dst.data;
    for (int i = threadIdx.y; i < 32; i += 8) {
        const int64_t r = r0 + i, c = c0 + threadIdx.x;
        if (r < src.rows && c < src.cols) tile[i][threadIdx.x] = s[r * src.ld + c];
    }
    __syncthreads();
    for (int i = threadIdx.y; i < 32; i += 8) {
        const int64_t c = c0 + i, r = r0 + threadIdx.x; /* dst row c, column r */
        if (c < src.cols && r < src.rows) d[c * dst.ld + r] = tile[threadIdx.x][i];
    }
}

kiln_status kcu_transpose16(kiln_cuda_backend *cb, const kcu_mat *dst, const kcu_mat *src, kiln_err *err) {
    if (src->rows == 0 || src->cols == 0) return KILN_OK;
    if (kiln_dtype_size(src->dt) != 2 || dst->dt != src->dt || dst->rows != src->cols || dst->cols != src->rows)
        return KILN_FAIL(err, KILN_E_INTERNAL, "transpose: dst must be src's 2-byte type, [%lld, %lld]",
                         (long long)src->cols, (long long)src->rows);
    const int64_t by = (src->rows + 31) / 32, bx = (src->cols + 31) / 32;
    if (by > 65535 || bx > 0x7fffffff)
        return KILN_FAIL(err, KILN_E_LIMIT, "transpose: %lld x %lld is too large a grid", (long long)src->rows,
                         (long long)src->cols);
    KCU_LAUNCH(k_transpose16, dim3((unsigned)bx, (unsigned)by), dim3(32, 8), 0, KCU_STREAM(cb))(*dst, *src);
    KCU_LAUNCHED(err, "transpose");
    return KILN_OK;
}

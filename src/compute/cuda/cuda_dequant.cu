/* cuda_dequant.cu - quantised weights widened on the device, for the matmul (cuda_ops.c): GGUF blocks (Q8_0,
 * Q4_0, Q5_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K), fp8 (e4m3, e5m2, times the per-tensor scale) and f16, into a bf16
 * (FAST) or f32 (EXACT) [rows, cols] operand in scratch.
 *
 * The values are those of the CPU's tensor/quant.h kiln_dequant, bit for bit (itself bit-exact with the gguf
 * package): f32 arithmetic in the same order, the per-sub-block factors first (d * scale, dmin * min), then
 * factor * q, then the subtraction. A factor (an f16 d times a 6-bit scale) times a 5-bit q has at most 22
 * significant bits, so those products are exact and a compiler that fused one into the subtraction would change
 * nothing; __fmul_rn / __fsub_rn only keep the order as written. FAST then rounds the f32 value to bf16. The
 * block layouts are in tensor/quant.h; quant_ref.c is the scalar reference these kernels follow value by value.
 *
 * One thread per output value: each decodes its value from the bytes of its block (a handful of byte loads,
 * mostly from the L1/L2 cache its neighbours filled). The matmul after it reads the operand once per tile, so
 * this pass costs what one bf16 copy of the weight costs.
 *
 * With KILN_CUDA_FP8=1 on sm_89+ an e4m3 weight is not widened at all: the activation is quantised to e4m3 per
 * tensor instead (kcu_quantize_fp8, below) and the GEMM multiplies e4m3 by e4m3 with both scales. */
#include <cuda_fp8.h>

#include "compute/cuda/cuda_kernels.cuh"
extern "C" {
#include "tensor/quant.h"
}

#define THREADS 256
#define GRID(n) dim3(kcu_blocks((n), THREADS) > 65536u ? 65536u : kcu_blocks((n), THREADS))
#define FOR_EACH(i, n) for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

static __device__ __forceinline__ float half_at(const uint8_t *p) {
    return __half2float(__ushort_as_half((unsigned short)(p[0] | p[1] << 8)));
}

/* factor * q - m, rounded after the product and after the difference, as quant_ref.c computes it */
static __device__ __forceinline__ float mul_sub(float f, float q, float m) { return __fsub_rn(__fmul_rn(f, q), m); }

/* Q4_K / Q5_K: the 6-bit scale and min of sub-block j from the 12 packed bytes s (quant_internal.h) */
static __device__ __forceinline__ void scale_min_k4(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* Value e of the block at b, of GGML type id. */
static __device__ float block_value(const uint8_t *b, uint32_t id, int e) {
    switch (id) {
    case KILN_QT_Q8_0:
        return __fmul_rn((float)(int8_t)b[2 + e], half_at(b));
    case KILN_QT_Q4_0: {
        int q = e < 16 ? b[2 + e] & 0xF : b[2 + e - 16] >> 4;
        return __fmul_rn((float)(q - 8), half_at(b));
    }
    case KILN_QT_Q5_0: {
        uint32_t qh = (uint32_t)b[2] | (uint32_t)b[3] << 8 | (uint32_t)b[4] << 16 | (uint32_t)b[5] << 24;
        int j = e & 15;
        int lo = e < 16 ? b[6 + j] & 0xF : b[6 + j] >> 4;
        int q = lo | (int)((qh >> e) & 1) << 4;
        return __fmul_rn((float)(q - 16), half_at(b));
    }
    case KILN_QT_Q2_K: {
        int g = e / 128, s = (e / 32) % 4, l = e % 32;
        int q = (b[16 + 32 * g + l] >> (2 * s)) & 3, sm = b[e / 16];
        float dl = __fmul_rn(half_at(b + 80), (float)(sm & 0xF)), ml = __fmul_rn(half_at(b + 82), (float)(sm >> 4));
        return mul_sub(dl, (float)q, ml);
    }
    case KILN_QT_Q3_K: {
        int g = e / 128, s = (e / 32) % 4, l = e % 32, k = e / 16;
        int lo = (b[32 + 32 * g + l] >> (2 * s)) & 3, h = (b[l] >> (e / 32)) & 1;
        const uint8_t *sc = b + 96;
        int slo = k < 8 ? sc[k] & 0xF : sc[k - 8] >> 4, shi = (sc[8 + k % 4] >> (2 * (k / 4))) & 3;
        float dl = __fmul_rn(half_at(b + 108), (float)((slo | shi << 4) - 32));
        return __fmul_rn(dl, (float)(lo - ((h ^ 1) << 2)));
    }
    case KILN_QT_Q4_K:
    case KILN_QT_Q5_K: {
        int j = e / 32, l = e % 32, sc, m;
        scale_min_k4(b + 4, j, &sc, &m);
        const uint8_t *qs = b + (id == KILN_QT_Q4_K ? 16 : 48);
        int q = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF;
        if (id == KILN_QT_Q5_K) q |= ((b[16 + l] >> j) & 1) << 4;
        float dl = __fmul_rn(half_at(b), (float)sc), ml = __fmul_rn(half_at(b + 2), (float)m);
        return mul_sub(dl, (float)q, ml);
    }
    case KILN_QT_Q6_K: {
        int g = e / 128, r = e % 128;
        int lo = (b[64 * g + r % 64] >> (4 * (r / 64))) & 0xF;
        int hi = (b[128 + 32 * g + r % 32] >> (2 * (r / 32))) & 3;
        float dl = __fmul_rn(half_at(b + 208), (float)(int8_t)b[192 + e / 16]);
        return __fmul_rn(dl, (float)((lo | hi << 4) - 32));
    }
    default:
        return __int_as_float(0x7fc00000); /* refused on the host (kcu_as_qmat): NaN if it ever gets here */
    }
}

/* fp8 -> f32, exactly (tensor/convert.c's kiln_e4m3_to_f32 / kiln_e5m2_to_f32) */
static __device__ __forceinline__ float e4m3_value(uint8_t v) {
    uint32_t s = (uint32_t)(v & 0x80) << 24, em = v & 0x7f;
    if (em == 0x7f) return __uint_as_float(s | 0x7fc00000u);
    if (em < 8) return __uint_as_float(s | __float_as_uint(__fmul_rn((float)em, 0x1p-9f)));
    return __uint_as_float(s | ((em + (120u << 3)) << 20));
}
static __device__ __forceinline__ float e5m2_value(uint8_t v) {
    return __half2float(__ushort_as_half((unsigned short)(v << 8)));
}

static __global__ void k_dequant_blocks(kcu_mat d, kcu_qmat w, int block, int bytes) {
    FOR_EACH(i, d.rows * d.cols) {
        int64_t r = i / d.cols, c = i - r * d.cols;
        const uint8_t *b = (const uint8_t *)w.data + r * w.row_bytes + (c / block) * bytes;
        kcu_st(d.data, r * d.ld + c, d.dt, block_value(b, w.qtype, (int)(c % block)));
    }
}

static __global__ void k_dequant_bytes(kcu_mat d, kcu_qmat w) {
    FOR_EACH(i, d.rows * d.cols) {
        int64_t r = i / d.cols, c = i - r * d.cols;
        const uint8_t *row = (const uint8_t *)w.data + r * w.row_bytes;
        float v;
        if (w.dt == KILN_DT_F16) v = __half2float(__ushort_as_half((unsigned short)(row[2 * c] | row[2 * c + 1] << 8)));
        else v = w.dt == KILN_DT_F8_E4M3 ? e4m3_value(row[c]) : e5m2_value(row[c]);
        if (w.scale != 1.0f) v = __fmul_rn(v, w.scale); /* as the CPU: the value, then times the scale, in f32 */
        kcu_st(d.data, r * d.ld + c, d.dt, v);
    }
}

kiln_status kcu_dequant(kiln_cuda_backend *cb, const kcu_mat *dst, const kcu_qmat *w, kiln_err *err) {
    int64_t n = dst->rows * dst->cols;
    if (n == 0) return KILN_OK;
    if (dst->rows != w->rows || dst->cols != w->cols || (dst->dt != KILN_DT_BF16 && dst->dt != KILN_DT_F32))
        return KILN_FAIL(err, KILN_E_INVALID, "dequant: a [%lld, %lld] %s operand for a [%lld, %lld] weight",
                         (long long)dst->rows, (long long)dst->cols, kiln_dtype_name(dst->dt), (long long)w->rows,
                         (long long)w->cols);
    if (w->dt == KILN_DT_QBLOCK) {
        const kiln_qtype_info *qi = kiln_qtype_get(w->qtype);
        if (!qi) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "dequant: GGML type %u", (unsigned)w->qtype);
        KCU_LAUNCH(k_dequant_blocks, GRID(n), THREADS, 0, KCU_STREAM(cb))(*dst, *w, (int)qi->block, (int)qi->bytes);
    } else {
        KCU_LAUNCH(k_dequant_bytes, GRID(n), THREADS, 0, KCU_STREAM(cb))(*dst, *w);
    }
    KCU_LAUNCHED(err, "dequant");
    return KILN_OK;
}

/* ---- per-tensor fp8 quantisation of an activation, for the e4m3 x e4m3 GEMM (KILN_CUDA_FP8) ----
 * Three launches with no atomics (the result is the same on every run): the blocks' maxima of |x|, the maximum
 * of those and the scale, then the quantised copy. */

#define AMAX_BLOCKS 1024

static __global__ void k_absmax_partial(kcu_mat x, float *partial) {
    __shared__ float red[32];
    float m = 0.f;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < x.rows * x.cols;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i / x.cols, c = i - r * x.cols;
        m = fmaxf(m, fabsf(kcu_ld(x.data, r * x.ld + c, x.dt)));
    }
    m = kcu_block_max(m, red);
    if (threadIdx.x == 0) partial[blockIdx.x] = m;
}

static __global__ void k_fp8_scales(const float *partial, int n, float w_scale, float beta, float *scales) {
    __shared__ float red[32];
    float m = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, partial[i]);
    m = kcu_block_max(m, red);
    if (threadIdx.x == 0) {
        /* e4m3's largest finite value is 448: the largest |x| maps onto it */
        const float s = m > 0.f && m < INFINITY ? __fdiv_rn(m, 448.f) : 1.f;
        scales[KCU_FP8_W] = w_scale;
        scales[KCU_FP8_X] = s;
        /* the GEMM's alpha and beta (device pointers): D = w_scale * s * (A . B) + beta * C */
        scales[KCU_FP8_ALPHA] = __fmul_rn(w_scale, s);
        scales[KCU_FP8_BETA] = beta;
    }
}

static __global__ void k_quantize_e4m3(kcu_mat d, kcu_mat x, const float *scales) {
    const float s = scales[KCU_FP8_X];
    FOR_EACH(i, d.rows * d.cols) {
        int64_t r = i / d.cols, c = i - r * d.cols;
        float v = __fdiv_rn(kcu_ld(x.data, r * x.ld + c, x.dt), s);
        ((__nv_fp8_storage_t *)d.data)[r * d.ld + c] = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
    }
}

kiln_status kcu_quantize_fp8(kiln_cuda_backend *cb, const kcu_mat *dst, const kcu_mat *x, float w_scale, float beta,
                             float *scales, float *tmp, kiln_err *err) {
    int64_t n = x->rows * x->cols;
    if (dst->rows != x->rows || dst->cols != x->cols || dst->dt != KILN_DT_F8_E4M3)
        return KILN_FAIL(err, KILN_E_INVALID, "quantize fp8: a [%lld, %lld] %s operand for a [%lld, %lld] activation",
                         (long long)dst->rows, (long long)dst->cols, kiln_dtype_name(dst->dt), (long long)x->rows,
                         (long long)x->cols);
    unsigned blocks = kcu_blocks(n, THREADS) > AMAX_BLOCKS ? AMAX_BLOCKS : kcu_blocks(n, THREADS);
    KCU_LAUNCH(k_absmax_partial, dim3(blocks), THREADS, 0, KCU_STREAM(cb))(*x, tmp);
    KCU_LAUNCH(k_fp8_scales, dim3(1), THREADS, 0, KCU_STREAM(cb))(tmp, (int)blocks, w_scale, beta, scales);
    if (n > 0) KCU_LAUNCH(k_quantize_e4m3, GRID(n), THREADS, 0, KCU_STREAM(cb))(*dst, *x, scales);
    KCU_LAUNCHED(err, "quantize fp8");
    return KILN_OK;
}

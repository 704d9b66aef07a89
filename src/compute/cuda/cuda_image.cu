/* cuda_image.cu - the VAE's image kernels over NCHW f32 or bf16 (computed in f32): im2col for
 * convolution-as-GEMM, per-channel bias, GroupNorm (+ SiLU fused into its last pass), nearest 2x upsample. */
#include "compute/cuda/cuda_kernels.cuh"

#define THREADS 256
#define FOR_EACH(i, n) for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

static unsigned grid_for(int64_t n) {
    unsigned b = kcu_blocks(n, THREADS);
    return b > 65536u ? 65536u : b;
}

/* Per-plane kernels (bias, GroupNorm's apply, upsample): blockIdx.y walks the N x C planes, blockIdx.x and the
 * threads one plane's pixels, so what depends on the channel is computed once per thread, not divided out of a
 * flat index per element (64-bit divisions, tens of instructions each). */
#define FOR_EACH_PLANE(p, planes) for (int64_t p = blockIdx.y; p < (planes); p += gridDim.y)
#define FOR_EACH_IN_PLANE(i, n) for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)
static dim3 plane_grid(int64_t planes, int64_t per_plane) {
    unsigned x = kcu_blocks(per_plane, THREADS), y = planes > 65535 ? 65535u : (unsigned)planes;
    if (x > 1024u) x = 1024u;
    return dim3(x, y < 1 ? 1 : y);
}

/* col[pp, kidx] = x[n, ci, oy*stride - pad + i, ox*stride - pad + j] (0 outside), kidx = (ci*kh + i)*kw + j,
 * for output pixels p = p0 + pp. One thread per (pp, ci) writes that channel's kh*kw taps: consecutive threads
 * take consecutive channels of one pixel, so a warp writes one contiguous run of col's row, and the pixel's
 * neighbour reads the same lines of x from the cache. The divisions are 32-bit, once per kh*kw values (64-bit
 * ones per element made this kernel most of a 1024x1024 decode); the host checks the sizes fit. */
static __global__ void k_im2col(kcu_mat col, const void *x, int xdt, int ci_n, int h, int w, int kh, int kw,
                                int stride, int pad, int wo, int p0) {
    const int kk = kh * kw;
    FOR_EACH(t, col.rows * (int64_t)ci_n) {
        const unsigned tt = (unsigned)t, pp = tt / (unsigned)ci_n, ci = tt - pp * (unsigned)ci_n;
        const unsigned p = (unsigned)p0 + pp, oy = p / (unsigned)wo, ox = p - oy * (unsigned)wo;
        const int64_t plane = (int64_t)ci * h * w, out = (int64_t)pp * col.ld + (int64_t)ci * kk;
        for (int i = 0; i < kh; i++) {
            const int iy = (int)oy * stride - pad + i;
            for (int j = 0; j < kw; j++) {
                const int ix = (int)ox * stride - pad + j;
                float v = 0.f;
                if (iy >= 0 && iy < h && ix >= 0 && ix < w) v = kcu_ld(x, plane + (int64_t)iy * w + ix, xdt);
                kcu_st(col.data, out + i * kw + j, col.dt, v);
            }
        }
    }
}

kiln_status kcu_im2col(kiln_cuda_backend *cb, const kcu_mat *col, const void *x, kiln_dtype xdt, const int64_t xdims[4],
                       int64_t n, int kh, int kw, int stride, int pad_begin, int64_t ho, int64_t wo, int64_t p0,
                       int64_t np, kiln_err *err) {
    int64_t total = col->rows * col->cols;
    if (total == 0) return KILN_OK;
    /* the kernel's 32-bit index arithmetic: pixels, channel-pixel pairs and one plane's size */
    if (col->rows * xdims[1] > 0x7fffffff || ho * wo > 0x7fffffff || xdims[2] * xdims[3] > 0x7fffffff ||
        p0 + np > 0x7fffffff)
        return KILN_FAIL(err, KILN_E_LIMIT, "conv2d: %lld x %lld x %lld pixels is too large for im2col's 32-bit indices",
                         (long long)xdims[1], (long long)ho, (long long)wo);
    const char *xn = (const char *)x + (size_t)(n * xdims[1] * xdims[2] * xdims[3]) * kiln_dtype_size(xdt);
    KCU_LAUNCH(k_im2col, grid_for(col->rows * xdims[1]), THREADS, 0, KCU_STREAM(cb))(*col, (const void *)xn, (int)xdt, (int)xdims[1],
                                                             (int)xdims[2], (int)xdims[3], kh, kw, stride, pad_begin,
                                                             (int)wo, (int)p0);
    KCU_LAUNCHED(err, "conv2d im2col");
    return KILN_OK;
}

static __global__ void k_bias_nchw(void *y, int ydt, kcu_mat bias, int64_t c, int64_t hw, int64_t planes) {
    FOR_EACH_PLANE(p, planes) {
        const float b = kcu_ld(bias.data, p % c, bias.dt);
        const int64_t base = p * hw;
        FOR_EACH_IN_PLANE(i, hw) kcu_st(y, base + i, ydt, kcu_ld(y, base + i, ydt) + b);
    }
}

kiln_status kcu_bias_nchw(kiln_cuda_backend *cb, void *y, kiln_dtype ydt, const kcu_mat *bias, int64_t n, int64_t c,
                          int64_t hw, kiln_err *err) {
    int64_t total = n * c * hw;
    if (total == 0) return KILN_OK;
    KCU_LAUNCH(k_bias_nchw, plane_grid(n * c, hw), THREADS, 0, KCU_STREAM(cb))(y, (int)ydt, *bias, c, hw, n * c);
    KCU_LAUNCHED(err, "conv2d bias");
    return KILN_OK;
}

/* GroupNorm in three launches, so that a 1024x1024 VAE layer (N x 32 groups of 4 M values each) still fills
 * the GPU: (1) each block takes a chunk of one group and writes its count, mean and M2 (sum of squared
 * deviations, computed in two passes over the chunk: no cancellation); (2) one thread per group merges its
 * chunks in order with Chan's formula (fixed order: deterministic) into mean and 1/std; (3) an elementwise pass
 * normalises, applies gamma/beta and optionally SiLU. */
typedef struct gn_part {
    float n, mean, m2;
} gn_part;

static __global__ void k_gn_partial(const void *x, int xdt, int64_t len, int64_t chunk, int chunks, gn_part *part) {
    __shared__ float red[32];
    int64_t ng = blockIdx.y, c0 = (int64_t)blockIdx.x * chunk, c1 = c0 + chunk < len ? c0 + chunk : len;
    const int64_t g0 = ng * len;
    float s = 0.f;
    for (int64_t i = c0 + threadIdx.x; i < c1; i += blockDim.x) s += kcu_ld(x, g0 + i, xdt);
    float n = (float)(c1 - c0), mean = kcu_block_sum(s, red) / n;
    float v = 0.f;
    for (int64_t i = c0 + threadIdx.x; i < c1; i += blockDim.x) {
        float d = kcu_ld(x, g0 + i, xdt) - mean;
        v += d * d;
    }
    float m2 = kcu_block_sum(v, red);
    if (threadIdx.x == 0) part[ng * chunks + blockIdx.x] = (gn_part){n, mean, m2};
}

static __global__ void k_gn_finalize(const gn_part *part, int chunks, int64_t groups_total, float eps, float2 *stats) {
    int64_t ng = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (ng >= groups_total) return;
    const gn_part *p = part + ng * chunks;
    double n = p[0].n, mean = p[0].mean, m2 = p[0].m2;
    for (int c = 1; c < chunks; c++) {
        double nb = p[c].n, d = (double)p[c].mean - mean, nab = n + nb;
        mean += d * nb / nab;
        m2 += p[c].m2 + d * d * n * nb / nab;
        n = nab;
    }
    stats[ng] = make_float2((float)mean, rsqrtf((float)(m2 / n) + eps));
}

static __global__ void k_gn_apply(void *y, int ydt, const void *x, int xdt, int64_t c, int64_t hw, int groups,
                                  kcu_mat gamma, kcu_mat beta, const float2 *stats, int silu, int64_t planes) {
    const int64_t cpg = c / groups;
    FOR_EACH_PLANE(p, planes) {
        const int64_t ch = p % c, ng = (p / c) * groups + ch / cpg, base = p * hw;
        const float2 st = stats[ng];
        const float ga = kcu_ld(gamma.data, ch, gamma.dt), be = kcu_ld(beta.data, ch, beta.dt);
        FOR_EACH_IN_PLANE(i, hw) {
            float o = (kcu_ld(x, base + i, xdt) - st.x) * st.y * ga + be;
            if (silu) o = o / (1.f + expf(-o));
            kcu_st(y, base + i, ydt, o);
        }
    }
}

#define GN_CHUNK 16384

size_t kcu_group_norm_scratch(const int64_t dims[4], int groups) {
    int64_t len = dims[1] / groups * dims[2] * dims[3], chunks = (len + GN_CHUNK - 1) / GN_CHUNK;
    if (chunks < 1) chunks = 1;
    return (size_t)(dims[0] * groups) * ((size_t)chunks * sizeof(gn_part) + sizeof(float2)) + 256;
}

kiln_status kcu_group_norm(kiln_cuda_backend *cb, void *y, kiln_dtype ydt, const void *x, kiln_dtype xdt,
                           const int64_t dims[4], int groups, const kcu_mat *gamma, const kcu_mat *beta, float eps,
                           bool silu, void *tmp, kiln_err *err) {
    int64_t ngroups = dims[0] * groups, hw = dims[2] * dims[3], len = dims[1] / groups * hw;
    if (ngroups == 0 || len == 0) return KILN_OK;
    int64_t chunks = (len + GN_CHUNK - 1) / GN_CHUNK;
    if (ngroups > 65535 || chunks > 0x7fffffff) return KILN_FAIL(err, KILN_E_LIMIT, "group_norm: too many groups");
    float2 *stats = (float2 *)tmp; /* 8-byte aligned at the start of the scratch */
    gn_part *part = (gn_part *)(stats + ngroups);
    KCU_LAUNCH(k_gn_partial, dim3((unsigned)chunks, (unsigned)ngroups), 256, 0, KCU_STREAM(cb))(x, (int)xdt, len, GN_CHUNK,
                                                                                       (int)chunks, part);
    KCU_LAUNCHED(err, "group_norm statistics");
    KCU_LAUNCH(k_gn_finalize, kcu_blocks(ngroups, 128), 128, 0, KCU_STREAM(cb))(part, (int)chunks, ngroups, eps, stats);
    KCU_LAUNCHED(err, "group_norm statistics merge");
    const int64_t planes = dims[0] * dims[1];
    KCU_LAUNCH(k_gn_apply, plane_grid(planes, hw), THREADS, 0, KCU_STREAM(cb))(y, (int)ydt, x, (int)xdt, dims[1], hw,
                                                                      groups, *gamma, *beta, stats, silu ? 1 : 0,
                                                                      planes);
    KCU_LAUNCHED(err, "group_norm");
    return KILN_OK;
}

/* one thread per input pixel writes its 2 x 2 outputs (a 32-bit division per input pixel: w * h < 2^31) */
static __global__ void k_upsample2x(void *y, int ydt, const void *x, int xdt, int h, int w, int64_t planes) {
    const int64_t hw = (int64_t)h * w;
    FOR_EACH_PLANE(p, planes) {
        const int64_t xb = p * hw, yb = p * hw * 4;
        FOR_EACH_IN_PLANE(i, hw) {
            const unsigned iy = (unsigned)i / (unsigned)w, ix = (unsigned)i - iy * (unsigned)w;
            const float v = kcu_ld(x, xb + i, xdt);
            const int64_t o = yb + (int64_t)(2 * iy) * (2 * w) + 2 * ix;
            kcu_st(y, o, ydt, v), kcu_st(y, o + 1, ydt, v);
            kcu_st(y, o + 2 * w, ydt, v), kcu_st(y, o + 2 * w + 1, ydt, v);
        }
    }
}

kiln_status kcu_upsample2x(kiln_cuda_backend *cb, void *y, kiln_dtype ydt, const void *x, kiln_dtype xdt,
                           const int64_t xdims[4], kiln_err *err) {
    int64_t total = xdims[0] * xdims[1] * xdims[2] * xdims[3] * 4;
    if (total == 0) return KILN_OK;
    if (xdims[2] * xdims[3] > 0x7fffffff)
        return KILN_FAIL(err, KILN_E_LIMIT, "upsample2x: a %lld x %lld plane is too large", (long long)xdims[2],
                         (long long)xdims[3]);
    KCU_LAUNCH(k_upsample2x, plane_grid(xdims[0] * xdims[1], xdims[2] * xdims[3]), THREADS, 0, KCU_STREAM(cb))(
        y, (int)ydt, x, (int)xdt, (int)xdims[2], (int)xdims[3], xdims[0] * xdims[1]);
    KCU_LAUNCHED(err, "upsample2x");
    return KILN_OK;
}

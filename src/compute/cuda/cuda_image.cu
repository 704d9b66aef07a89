/* cuda_image.cu - the VAE's image kernels over NCHW f32: im2col for convolution-as-GEMM, per-channel bias,
 * GroupNorm (+ SiLU fused), nearest 2x upsample. */
#include "compute/cuda/cuda_kernels.cuh"

#define THREADS 256
#define FOR_EACH(i, n) for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

static unsigned grid_for(int64_t n) {
    unsigned b = kcu_blocks(n, THREADS);
    return b > 65536u ? 65536u : b;
}

/* col[pp, kidx] = x[n, ci, oy*stride - pad + i, ox*stride - pad + j] (0 outside), kidx = (ci*kh + i)*kw + j,
 * for output pixels p = p0 + pp. Consecutive threads walk kidx, so the writes are coalesced. */
static __global__ void k_im2col(kcu_mat col, const float *x, int64_t ci_n, int64_t h, int64_t w, int kh, int kw,
                                int stride, int pad, int64_t wo, int64_t p0) {
    int64_t kk = (int64_t)kh * kw;
    FOR_EACH(t, col.rows * col.cols) {
        int64_t pp = t / col.cols, kidx = t - pp * col.cols;
        int64_t p = p0 + pp, oy = p / wo, ox = p - oy * wo;
        int64_t ci = kidx / kk, r = kidx - ci * kk, i = r / kw, j = r - i * kw;
        int64_t iy = oy * stride - pad + i, ix = ox * stride - pad + j;
        float v = 0.f;
        if (iy >= 0 && iy < h && ix >= 0 && ix < w) v = x[(ci * h + iy) * w + ix];
        kcu_st(col.data, pp * col.ld + kidx, col.dt, v);
    }
}

kiln_status kcu_im2col(kiln_cuda_backend *cb, const kcu_mat *col, const float *x, const int64_t xdims[4], int64_t n,
                       int kh, int kw, int stride, int pad_begin, int64_t ho, int64_t wo, int64_t p0, int64_t np,
                       kiln_err *err) {
    int64_t total = col->rows * col->cols;
    if (total == 0) return KILN_OK;
    const float *xn = x + n * xdims[1] * xdims[2] * xdims[3];
    k_im2col<<<grid_for(total), THREADS, 0, KCU_STREAM(cb)>>>(*col, xn, xdims[1], xdims[2], xdims[3], kh, kw, stride,
                                                             pad_begin, wo, p0);
    KCU_LAUNCHED(err, "conv2d im2col");
    return KILN_OK;
}

static __global__ void k_bias_nchw(float *y, kcu_mat bias, int64_t c, int64_t hw, int64_t total) {
    FOR_EACH(i, total) y[i] += kcu_ld(bias.data, (i / hw) % c, bias.dt);
}

kiln_status kcu_bias_nchw(kiln_cuda_backend *cb, float *y, const kcu_mat *bias, int64_t n, int64_t c, int64_t hw,
                          kiln_err *err) {
    int64_t total = n * c * hw;
    if (total == 0) return KILN_OK;
    k_bias_nchw<<<grid_for(total), THREADS, 0, KCU_STREAM(cb)>>>(y, *bias, c, hw, total);
    KCU_LAUNCHED(err, "conv2d bias");
    return KILN_OK;
}

/* One block per (image, group): the group's channels are one contiguous run of cpg*HW floats. Two passes for
 * the statistics (mean, then squared deviations), a third writes. */
static __global__ void k_group_norm(float *y, const float *x, int64_t c, int64_t hw, int groups, kcu_mat gamma,
                                    kcu_mat beta, float eps, int silu) {
    __shared__ float red[32];
    int64_t ng = blockIdx.x, n = ng / groups, g = ng - n * groups, cpg = c / groups;
    int64_t base = (n * c + g * cpg) * hw, len = cpg * hw;
    float s = 0.f;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) s += x[base + i];
    float mean = kcu_block_sum(s, red) / (float)len;
    float v = 0.f;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
        float d = x[base + i] - mean;
        v += d * d;
    }
    float rstd = rsqrtf(kcu_block_sum(v, red) / (float)len + eps);
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
        int64_t ch = g * cpg + i / hw;
        float o = (x[base + i] - mean) * rstd * kcu_ld(gamma.data, ch, gamma.dt) + kcu_ld(beta.data, ch, beta.dt);
        if (silu) o = o / (1.f + expf(-o));
        y[base + i] = o;
    }
}

kiln_status kcu_group_norm(kiln_cuda_backend *cb, float *y, const float *x, const int64_t dims[4], int groups,
                           const kcu_mat *gamma, const kcu_mat *beta, float eps, bool silu, kiln_err *err) {
    int64_t blocks = dims[0] * groups;
    if (blocks == 0 || dims[2] * dims[3] == 0) return KILN_OK;
    if (blocks > 0x7fffffff) return KILN_FAIL(err, KILN_E_LIMIT, "group_norm: too many groups");
    k_group_norm<<<(unsigned)blocks, 1024, 0, KCU_STREAM(cb)>>>(y, x, dims[1], dims[2] * dims[3], groups, *gamma,
                                                                *beta, eps, silu ? 1 : 0);
    KCU_LAUNCHED(err, "group_norm");
    return KILN_OK;
}

static __global__ void k_upsample2x(float *y, const float *x, int64_t h, int64_t w, int64_t total) {
    int64_t w2 = 2 * w, h2 = 2 * h;
    FOR_EACH(i, total) {
        int64_t ox = i % w2, t = i / w2, oy = t % h2, nc = t / h2;
        y[i] = x[(nc * h + oy / 2) * w + ox / 2];
    }
}

kiln_status kcu_upsample2x(kiln_cuda_backend *cb, float *y, const float *x, const int64_t xdims[4], kiln_err *err) {
    int64_t total = xdims[0] * xdims[1] * xdims[2] * xdims[3] * 4;
    if (total == 0) return KILN_OK;
    k_upsample2x<<<grid_for(total), THREADS, 0, KCU_STREAM(cb)>>>(y, x, xdims[2], xdims[3], total);
    KCU_LAUNCHED(err, "upsample2x");
    return KILN_OK;
}

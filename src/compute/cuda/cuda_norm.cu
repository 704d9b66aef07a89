/* cuda_norm.cu - RMSNorm (whole rows or per G-wide group, e.g. per head), LayerNorm + (1 + scale), + shift
 * modulation, row softmax. All statistics in f32 with a fixed reduction tree (run-to-run identical). */
#include "compute/cuda/cuda_kernels.cuh"

/* One warp per G-wide group of a row: lane-strided sum of squares, warp reduction, scale. In place is fine:
 * each element is read before it is written by the same thread. */
static __global__ void k_rms_norm(kcu_mat y, kcu_mat x, kcu_mat gain, float eps, int64_t groups_per_row) {
    int lane = threadIdx.x & 31;
    int64_t gidx = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (gidx >= x.rows * groups_per_row) return;
    int64_t r = gidx / groups_per_row, g0 = (gidx - r * groups_per_row) * gain.cols;
    const int64_t xo = r * x.ld + g0, yo = r * y.ld + g0;
    float ss = 0.f;
    for (int64_t c = lane; c < gain.cols; c += 32) {
        float v = kcu_ld(x.data, xo + c, x.dt);
        ss += v * v;
    }
    ss = kcu_warp_sum(ss);
    float inv = rsqrtf(ss / (float)gain.cols + eps);
    for (int64_t c = lane; c < gain.cols; c += 32)
        kcu_st(y.data, yo + c, y.dt, kcu_ld(x.data, xo + c, x.dt) * inv * kcu_ld(gain.data, c, gain.dt));
}

kiln_status kcu_rms_norm(kiln_cuda_backend *cb, const kcu_mat *y, const kcu_mat *x, const kcu_mat *gain, float eps,
                         kiln_err *err) {
    int64_t gpr = x->cols / gain->cols, n = x->rows * gpr;
    if (n == 0) return KILN_OK;
    const int warps = 8;
    KCU_LAUNCH(k_rms_norm, kcu_blocks(n, warps), warps * 32, 0, KCU_STREAM(cb))(*y, *x, *gain, eps, gpr);
    KCU_LAUNCHED(err, "rms_norm");
    return KILN_OK;
}

/* One block per row: mean, then the variance of the deviations (two passes: no cancellation), then
 * y = (1 + scale) * (x - mean) * rstd + shift. */
static __global__ void k_layer_norm_mod(kcu_mat y, kcu_mat x, kcu_mat shift, kcu_mat scale, float eps) {
    __shared__ float red[32];
    int64_t r = blockIdx.x;
    const int64_t xo = r * x.ld, yo = r * y.ld, n = x.cols;
    float s = 0.f;
    for (int64_t c = threadIdx.x; c < n; c += blockDim.x) s += kcu_ld(x.data, xo + c, x.dt);
    float mean = kcu_block_sum(s, red) / (float)n;
    float v = 0.f;
    for (int64_t c = threadIdx.x; c < n; c += blockDim.x) {
        float d = kcu_ld(x.data, xo + c, x.dt) - mean;
        v += d * d;
    }
    float rstd = rsqrtf(kcu_block_sum(v, red) / (float)n + eps);
    for (int64_t c = threadIdx.x; c < n; c += blockDim.x) {
        float o = (kcu_ld(x.data, xo + c, x.dt) - mean) * rstd;
        if (scale.data) o *= 1.f + kcu_ld(scale.data, c, scale.dt);
        if (shift.data) o += kcu_ld(shift.data, c, shift.dt);
        kcu_st(y.data, yo + c, y.dt, o);
    }
}

kiln_status kcu_layer_norm_modulate(kiln_cuda_backend *cb, const kcu_mat *y, const kcu_mat *x, const kcu_mat *shift,
                                    const kcu_mat *scale, float eps, kiln_err *err) {
    if (x->rows == 0 || x->cols == 0) return KILN_OK;
    if (x->rows > 0x7fffffff) return KILN_FAIL(err, KILN_E_LIMIT, "layer_norm: %lld rows", (long long)x->rows);
    kcu_mat none = {NULL, 0, 0, 0, KILN_DT_F32};
    KCU_LAUNCH(k_layer_norm_mod, (unsigned)x->rows, 256, 0, KCU_STREAM(cb))(*y, *x, shift ? *shift : none,
                                                                     scale ? *scale : none, eps);
    KCU_LAUNCHED(err, "layer_norm_modulate");
    return KILN_OK;
}

/* y = softmax(x * scale) per row: one block per row, the max, the sum, the normalised values (x read 3 times) */
static __global__ void k_softmax(kcu_mat y, kcu_mat x, float scale) {
    __shared__ float red[32];
    int64_t r = blockIdx.x;
    const int64_t xo = r * x.ld, yo = r * y.ld, n = x.cols;
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < n; c += blockDim.x) m = fmaxf(m, kcu_ld(x.data, xo + c, x.dt) * scale);
    m = kcu_block_max(m, red);
    float s = 0.f;
    for (int64_t c = threadIdx.x; c < n; c += blockDim.x) s += expf(kcu_ld(x.data, xo + c, x.dt) * scale - m);
    float inv = 1.f / kcu_block_sum(s, red);
    for (int64_t c = threadIdx.x; c < n; c += blockDim.x)
        kcu_st(y.data, yo + c, y.dt, expf(kcu_ld(x.data, xo + c, x.dt) * scale - m) * inv);
}

kiln_status kcu_softmax_scaled(kiln_cuda_backend *cb, const kcu_mat *y, const kcu_mat *x, float scale, kiln_err *err) {
    if (x->rows == 0 || x->cols == 0) return KILN_OK;
    if (x->rows > 0x7fffffff) return KILN_FAIL(err, KILN_E_LIMIT, "softmax: %lld rows", (long long)x->rows);
    KCU_LAUNCH(k_softmax, (unsigned)x->rows, 256, 0, KCU_STREAM(cb))(*y, *x, scale);
    KCU_LAUNCHED(err, "softmax");
    return KILN_OK;
}

kiln_status kcu_softmax(kiln_cuda_backend *cb, const kcu_mat *y, const kcu_mat *x, kiln_err *err) {
    return kcu_softmax_scaled(cb, y, x, 1.0f, err); /* x * 1.0f is x: the plain softmax's numbers */
}

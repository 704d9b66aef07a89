/* cuda_rope.cu - rotary position embedding in place on x [S, H*Dh] with per-token angle tables cos/sin
 * [S, Dh/2] shared by every head. interleaved: pairs (2i, 2i+1) (FLUX DiT); half-split: pairs (i, i + Dh/2)
 * (Qwen3). Row r of x uses table row r % T (T = table rows). One thread per rotated pair. */
#include "compute/cuda/cuda_kernels.cuh"

static __global__ void k_rope(kcu_mat x, kcu_mat cs, kcu_mat sn, int n_heads, int half, int interleaved) {
    int64_t pairs_per_row = (int64_t)n_heads * half;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < x.rows * pairs_per_row;
         t += (int64_t)gridDim.x * blockDim.x) {
        int64_t s = t / pairs_per_row, rem = t - s * pairs_per_row;
        int64_t h = rem / half, i = rem - h * half;
        int64_t base = s * x.ld + h * (2 * (int64_t)half);
        int64_t i0 = interleaved ? base + 2 * i : base + i, i1 = interleaved ? i0 + 1 : i0 + half;
        int64_t tr = s % cs.rows; /* a batch of sequences stacked as [B*S, ...] shares one [S, Dh/2] table */
        float c = kcu_ld(cs.data, tr * cs.ld + i, cs.dt), sv = kcu_ld(sn.data, tr * sn.ld + i, sn.dt);
        float a = kcu_ld(x.data, i0, x.dt), b = kcu_ld(x.data, i1, x.dt);
        kcu_st(x.data, i0, x.dt, c * a - sv * b);
        kcu_st(x.data, i1, x.dt, sv * a + c * b);
    }
}

kiln_status kcu_rope(kiln_cuda_backend *cb, const kcu_mat *x, const kcu_mat *cos, const kcu_mat *sin, int n_heads,
                     bool interleaved, kiln_err *err) {
    int half = (int)(x->cols / n_heads / 2);
    int64_t n = x->rows * n_heads * (int64_t)half;
    if (n == 0) return KILN_OK;
    unsigned blocks = kcu_blocks(n, 256);
    KCU_LAUNCH(k_rope, blocks > 65536u ? 65536u : blocks, 256, 0, KCU_STREAM(cb))(*x, *cos, *sin, n_heads, half,
                                                                        interleaved ? 1 : 0);
    KCU_LAUNCHED(err, "rope");
    return KILN_OK;
}

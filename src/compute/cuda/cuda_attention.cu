/* cuda_attention.cu - multi-head attention softmax(q k^T * scale + bias + mask) v with online softmax (the
 * flash-attention recurrence): O(seq) memory, one pass over the keys, all arithmetic in f32.
 *
 * Version 1, chosen for being obviously correct rather than fast (no GPU was available when it was written;
 * see docs/cuda-backend.md "attention: what to measure next"): CUDA cores, no tensor cores.
 *   block  = 8 warps; each warp owns one query row of one head (grid: query blocks x heads)
 *   tile   = 32 keys; K and V tiles staged in shared memory as f32, shared by the block's 8 queries
 *   scores = lane j computes q . k_j for key j of the tile (K rows padded by one float: conflict-free), plus
 *            the query's bias row at key j when there is one (f32, read coalesced across the lanes)
 *   update = running max m, running sum l, accumulator acc[Dh] spread over the lanes (Dh/32 each), rescaled by
 *            exp(m_old - m_new) when the max grows; p_j broadcast with a shuffle for the PV product
 * Fully masked rows (no visible key) produce zeros, as the ops contract says. */
#include "compute/cuda/cuda_kernels.cuh"
#include "compute/cuda/cuda_launch.h"

#define WARPS KCU_ATT_WARPS
#define MAX_DH KCU_ATT_MAX_DH
#define MAX_PER (MAX_DH / 32)

/* KT: keys per shared-memory tile, 32 (lane j scores key j) or 16 (lanes 16..31 score nothing), chosen per
 * device by kcu_att_pick_kt (cuda_launch.h): at head dim 512 a 32-key tile needs 147.6 KB, over consumer cards'
 * 99 KB. */
template <int KT>
static __global__ void __launch_bounds__(WARPS * 32) k_attention(kcu_mat out, kcu_mat q, kcu_mat k, kcu_mat v,
                                                                 int dh, int group, float scale, int causal,
                                                                 const uint8_t *key_mask, const float *bias,
                                                                 int64_t bias_ld) {
    KCU_DYNAMIC_SMEM(float, sm);
    float *ks = sm;                         /* [KT][dh + 1] */
    float *vs = ks + KT * (dh + 1);         /* [KT][dh] */
    float *qs = vs + KT * dh;               /* [WARPS][dh] */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int h = blockIdx.y, hk = h / group;
    const int64_t q0 = (int64_t)blockIdx.x * WARPS, qi = q0 + warp, sq = q.rows, sk = k.rows;
    const bool active = qi < sq;
    const int nper = (dh + 31) / 32;
    const float *brow = bias && active ? bias + ((int64_t)h * sq + qi) * bias_ld : NULL; /* row h * Sq + qi */

    if (active)
        for (int d = lane; d < dh; d += 32) qs[warp * dh + d] = kcu_ld(q.data, qi * q.ld + (int64_t)h * dh + d, q.dt);
    float acc[MAX_PER];
#pragma unroll
    for (int i = 0; i < MAX_PER; i++) acc[i] = 0.f;
    float m = -INFINITY, l = 0.f;

    int64_t kend = sk;
    if (causal) {
        int64_t last_q = q0 + WARPS - 1 < sq - 1 ? q0 + WARPS - 1 : sq - 1;
        kend = last_q + 1 < sk ? last_q + 1 : sk;
    }
    for (int64_t j0 = 0; j0 < kend; j0 += KT) {
        __syncthreads(); /* previous tile fully consumed (and qs written, first time) */
        for (int t = threadIdx.x; t < KT * dh; t += blockDim.x) {
            int j = t / dh, d = t - j * dh;
            int64_t key = j0 + j;
            float kv = 0.f, vv = 0.f;
            if (key < sk) {
                kv = kcu_ld(k.data, key * k.ld + (int64_t)hk * dh + d, k.dt);
                vv = kcu_ld(v.data, key * v.ld + (int64_t)hk * dh + d, v.dt);
            }
            ks[j * (dh + 1) + d] = kv;
            vs[j * dh + d] = vv;
        }
        __syncthreads();
        if (!active) continue;
        int64_t key = j0 + lane;
        bool visible = lane < KT && key < sk && (!causal || key <= qi) && (!key_mask || key_mask[key]);
        float s = -INFINITY;
        if (visible) {
            float dot = 0.f;
            const float *kr = ks + lane * (dh + 1), *qr = qs + warp * dh;
            for (int d = 0; d < dh; d++) dot = fmaf(qr[d], kr[d], dot);
            s = dot * scale;
            if (brow) s += brow[key]; /* -inf excludes the key: p = exp(-inf - m) = 0 below */
        }
        float m_new = fmaxf(m, kcu_warp_max(s));
        if (m_new == -INFINITY) continue; /* nothing visible yet */
        float corr = expf(m - m_new);     /* m = -inf the first time: corr = 0, acc and l are 0 anyway */
        float p = visible ? expf(s - m_new) : 0.f;
        l = l * corr + kcu_warp_sum(p);
#pragma unroll
        for (int i = 0; i < MAX_PER; i++) acc[i] *= corr;
        for (int j = 0; j < KT; j++) {
            float pj = __shfl_sync(0xffffffffu, p, j);
            if (pj == 0.f) continue; /* uniform across the warp: pj is the same value in every lane */
            const float *vr = vs + j * dh;
#pragma unroll
            for (int i = 0; i < MAX_PER; i++) {
                int d = lane + 32 * i;
                if (i < nper && d < dh) acc[i] = fmaf(pj, vr[d], acc[i]);
            }
        }
        m = m_new;
    }
    if (!active) return;
    float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
    for (int i = 0; i < MAX_PER; i++) {
        int d = lane + 32 * i;
        if (i < nper && d < dh) kcu_st(out.data, qi * out.ld + (int64_t)h * dh + d, out.dt, acc[i] * inv);
    }
}

int kcu_attention_max_head_dim(const kiln_cuda_backend *cb) {
    int dh = MAX_DH;
    while (dh > 32 && !kcu_att_pick_kt(dh, cb->smem_optin)) dh -= 32;
    return dh;
}

template <int KT>
static kiln_status launch(kiln_cuda_backend *cb, const kcu_mat *out, const kcu_mat *q, const kcu_mat *k,
                          const kcu_mat *v, int dh, int group, float scale, bool causal, const kcu_mat *key_mask,
                          const kcu_mat *bias, int64_t qblocks, int n_q_heads, kiln_err *err) {
    size_t smem = kcu_att_smem(dh, KT);
    if (smem > 48 * 1024)
        KCU_CALL(err, cudaFuncSetAttribute(k_attention<KT>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    dim3 grid((unsigned)qblocks, (unsigned)n_q_heads);
    KCU_LAUNCH(k_attention<KT>, grid, WARPS * 32, smem, KCU_STREAM(cb))(*out, *q, *k, *v, dh, group, scale, causal ? 1 : 0,
                                                                key_mask ? (const uint8_t *)key_mask->data : NULL,
                                                                bias ? (const float *)bias->data : NULL,
                                                                bias ? bias->ld : 0);
    KCU_LAUNCHED(err, "attention");
    return KILN_OK;
}

kiln_status kcu_attention(kiln_cuda_backend *cb, const kcu_mat *out, const kcu_mat *q, const kcu_mat *k,
                          const kcu_mat *v, int n_q_heads, int n_kv_heads, float scale, bool causal,
                          const kcu_mat *key_mask, const kcu_mat *bias, kiln_err *err) {
    int dh = (int)(q->cols / n_q_heads);
    if (q->rows == 0) return KILN_OK;
    int kt = kcu_att_pick_kt(dh, cb->smem_optin);
    if (!kt)
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "attention: head dim %d over this kernel's limit %d on %s", dh,
                         kcu_attention_max_head_dim(cb), cb->name);
    int64_t qblocks = (q->rows + WARPS - 1) / WARPS;
    if (qblocks > 0x7fffffff || n_q_heads > 65535)
        return KILN_FAIL(err, KILN_E_LIMIT, "attention: %lld queries x %d heads is too large a grid",
                         (long long)q->rows, n_q_heads);
    int group = n_q_heads / n_kv_heads;
    return kt == 32 ? launch<32>(cb, out, q, k, v, dh, group, scale, causal, key_mask, bias, qblocks, n_q_heads, err)
                    : launch<16>(cb, out, q, k, v, dh, group, scale, causal, key_mask, bias, qblocks, n_q_heads, err);
}

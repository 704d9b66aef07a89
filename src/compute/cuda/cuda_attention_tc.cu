/* cuda_attention_tc.cu - attention variant 2: tensor cores through mma.sync m16n8k16 (bf16 operands, f32
 * accumulation), the flash-attention recurrence with everything a warp updates in registers. The FAST default
 * (cuda_ops.c): on the H200 it matched variant 1 (cuda_attention.cu) in every op comparison and image and ran the
 * DiT's attention 19 times faster (docs/benchmarks.md); the emulated GPU (tests/cuda_emu) computes mma.sync,
 * ldmatrix and cp.async from the PTX ISA's definitions.
 *
 *   block  = 4 warps, 64 query rows (16 per warp) of one head (8 warps, 128 rows with KILN_CUDA_TC_BQ=128); K and
 *            V tiles of 64 keys in shared memory, through cp.async when they are aligned bf16 (bf16,
 *            row-major as in memory; P V's B fragments come from V through ldmatrix.trans, four registers - two
 *            dim tiles - per instruction, so no transposed store with its bank conflicts)
 *   Q      = the warp's 16 rows as A fragments, loaded once (dh/4 registers per lane)
 *   S      = Q K^T: 16 x 64 per warp in 8 accumulator tiles of 16 x 8 (32 f32 per lane)
 *   softmax: a lane holds 2 rows x 16 columns of S; row max and sum over the 4 lanes of a quad (two shuffles);
 *            running max m and (per-lane partial) sum l, the rescale c = 2^(m_old - m_new) applied to O
 *   O      = O c + P V: S's accumulator tiles ARE P's A fragments once rounded to bf16 (the m16n8 accumulator
 *            layout of two adjacent tiles is the m16n8k16 A layout); O is dh/8 accumulator tiles (dh/2 f32)
 * Scores are taken in base 2 (scale and bias times log2 e; exp2 is one instruction): the same softmax. Any head dim
 * up to 128 (instantiated for 64 and 128; the columns past dh are zeros; over 128, to 512, k_attention_tc_wide
 * below splits the dims across the warps), GQA, causal, key mask and the additive
 * f32 bias (T5's positions); fully masked rows give zeros. Q, K, V and P are rounded to bf16 (the tensor cores'
 * operands), l sums the unrounded P: the numerics of FlashAttention-2 in bf16. */
#include "compute/cuda/cuda_kernels.cuh"

#include "compute/cuda/cuda_launch.h"

#define BQ KCU_TC_BQ
#define BK KCU_TC_BK
#define TC_WARPS KCU_TC_WARPS
#define LOG2E 1.4426950408889634f

/* rows [row0, row0 + ROWS) x columns [col0, col0 + dh) of m into dst as bf16, zero past m's rows and past dh:
 * row-major [ROWS][DH + 8]. vec: m is bf16 with 16-byte aligned rows and dh % 8 == 0 (8 values per load). */
template <int ROWS, int DH>
static __device__ __forceinline__ void load_tile(__nv_bfloat16 *dst, const kcu_mat &m, int64_t row0, int64_t col0,
                                                 int dh, bool vec) {
    if (vec) {
        for (int c = threadIdx.x; c < ROWS * (DH / 8); c += blockDim.x) {
            int r = c / (DH / 8), d = (c % (DH / 8)) * 8;
            __nv_bfloat16 x[8];
            if (row0 + r < m.rows && d < dh) {
                const __nv_bfloat16 *src = (const __nv_bfloat16 *)m.data + (row0 + r) * m.ld + col0 + d;
#ifdef KCU_EMU
                memcpy(x, src, 16);
#else
                *(uint4 *)x = *(const uint4 *)src;
#endif
            } else {
                for (int j = 0; j < 8; j++) x[j] = __float2bfloat16_rn(0.f);
            }
#ifdef KCU_EMU
            memcpy(dst + r * (DH + 8) + d, x, 16);
#else
            *(uint4 *)(dst + r * (DH + 8) + d) = *(const uint4 *)x;
#endif
        }
        return;
    }
    for (int i = threadIdx.x; i < ROWS * DH; i += blockDim.x) {
        int r = i / DH, d = i - r * DH;
        float x = row0 + r < m.rows && d < dh ? kcu_ld(m.data, (row0 + r) * m.ld + col0 + d, m.dt) : 0.f;
        dst[r * (DH + 8) + d] = __float2bfloat16_rn(x);
    }
}

/* The same tile through cp.async (m is bf16 with 16-byte aligned rows, dh % 8 == 0): rows under m's are copied
 * without passing through registers, the rest (and the columns past dh) zeroed with plain stores - zeros, not
 * stale values, since a P of 0 times a NaN left in shared memory would still be NaN. The caller commits. */
template <int ROWS, int DH>
static __device__ __forceinline__ void load_tile_async(__nv_bfloat16 *dst, const kcu_mat &m, int64_t row0, int64_t col0,
                                                       int dh) {
    for (int c = threadIdx.x; c < ROWS * (DH / 8); c += blockDim.x) {
        int r = c / (DH / 8), d = (c % (DH / 8)) * 8;
        __nv_bfloat16 *to = dst + r * (DH + 8) + d;
        if (row0 + r < m.rows && d < dh) {
            kcu_cp_async_16(to, (const __nv_bfloat16 *)m.data + (row0 + r) * m.ld + col0 + d);
        } else {
            for (int j = 0; j < 8; j++) to[j] = __float2bfloat16_rn(0.f);
        }
    }
}

/* A warp's Q rows as A fragments: qw points at its first row's first dim (stride LDK), KD steps of 16 dims.
 * Read once per block, so plain 32-bit loads (ldmatrix would save nothing worth a second layout to check). */
template <int KD, int LDK>
static __device__ __forceinline__ void load_q_frags(uint32_t (&qf)[KD][4], const __nv_bfloat16 *qw, int g, int t) {
#pragma unroll
    for (int kd = 0; kd < KD; kd++) {
        qf[kd][0] = kcu_ld_u32(qw + g * LDK + kd * 16 + 2 * t);
        qf[kd][1] = kcu_ld_u32(qw + (g + 8) * LDK + kd * 16 + 2 * t);
        qf[kd][2] = kcu_ld_u32(qw + g * LDK + kd * 16 + 8 + 2 * t);
        qf[kd][3] = kcu_ld_u32(qw + (g + 8) * LDK + kd * 16 + 8 + 2 * t);
    }
}

/* S (16 rows x NT * 8 keys) = Q K^T over KD steps of 16 dims; ks points at the K tile's first key's first dim
 * (stride LDK): B[d][key] = K[key][d], row-major K as it is, through ldmatrix: lane l names key 8 nt + l % 8 at
 * dims 16 kd + 8 (l / 8), so registers 0, 1 are step kd's b[0], b[1] and 2, 3 step kd + 1's. */
template <int NT, int KD, int LDK>
static __device__ __forceinline__ void qk_tile(float (&s)[NT][4], const uint32_t (&qf)[KD][4], const __nv_bfloat16 *ks,
                                               int lane) {
    static_assert(KD % 2 == 0, "k-steps are loaded in pairs");
#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
        s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
        const __nv_bfloat16 *kr = ks + (nt * 8 + (lane & 7)) * LDK + (lane >> 3) * 8;
#pragma unroll
        for (int kd = 0; kd < KD; kd += 2) {
            uint32_t b[4];
            kcu_ldmatrix_x4<false>(b, kr + kd * 16);
            kcu_mma_bf16_16816(s[nt], qf[kd], b);
            kcu_mma_bf16_16816(s[nt], qf[kd + 1], b + 2);
        }
    }
}

/* qk_tile with Q's A fragments read from shared memory (qw: the warp's first row, stride LDK) at each k step -
 * ldmatrix.x4 of a 16 x 16 block: lane l names row l % 16 at dims 8 (l / 16), so registers 0..3 are a[0..3] (rows
 * g and g + 8, dims 2t and 2t + 8), load_q_frags' layout - with the k steps outside, so each A fragment serves
 * every key tile of the step. */
template <int NT, int KD, int LDK>
static __device__ __forceinline__ void qk_tile_qs(float (&s)[NT][4], const __nv_bfloat16 *qw, const __nv_bfloat16 *ks,
                                                  int lane) {
    static_assert(KD % 2 == 0, "k-steps are loaded in pairs");
#pragma unroll
    for (int nt = 0; nt < NT; nt++) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
    const __nv_bfloat16 *qr = qw + (lane & 15) * LDK + (lane >> 4) * 8;
#pragma unroll
    for (int kd = 0; kd < KD; kd += 2) {
        uint32_t a0[4], a1[4];
        kcu_ldmatrix_x4<false>(a0, qr + kd * 16);
        kcu_ldmatrix_x4<false>(a1, qr + (kd + 1) * 16);
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            uint32_t b[4];
            kcu_ldmatrix_x4<false>(b, ks + (nt * 8 + (lane & 7)) * LDK + (lane >> 3) * 8 + kd * 16);
            kcu_mma_bf16_16816(s[nt], a0, b);
            kcu_mma_bf16_16816(s[nt], a1, b + 2);
        }
    }
}

/* One key tile of the online softmax on a warp's S accumulators (16 rows x NT * 8 keys from key j0; this lane
 * holds rows row[0] = g and row[1] = g + 8, keys 2t, 2t + 1 of each 8): scores to base 2 (scale sl2 = scale
 * log2 e, the bias times log2 e), hidden keys -inf, the row max over the quad, then s := p = 2^(s - m_new), the
 * per-lane partial sums l rescaled and added to, and corr = 2^(m_old - m_new) for the caller's O. */
template <int NT, bool CHECK>
static __device__ __forceinline__ void softmax_tile(float (&s)[NT][4], float (&m)[2], float (&l)[2], float (&corr)[2],
                                                    const int64_t (&row)[2], int64_t j0, int64_t sk, int causal,
                                                    const uint8_t *key_mask, const float *const (&brow)[2], float sl2,
                                                    int t) {
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int r = i >> 1;
            float x = s[nt][i] * sl2;
            if (CHECK) { /* else every key of the tile is visible: no causal, mask or bias, and a full tile */
                const int64_t key = j0 + nt * 8 + 2 * t + (i & 1);
                bool vis = key < sk && (!causal || key <= row[r]) && (!key_mask || key_mask[key]);
                if (vis && brow[r]) x += brow[r][key] * LOG2E; /* -inf hides the key */
                x = vis ? x : -INFINITY;
            }
            s[nt][i] = x;
            mx[r] = fmaxf(mx[r], x);
        }
    float mu[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        float m_new = fmaxf(m[r], mx[r]);
        mu[r] = m_new == -INFINITY ? 0.f : m_new; /* nothing visible yet: p = 2^-inf = 0, no NaN */
        corr[r] = exp2f(m[r] - mu[r]);           /* m = -inf the first time: 0 (O and l are 0 anyway) */
        m[r] = m_new;
        l[r] *= corr[r];
    }
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            s[nt][i] = exp2f(s[nt][i] - mu[i >> 1]);
            l[i >> 1] += s[nt][i];
        }
}

/* O (16 rows x ND * 8 dims) = O corr + P V for one key tile: P is S's accumulators (keys 16 kk .. 16 kk + 15 are
 * tiles 2 kk and 2 kk + 1) rounded to bf16; vs points at the V tile's first key at this warp's first dim (stride
 * LDV). B[key][d] = V[key][d] transposed by ldmatrix: lane l names key 16 kk + l % 8 + 8 (l / 8 % 2) at dims
 * 8 (nd + l / 16), so registers 0, 1 are dim tile nd's b[0], b[1] and 2, 3 tile nd + 1's. */
template <int NT, int ND, int LDV>
static __device__ __forceinline__ void pv_tile(float (&o)[ND][4], const float (&s)[NT][4], const float (&corr)[2],
                                               const __nv_bfloat16 *vs, int lane) {
    static_assert(ND % 2 == 0, "dim tiles are loaded in pairs");
#pragma unroll
    for (int nd = 0; nd < ND; nd++) {
        o[nd][0] *= corr[0], o[nd][1] *= corr[0];
        o[nd][2] *= corr[1], o[nd][3] *= corr[1];
    }
#pragma unroll
    for (int kk = 0; kk < NT / 2; kk++) {
        uint32_t pa[4] = {kcu_pack_bf16(s[2 * kk][0], s[2 * kk][1]), kcu_pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                          kcu_pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                          kcu_pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
        const __nv_bfloat16 *vr = vs + (kk * 16 + (lane & 7) + (lane & 8)) * LDV + (lane >> 4) * 8;
#pragma unroll
        for (int nd = 0; nd < ND; nd += 2) {
            uint32_t b[4];
            kcu_ldmatrix_x4<true>(b, vr + nd * 8);
            kcu_mma_bf16_16816(o[nd], pa, b);
            kcu_mma_bf16_16816(o[nd + 1], pa, b + 2);
        }
    }
}

/* The end: l summed over the quad, O / l stored for rows under sq and dims under dh (d0: this warp's first). */
template <int ND>
static __device__ __forceinline__ void store_rows(const kcu_mat &out, float (&o)[ND][4], float (&l)[2],
                                                  const int64_t (&row)[2], int64_t sq, int h, int dh, int d0, int t) {
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        inv[r] = l[r] > 0.f ? 1.f / l[r] : 0.f;
    }
#pragma unroll
    for (int nd = 0; nd < ND; nd++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int r = i >> 1, d = d0 + nd * 8 + 2 * t + (i & 1);
            if (row[r] < sq && d < dh) kcu_st(out.data, row[r] * out.ld + (int64_t)h * dh + d, out.dt, o[nd][i] * inv[r]);
        }
}

/* The key loop both kernels run: tiles of TBK keys of K and V (columns [col0, col0 + dh)) into ks and vs, then per
 * tile scores(s) (S = Q K^T), softmax(s, corr, j0, full) (full: every key of the tile exists) and pv(s, corr)
 * (O = O corr + P V). async: K and V through cp.async in FlashAttention-2's order - wait for K(j0), start V(j0),
 * S and the softmax, wait for V(j0), start K(j0 + TBK), P V - one buffer each, so the same shared memory as the
 * plain loads between two barriers (vec bits 1 and 2: 8 values at a time). */
template <int TBK, int DH, class Scores, class Softmax, class PV>
static __device__ __forceinline__ void key_loop(__nv_bfloat16 *ks, __nv_bfloat16 *vs, const kcu_mat &k, const kcu_mat &v,
                                                int64_t col0, int dh, int64_t kend, int64_t sk, int vec, bool async,
                                                Scores scores, Softmax softmax, PV pv) {
    if (async) {
        __syncthreads(); /* every warp has its Q fragments: ks is free */
        load_tile_async<TBK, DH>(ks, k, 0, col0, dh);
        kcu_cp_async_commit();
    }
    for (int64_t j0 = 0; j0 < kend; j0 += TBK) {
        if (async) {
            kcu_cp_async_wait<0>(); /* this thread's copies of K(j0) have landed */
            __syncthreads();        /* K(j0) is in for every warp; every warp is done with V(j0 - TBK) */
            load_tile_async<TBK, DH>(vs, v, j0, col0, dh);
            kcu_cp_async_commit();
        } else {
            __syncthreads(); /* Q's fragments are read; the previous tile is consumed */
            load_tile<TBK, DH>(ks, k, j0, col0, dh, (vec >> 1) & 1);
            load_tile<TBK, DH>(vs, v, j0, col0, dh, (vec >> 2) & 1);
            __syncthreads();
        }
        float s[TBK / 8][4], corr[2];
        scores(s);
        softmax(s, corr, j0, j0 + TBK <= sk);
        if (async) {
            kcu_cp_async_wait<0>(); /* this thread's copies of V(j0) have landed */
            __syncthreads();        /* V(j0) is in for every warp; every warp is done with K(j0) */
            if (j0 + TBK < kend) {
                load_tile_async<TBK, DH>(ks, k, j0 + TBK, col0, dh);
                kcu_cp_async_commit();
            }
        }
        pv(s, corr);
    }
}

/* vec: bit 0 q, bit 1 k, bit 2 v may be loaded 8 values at a time (load_tile); bit 3: K and V through cp.async
 * when both may (KILN_CUDA_TC_ASYNC=0 clears it: the synchronous loads, for an A/B on the GPU) */
template <int DH, int WARPS, bool QS>
static __global__ void __launch_bounds__(WARPS * 32, QS && WARPS == 4 ? 3 : 1) /* QS: 168 registers, 3 blocks per SM */
    k_attention_tc(kcu_mat out, kcu_mat q, kcu_mat k, kcu_mat v, int dh, int group, float scale, int causal,
                   const uint8_t *key_mask, const float *bias, int64_t bias_ld, int vec) {
    constexpr int LDK = DH + 8;
    constexpr int KD = DH / 16; /* k-steps of Q K^T */
    constexpr int NT = BK / 8;  /* accumulator tiles of S */
    constexpr int ND = DH / 8;  /* accumulator tiles of O */
    KCU_DYNAMIC_SMEM(__nv_bfloat16, smem);
    __nv_bfloat16 *ks = smem, *vs = smem + BK * LDK;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int h = blockIdx.y, hk = h / group;
    constexpr int BQR = WARPS * 16; /* query rows per block: KCU_TC_BQ, or 128 (KILN_CUDA_TC_BQ=128) */
    static_assert(BQR <= 2 * BK, "Q's rows are staged in the K and V tiles' space");
    const int64_t q0 = (int64_t)blockIdx.x * BQR, sq = q.rows, sk = k.rows;
    const int64_t row[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8}; /* this lane's two query rows */
    const float sl2 = scale * LOG2E;

    /* Q through shared memory (the K tile's space) into A fragments - or, QS, in a tile of its own after V's, read
     * at every key tile (KILN_CUDA_TC_QSMEM=1) */
    __nv_bfloat16 *qs = QS ? vs + BK * LDK : ks;
    load_tile<BQR, DH>(qs, q, q0, (int64_t)h * dh, dh, vec & 1); /* 128 rows in ks run on into vs */
    __syncthreads();
    uint32_t qf[KD][4]; /* QS: unused, so no registers */
    if (!QS) load_q_frags<KD, LDK>(qf, ks + warp * 16 * LDK, g, t);
    float o[ND][4];
#pragma unroll
    for (int nd = 0; nd < ND; nd++) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    const float *brow[2] = {NULL, NULL};
    for (int r = 0; r < 2; r++)
        if (bias && row[r] < sq) brow[r] = bias + ((int64_t)h * sq + row[r]) * bias_ld;

    int64_t kend = sk;
    if (causal) kend = q0 + BQR < sk ? q0 + BQR : sk;
    const bool plain = !causal && !key_mask && !bias; /* a full tile then needs no visibility checks */
    key_loop<BK, DH>(
        ks, vs, k, v, (int64_t)hk * dh, dh, kend, sk, vec, (vec & 14) == 14,
        [&](float (&s)[NT][4]) {
            if (QS) qk_tile_qs<NT, KD, LDK>(s, qs + warp * 16 * LDK, ks, lane);
            else qk_tile<NT, KD, LDK>(s, qf, ks, lane);
        },
        [&](float (&s)[NT][4], float (&corr)[2], int64_t j0, bool full) {
            if (plain && full) softmax_tile<NT, false>(s, m, l, corr, row, j0, sk, causal, key_mask, brow, sl2, t);
            else softmax_tile<NT, true>(s, m, l, corr, row, j0, sk, causal, key_mask, brow, sl2, t);
        },
        [&](float (&s)[NT][4], float (&corr)[2]) { pv_tile<NT, ND, LDK>(o, s, corr, vs, lane); });
    store_rows<ND>(out, o, l, row, sq, h, dh, 0, t);
}

/* Head dims over 128 (the VAE's single-head 512): the dims split across the warps instead of the rows. A block
 * takes 16 query rows; warp w holds Q's and O's dims [128 w, 128 w + 128) (the registers of kernel A at 128) and
 * computes its share of S over them; the shares meet in shared memory and every warp adds them in the same
 * order (w = 0, 1, ...), so all warps hold the same S and take the same softmax, then each updates its own O. */
template <int DH>
static __global__ void __launch_bounds__((DH / 128) * 32)
    k_attention_tc_wide(kcu_mat out, kcu_mat q, kcu_mat k, kcu_mat v, int dh, int group, float scale, int causal,
                        const uint8_t *key_mask, const float *bias, int64_t bias_ld, int vec) {
    constexpr int NW = DH / 128, LDK = DH + 8;
    constexpr int KD = 128 / 16, NT = KCU_TC_WIDE_BK / 8, ND = 128 / 8;
    KCU_DYNAMIC_SMEM(__nv_bfloat16, smem);
    __nv_bfloat16 *ks = smem, *vs = smem + KCU_TC_WIDE_BK * LDK;
    float *sp = (float *)(vs + KCU_TC_WIDE_BK * LDK); /* [NW][NT * 4][32]: each warp's share of S, by register and lane */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3, d0 = warp * 128;
    const int h = blockIdx.y, hk = h / group;
    const int64_t q0 = (int64_t)blockIdx.x * 16, sq = q.rows, sk = k.rows;
    const int64_t row[2] = {q0 + g, q0 + g + 8};
    const float sl2 = scale * LOG2E;

    load_tile<16, DH>(ks, q, q0, (int64_t)h * dh, dh, vec & 1);
    __syncthreads();
    uint32_t qf[KD][4];
    load_q_frags<KD, LDK>(qf, ks + d0, g, t);
    float o[ND][4];
#pragma unroll
    for (int nd = 0; nd < ND; nd++) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    const float *brow[2] = {NULL, NULL};
    for (int r = 0; r < 2; r++)
        if (bias && row[r] < sq) brow[r] = bias + ((int64_t)h * sq + row[r]) * bias_ld;

    int64_t kend = sk;
    if (causal) kend = q0 + 16 < sk ? q0 + 16 : sk;
    const bool plain = !causal && !key_mask && !bias;
    /* S over all dims: each warp's share through shared memory, added in warp order by every warp; the barrier
     * before the next tile's shares is key_loop's first (every warp has read these by its second) */
    auto scores = [&](float (&s)[NT][4]) {
        qk_tile<NT, KD, LDK>(s, qf, ks + d0, lane);
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) sp[(warp * NT * 4 + nt * 4 + i) * 32 + lane] = s[nt][i];
        __syncthreads(); /* every warp's share of S is written */
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                float x = 0.f;
                for (int w = 0; w < NW; w++) x += sp[(w * NT * 4 + nt * 4 + i) * 32 + lane];
                s[nt][i] = x;
            }
    };
    key_loop<KCU_TC_WIDE_BK, DH>(
        ks, vs, k, v, (int64_t)hk * dh, dh, kend, sk, vec, (vec & 14) == 14, scores,
        [&](float (&s)[NT][4], float (&corr)[2], int64_t j0, bool full) {
            if (plain && full) softmax_tile<NT, false>(s, m, l, corr, row, j0, sk, causal, key_mask, brow, sl2, t);
            else softmax_tile<NT, true>(s, m, l, corr, row, j0, sk, causal, key_mask, brow, sl2, t);
        },
        [&](float (&s)[NT][4], float (&corr)[2]) { pv_tile<NT, ND, LDK>(o, s, corr, vs + d0, lane); });
    store_rows<ND>(out, o, l, row, sq, h, dh, d0, t);
}

bool kcu_attention_tc_supported(const kiln_cuda_backend *cb, int dh) {
    return kcu_tc_fits(cb->cc_major * 10 + cb->cc_minor, dh, cb->smem_optin);
}

/* whether m can be read 8 bf16 at a time from column h * dh (load_tile) */
static bool vec_ok(const kcu_mat *m, int dh) {
    return m->dt == KILN_DT_BF16 && dh % 8 == 0 && m->ld % 8 == 0 && (uintptr_t)m->data % 16 == 0;
}

/* One instance of kernel A: the opt-in to over 48 KB of shared memory where the tiles need it (Q's own tile, or
 * 128-query blocks with it), then the launch. */
template <int DH, int W, bool QS>
static kiln_status launch_tc(kiln_cuda_backend *cb, dim3 grid, size_t smem, const kcu_mat &out, const kcu_mat &q,
                             const kcu_mat &k, const kcu_mat &v, int dh, int group, float scale, int causal,
                             const uint8_t *km, const float *bias, int64_t bias_ld, int vec, kiln_err *err) {
    if (smem > 48 * 1024)
        KCU_CALL(err, cudaFuncSetAttribute(k_attention_tc<DH, W, QS>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    KCU_LAUNCH((k_attention_tc<DH, W, QS>), grid, W * 32, smem, KCU_STREAM(cb))(out, q, k, v, dh, group, scale, causal, km,
                                                                               bias, bias_ld, vec);
    KCU_LAUNCHED(err, "attention (tensor cores)");
    return KILN_OK;
}

kiln_status kcu_attention_tc(kiln_cuda_backend *cb, const kcu_mat *out, const kcu_mat *q, const kcu_mat *k,
                             const kcu_mat *v, int n_q_heads, int n_kv_heads, float scale, bool causal,
                             const kcu_mat *key_mask, const kcu_mat *bias, kiln_err *err) {
    int dh = (int)(q->cols / n_q_heads);
    if (q->rows == 0) return KILN_OK;
    if (!kcu_attention_tc_supported(cb, dh))
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "attention (tensor cores): head dim %d on %s", dh, cb->name);
    const int DH = kcu_tc_dh(dh), warps = DH <= 128 && cb->tc_bq == 128 ? 8 : TC_WARPS;
    const int rows = DH <= 128 ? warps * 16 : 16;
    int64_t qblocks = (q->rows + rows - 1) / rows;
    if (qblocks > 0x7fffffff || n_q_heads > 65535)
        return KILN_FAIL(err, KILN_E_LIMIT, "attention: %lld queries x %d heads is too large a grid",
                         (long long)q->rows, n_q_heads);
    int vec = (vec_ok(q, dh) ? 1 : 0) | (vec_ok(k, dh) ? 2 : 0) | (vec_ok(v, dh) ? 4 : 0) | (cb->tc_async ? 8 : 0);
    size_t smem = kcu_tc_smem(dh);
    dim3 grid((unsigned)qblocks, (unsigned)n_q_heads);
    const uint8_t *km = key_mask ? (const uint8_t *)key_mask->data : NULL;
    const float *bp = bias ? (const float *)bias->data : NULL;
    int64_t bld = bias ? bias->ld : 0;
    int group = n_q_heads / n_kv_heads, c = causal ? 1 : 0;
    const bool qsm = cb->tc_qsmem && DH <= 128;
    if (qsm) smem = kcu_tc_smem_qs(dh, rows);
#define KCU_TC_LAUNCH(D, W, Q) launch_tc<D, W, Q>(cb, grid, smem, *out, *q, *k, *v, dh, group, scale, c, km, bp, bld, vec, err)
    if (DH <= 128) {
        if (DH == 64 && warps == 8) return qsm ? KCU_TC_LAUNCH(64, 8, true) : KCU_TC_LAUNCH(64, 8, false);
        if (DH == 64) return qsm ? KCU_TC_LAUNCH(64, TC_WARPS, true) : KCU_TC_LAUNCH(64, TC_WARPS, false);
        if (warps == 8) return qsm ? KCU_TC_LAUNCH(128, 8, true) : KCU_TC_LAUNCH(128, 8, false);
        return qsm ? KCU_TC_LAUNCH(128, TC_WARPS, true) : KCU_TC_LAUNCH(128, TC_WARPS, false);
    }
#undef KCU_TC_LAUNCH
    if (DH == 256) {
        if (smem > 48 * 1024)
            KCU_CALL(err, cudaFuncSetAttribute(k_attention_tc_wide<256>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        KCU_LAUNCH(k_attention_tc_wide<256>, grid, 2 * 32, smem, KCU_STREAM(cb))(*out, *q, *k, *v, dh, group, scale, c,
                                                                            km, bp, bld, vec);
    } else {
        KCU_CALL(err, cudaFuncSetAttribute(k_attention_tc_wide<512>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        KCU_LAUNCH(k_attention_tc_wide<512>, grid, 4 * 32, smem, KCU_STREAM(cb))(*out, *q, *k, *v, dh, group, scale, c,
                                                                            km, bp, bld, vec);
    }
    KCU_LAUNCHED(err, "attention (tensor cores)");
    return KILN_OK;
}

/* cuda_attention_tc.cu - attention variant 2: tensor cores through WMMA (bf16 operands, f32 accumulation),
 * the flash-attention recurrence with the running statistics in shared memory. Opt-in with
 * KILN_CUDA_ATTENTION=tc until tests/gpu/run.sh has validated and timed it against variant 1
 * (cuda_attention.cu): it was written without a GPU.
 *
 *   block  = 4 warps, 64 query rows (16 per warp) of one head; K/V tiles of 64 keys
 *   S      = Q K^T per warp: 16 x 64 scores from (Dh/16) x 4 WMMA products, stored f32 in shared memory
 *   softmax: per row (one warp per its 16 rows, two columns per lane): running max m, sum l, the rescale
 *            factor c = exp(m_old - m_new); P = exp(S - m_new) rounded to bf16
 *   O      = O * c + P V: the warp's 16 rows of O live in shared memory as f32, rescaled by the lanes, then
 *            loaded as WMMA accumulators, updated, stored back
 * Head dims 64 and 128. Q, K, V and P are rounded to bf16 (the tensor cores' operands), so the result matches
 * the f32 CPU reference to about 1e-3 relative, not 1e-5: the precision a FAST bf16 path has anyway. */
#ifndef KCU_EMU
#include <mma.h> /* the emulator brings its own nvcuda::wmma */
#endif

#include "compute/cuda/cuda_kernels.cuh"

#include "compute/cuda/cuda_launch.h"

#define BQ KCU_TC_BQ
#define BK KCU_TC_BK
#define TC_WARPS KCU_TC_WARPS
typedef kcu_tc_layout tc_layout;
#define tc_plan kcu_tc_plan

static __global__ void __launch_bounds__(TC_WARPS * 32) k_attention_tc(kcu_mat out, kcu_mat q, kcu_mat k, kcu_mat v,
                                                                       int dh, int group, float scale, int causal,
                                                                       const uint8_t *key_mask) {
#if (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800) || defined(KCU_EMU)
    using namespace nvcuda;
    KCU_DYNAMIC_SMEM(unsigned char, smem);
    const tc_layout t = tc_plan(dh);
    __nv_bfloat16 *qs = (__nv_bfloat16 *)(smem + t.q), *ks = (__nv_bfloat16 *)(smem + t.k);
    __nv_bfloat16 *vs = (__nv_bfloat16 *)(smem + t.v), *ps = (__nv_bfloat16 *)(smem + t.p);
    float *ss = (float *)(smem + t.s), *os = (float *)(smem + t.o);
    float *ms = (float *)(smem + t.m), *ls = (float *)(smem + t.l), *cs = (float *)(smem + t.c);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, r0 = warp * 16;
    const int h = blockIdx.y, hk = h / group;
    const int64_t q0 = (int64_t)blockIdx.x * BQ, sq = q.rows, sk = k.rows;

    for (int i = threadIdx.x; i < BQ * dh; i += blockDim.x) {
        int r = i / dh, d = i - r * dh;
        float x = q0 + r < sq ? kcu_ld(q.data, (q0 + r) * q.ld + (int64_t)h * dh + d, q.dt) : 0.f;
        qs[r * t.ldq + d] = __float2bfloat16_rn(x);
    }
    for (int i = threadIdx.x; i < BQ * t.ldo; i += blockDim.x) os[i] = 0.f;
    for (int i = threadIdx.x; i < BQ; i += blockDim.x) ms[i] = -INFINITY, ls[i] = 0.f;

    int64_t kend = sk;
    if (causal) kend = q0 + BQ < sk ? q0 + BQ : sk;
    for (int64_t j0 = 0; j0 < kend; j0 += BK) {
        __syncthreads(); /* the previous tile is consumed; Q, O, m, l are initialised */
        for (int i = threadIdx.x; i < BK * dh; i += blockDim.x) {
            int j = i / dh, d = i - j * dh;
            int64_t key = j0 + j;
            float kv = 0.f, vv = 0.f;
            if (key < sk) {
                kv = kcu_ld(k.data, key * k.ld + (int64_t)hk * dh + d, k.dt);
                vv = kcu_ld(v.data, key * v.ld + (int64_t)hk * dh + d, v.dt);
            }
            ks[j * t.ldq + d] = __float2bfloat16_rn(kv);
            vs[j * t.ldq + d] = __float2bfloat16_rn(vv);
        }
        __syncthreads();

        /* S[r0 .. r0+16, 0 .. BK) = Q K^T */
        for (int kb = 0; kb < BK / 16; kb++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::fill_fragment(acc, 0.f);
            for (int dc = 0; dc < dh / 16; dc++) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
                wmma::load_matrix_sync(fa, qs + r0 * t.ldq + dc * 16, t.ldq);
                wmma::load_matrix_sync(fb, ks + kb * 16 * t.ldq + dc * 16, t.ldq); /* B[d][key] = K[key][d] */
                wmma::mma_sync(acc, fa, fb, acc);
            }
            wmma::store_matrix_sync(ss + r0 * t.lds + kb * 16, acc, t.lds, wmma::mem_row_major);
        }
        __syncwarp();

        /* online softmax over the warp's 16 rows; lane owns columns lane and lane + 32 */
        for (int r = r0; r < r0 + 16; r++) {
            int64_t qi = q0 + r;
            float s2[2], p2[2];
            bool vis[2];
            for (int u = 0; u < 2; u++) {
                int64_t key = j0 + lane + 32 * u;
                vis[u] = key < sk && (!causal || key <= qi) && (!key_mask || key_mask[key]);
                s2[u] = vis[u] ? ss[r * t.lds + lane + 32 * u] * scale : -INFINITY;
            }
            float m_old = ms[r], l_old = ls[r];
            float m_new = fmaxf(m_old, kcu_warp_max(fmaxf(s2[0], s2[1])));
            float corr = 1.f;
            if (m_new == -INFINITY) {
                p2[0] = p2[1] = 0.f;
            } else {
                corr = expf(m_old - m_new); /* m_old = -inf: 0 (O and l are 0 anyway) */
                for (int u = 0; u < 2; u++) p2[u] = vis[u] ? expf(s2[u] - m_new) : 0.f;
            }
            float l_new = l_old * corr + kcu_warp_sum(p2[0] + p2[1]);
            for (int u = 0; u < 2; u++) ps[r * t.ldp + lane + 32 * u] = __float2bfloat16_rn(p2[u]);
            if (lane == 0) ms[r] = m_new, ls[r] = l_new, cs[r] = corr;
        }
        __syncwarp();
        for (int i = lane; i < 16 * dh; i += 32) {
            int r = r0 + i / dh, d = i % dh;
            os[r * t.ldo + d] *= cs[r];
        }
        __syncwarp();

        /* O[r0 .. r0+16, :] += P V */
        for (int db = 0; db < dh / 16; db++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::load_matrix_sync(acc, os + r0 * t.ldo + db * 16, t.ldo, wmma::mem_row_major);
            for (int kc = 0; kc < BK / 16; kc++) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
                wmma::load_matrix_sync(fa, ps + r0 * t.ldp + kc * 16, t.ldp);
                wmma::load_matrix_sync(fb, vs + kc * 16 * t.ldq + db * 16, t.ldq);
                wmma::mma_sync(acc, fa, fb, acc);
            }
            wmma::store_matrix_sync(os + r0 * t.ldo + db * 16, acc, t.ldo, wmma::mem_row_major);
        }
        __syncwarp();
    }
    __syncthreads(); /* no tile ran (kend = 0): make the initialisation visible before the reads below */
    for (int i = lane; i < 16 * dh; i += 32) {
        int r = r0 + i / dh, d = i % dh;
        int64_t qi = q0 + r;
        if (qi >= sq) continue;
        float l = ls[r];
        kcu_st(out.data, qi * out.ld + (int64_t)h * dh + d, out.dt, l > 0.f ? os[r * t.ldo + d] / l : 0.f);
    }
#else
    __trap(); /* bf16 WMMA needs sm_80; the launcher never selects this kernel below that */
#endif
}

bool kcu_attention_tc_supported(const kiln_cuda_backend *cb, int dh) {
    return kcu_tc_fits(cb->cc_major * 10 + cb->cc_minor, dh, cb->smem_optin);
}

kiln_status kcu_attention_tc(kiln_cuda_backend *cb, const kcu_mat *out, const kcu_mat *q, const kcu_mat *k,
                             const kcu_mat *v, int n_q_heads, int n_kv_heads, float scale, bool causal,
                             const kcu_mat *key_mask, kiln_err *err) {
    int dh = (int)(q->cols / n_q_heads);
    if (q->rows == 0) return KILN_OK;
    if (!kcu_attention_tc_supported(cb, dh))
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "attention (tensor cores): head dim %d on %s", dh, cb->name);
    int64_t qblocks = (q->rows + BQ - 1) / BQ;
    if (qblocks > 0x7fffffff || n_q_heads > 65535)
        return KILN_FAIL(err, KILN_E_LIMIT, "attention: %lld queries x %d heads is too large a grid",
                         (long long)q->rows, n_q_heads);
    size_t smem = tc_plan(dh).bytes;
    KCU_CALL(err, cudaFuncSetAttribute(k_attention_tc, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    dim3 grid((unsigned)qblocks, (unsigned)n_q_heads);
    KCU_LAUNCH(k_attention_tc, grid, TC_WARPS * 32, smem, KCU_STREAM(cb))(*out, *q, *k, *v, dh, n_q_heads / n_kv_heads, scale,
                                                                  causal ? 1 : 0,
                                                                  key_mask ? (const uint8_t *)key_mask->data : NULL);
    KCU_LAUNCHED(err, "attention (tensor cores)");
    return KILN_OK;
}

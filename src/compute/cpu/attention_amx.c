/* attention_amx.c - FAST attention on AMX tiles (bf16 operands, f32 accumulation and f32 softmax).
 *
 * Before the tasks run, K and V of every kv head are converted once into bf16 B-tile layouts (att_amx_pack):
 *   K tile (16 keys, 32 dims):  row r = dims (2r, 2r+1) of each of the 16 keys   -> S = Q . K^T
 *   V tile (32 keys, 16 dims):  row r = keys (2r, 2r+1) for each of the 16 dims  -> O += P . V
 * That copy is 2 * Hkv * Sk * Dh bf16 - linear in the sequence, the only O(seq) memory besides the output.
 * A task holds 32 queries (two 16-row tiles) in bf16, and for each block of ATT_BK_AMX keys: scores into an
 * f32 [32][128] buffer (2x2 tile blocking), an AVX-512 online-softmax pass that writes P in bf16, a rescale of
 * the f32 output rows in memory, and O += P V with the O tiles loaded from and stored back to that memory. */
#include <immintrin.h>
#include <math.h>

#include "compute/cpu/attention.h"

#define TARGET __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma")))
#define BK ATT_BK_AMX
#define ATT_RESCALE_SLACK 8.0f /* see the softmax pass in att_task_amx */

typedef struct amx_cfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_cfg;
/* GCC's _tile_loadconfig declares an 8-byte read only (see gemm_amx.c); name the whole struct. */
static inline void amx_load_config(const amx_cfg *c) { __asm__ volatile("ldtilecfg %0" ::"m"(*c)); }

size_t att_scratch_amx(int64_t dh) {
    size_t q = (size_t)ATT_BQ_AMX * (size_t)dh * 2, s = (size_t)ATT_BQ * BK * 4 * 2, p = (size_t)ATT_BQ * BK * 2,
           o = (size_t)ATT_BQ_AMX * (size_t)dh * 4;
    return (q + s + p + o + 64 * 4 + 63) & ~(size_t)63;
}

/* 2^x on 16 lanes for the softmax, x <= 0: 2^n * 2^r with n = round(x), |r| <= 1/2, 2^r by a degree-4
 * Taylor polynomial (relative error < 5e-5: P is rounded to bf16 - 4e-3 - right after), 2^n applied with
 * vscalefps. Masked scores are -inf: x is clamped to -200 first, which gives ~6e-61 -> 0 in f32. */
TARGET static inline __m512 exp2_512(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-200.0f));
    __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_sub_ps(x, n);
    __m512 p = _mm512_set1_ps(9.6181291e-3f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.5504109e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(2.4022651e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(6.9314718e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

/* Keys [k0, k1) of kv head hk into the K and V tiles; k0 % 32 == 0, k1 - k0 a multiple of 32; keys past Sk
 * are zeros. */
TARGET void att_amx_pack(const att_job *j, int64_t hk, int64_t k0, int64_t k1) {
    const int64_t dh = j->dh, sk = j->k.rows;
    uint16_t *kp = j->kp + hk * j->sk_pad * dh, *vp = j->vp + hk * j->sk_pad * dh;
    uint32_t tmp[16][16] __attribute__((aligned(64)));
    /* pairs of consecutive bf16 from a [k-row 0..15 | k-row 16..31] vector interleaved: (a0 b0 a1 b1 ...) */
    const __m512i inter = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
                                           6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    for (int64_t g = k0; g < k1; g += 16) { /* K: 16 keys, one tile per 32 dims */
        for (int64_t c = 0; c < dh / 32; c++) {
            for (int t = 0; t < 16; t++) {
                int64_t key = g + t;
                __m512i pr = _mm512_setzero_si512();
                if (key < sk) {
                    const float *kr = mat_f32_row(&j->k, key) + hk * dh + c * 32;
                    pr = (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(kr + 16), _mm512_loadu_ps(kr));
                }
                _mm512_store_si512(tmp[t], pr); /* tmp[key][dim pair] */
            }
            uint32_t *tile = (uint32_t *)(kp + ((g / 16) * (dh / 32) + c) * 512);
            for (int r = 0; r < 16; r++)
                for (int t = 0; t < 16; t++) tile[r * 16 + t] = tmp[t][r];
        }
    }
    for (int64_t g = k0; g < k1; g += 32) { /* V: 32 keys, one tile per 16 dims; row r = keys 2r, 2r+1 */
        for (int64_t r = 0; r < 16; r++) {
            int64_t ka = g + 2 * r, kb = ka + 1;
            const float *va = ka < sk ? mat_f32_row(&j->v, ka) + hk * dh : NULL;
            const float *vb = kb < sk ? mat_f32_row(&j->v, kb) + hk * dh : NULL;
            for (int64_t sl = 0; sl < dh / 16; sl++) {
                __m512 a = va ? _mm512_loadu_ps(va + sl * 16) : _mm512_setzero_ps();
                __m512 b = vb ? _mm512_loadu_ps(vb + sl * 16) : _mm512_setzero_ps();
                __m512i ab = _mm512_permutexvar_epi16(inter, (__m512i)_mm512_cvtne2ps_pbh(b, a));
                _mm512_storeu_si512(vp + ((g / 32) * (dh / 16) + sl) * 512 + r * 32, ab);
            }
        }
    }
}

/* S[32][BK] = Q . K^T for the keys [k0, k0 + BK), one pass per 32 keys: 2 query halves x 2 key groups of 16.
 * score_issue starts pass g (its products run on the tile unit while the core goes on); score_store writes its
 * four C tiles into S. The products of a pass take ~256 cycles: issued before a stretch of softmax work and
 * stored after it, they cost the vector code nothing (see att_task_amx). */
TARGET static inline void score_issue(const uint16_t *qb, const uint16_t *kp, int64_t nc, int64_t dh, int64_t k0, int g) {
    const int64_t qstride = dh * 2;
    const uint16_t *kt0 = kp + ((k0 / 16 + 2 * g) * nc) * 512, *kt1 = kt0 + nc * 512;
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t c = 0; c < nc; c++) {
        _tile_loadd(4, qb + c * 32, qstride);
        _tile_loadd(6, kt0 + c * 512, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_loadd(7, kt1 + c * 512, 64);
        _tile_dpbf16ps(1, 4, 7);
        _tile_loadd(5, qb + 16 * dh + c * 32, qstride);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
}

TARGET static inline void score_store(float *S, int g) {
    _tile_stored(0, S + g * 32, BK * 4);
    _tile_stored(1, S + g * 32 + 16, BK * 4);
    _tile_stored(2, S + 16 * BK + g * 32, BK * 4);
    _tile_stored(3, S + 16 * BK + g * 32 + 16, BK * 4);
}

/* One row of the online softmax over a block: P = 2^(S - m) in bf16 (2 * nch vectors of 16 keys), l and the O
 * row updated. The running max m is raised lazily: only when the block's max exceeds it by more than
 * ATT_RESCALE_SLACK (base-2 units) are l and the O row rescaled by 2^(m_old - m_new). Below that, P may reach
 * 2^SLACK = 256: exact in f32 sums, and bf16's relative precision does not depend on the scale. The result
 * O / l is the same softmax; most blocks after the first few skip the rescale of O entirely. lim: keys at
 * column > lim are masked (causal); bias: 0 / -inf per key, or NULL. */
TARGET static inline void softmax_row(const float *S, const float *bias, int64_t lim, int nch, float *m, float *l,
                                      float *O, int64_t dh, uint16_t *P) {
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 s[BK / 16];
    __m512 mx = ninf;
    for (int b = 0; b < 2 * nch; b++) {
        __m512 v = _mm512_loadu_ps(S + 16 * b);
        if (bias) v = _mm512_add_ps(v, _mm512_load_ps(bias + 16 * b));
        if (lim < 16 * b + 15) {
            int64_t keep = lim - 16 * b + 1; /* columns 16b .. 16b+keep-1 are visible */
            __mmask16 km = keep <= 0 ? 0 : (__mmask16)((1u << keep) - 1);
            v = _mm512_mask_mov_ps(ninf, km, v);
        }
        s[b] = v;
        mx = _mm512_max_ps(mx, v);
    }
    float bmax = _mm512_reduce_max_ps(mx);
    if (bmax == -INFINITY) { /* nothing visible: P row 0, O row unchanged */
        memset(P, 0, BK * 2);
        return;
    }
    if (bmax > *m + ATT_RESCALE_SLACK) { /* raise the running max (always on the first visible block) */
        if (*m != -INFINITY) {
            float corr = _mm512_cvtss_f32(exp2_512(_mm512_set1_ps(*m - bmax))); /* vector exp2, no libm */
            __m512 cv = _mm512_set1_ps(corr);
            *l *= corr;
            for (int64_t d = 0; d < dh; d += 16) _mm512_storeu_ps(O + d, _mm512_mul_ps(_mm512_loadu_ps(O + d), cv));
        }
        *m = bmax;
    }
    __m512 mn = _mm512_set1_ps(*m), sum = _mm512_setzero_ps();
    for (int b = 0; b < 2 * nch; b++) {
        __m512 e = exp2_512(_mm512_sub_ps(s[b], mn));
        sum = _mm512_add_ps(sum, e);
        _mm256_storeu_si256((__m256i *)(P + 16 * b), (__m256i)_mm512_cvtneps_pbh(e));
    }
    *l += _mm512_reduce_add_ps(sum);
}

/* The key/value stream is the cost to manage: K and V of one head at 4,608 keys are 2.4 MB of bf16 - more than
 * L2 - and every pass over them comes from L3. A task therefore takes ATT_BQ_AMX queries (NSUB sub-blocks of
 * 32, each with its own running max, sum and output), and each key block (BK keys: 64 KB of K and V tiles) is
 * used by all sub-blocks while it sits in L2: a quarter of the L3 traffic of 32-query tasks, which left the
 * tile unit waiting on L3 at 1/4 of its rate even with the softmax removed. Work items are (key block,
 * sub-block) pairs in that order; the scores of the next item are computed during the softmax of the current
 * one (see below). */
#define NSUB (ATT_BQ_AMX / ATT_BQ)

TARGET void att_task_amx(const att_job *j, int64_t h, int64_t q0, float *scratch) {
    const int64_t dh = j->dh, hk = h / (j->hq / j->hkv), sk = j->k.rows;
    const int64_t nq_all = j->q.rows - q0 < ATT_BQ_AMX ? j->q.rows - q0 : ATT_BQ_AMX;
    const int nsub = (int)((nq_all + ATT_BQ - 1) / ATT_BQ);
    uint16_t *qb = (uint16_t *)scratch;                      /* NSUB x [32][dh] bf16 */
    float *Sb = (float *)(qb + ATT_BQ_AMX * dh);             /* 2 x [32][BK] f32 (double buffer) */
    uint16_t *P = (uint16_t *)(Sb + 2 * ATT_BQ * BK);        /* [32][BK] bf16 */
    float *Ob = (float *)(P + ATT_BQ * BK);                  /* NSUB x [32][dh] f32 */
    float m[NSUB][ATT_BQ], l[NSUB][ATT_BQ];
    int64_t nq[NSUB], kend[NSUB], kend_max = 0;
    /* q is scaled by scale * log2(e) as it is rounded to bf16, so scores come out in base-2 exponent units */
    const __m512 qscale = _mm512_set1_ps(j->scale * 1.44269504088896341f);
    for (int u = 0; u < nsub; u++) {
        const int64_t qs = q0 + u * ATT_BQ;
        nq[u] = nq_all - u * ATT_BQ < ATT_BQ ? nq_all - u * ATT_BQ : ATT_BQ;
        kend[u] = j->causal ? (qs + nq[u] < sk ? qs + nq[u] : sk) : sk;
        if (kend[u] > kend_max) kend_max = kend[u];
        for (int64_t i = 0; i < ATT_BQ; i++) {
            m[u][i] = -INFINITY, l[u][i] = 0;
            const float *qr = i < nq[u] ? mat_f32_row(&j->q, qs + i) + h * dh : NULL;
            for (int64_t d = 0; d < dh; d += 32) {
                __m512 lo = qr ? _mm512_mul_ps(_mm512_loadu_ps(qr + d), qscale) : _mm512_setzero_ps();
                __m512 hi = qr ? _mm512_mul_ps(_mm512_loadu_ps(qr + d + 16), qscale) : _mm512_setzero_ps();
                _mm512_storeu_si512(qb + (u * ATT_BQ + i) * dh + d, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
            }
        }
    }
    memset(Ob, 0, sizeof(float) * (size_t)(nsub * ATT_BQ * dh));
    amx_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) cfg.colsb[t] = 64, cfg.rows[t] = 16;
    amx_load_config(&cfg);
    const uint16_t *kp = j->kp + hk * j->sk_pad * dh, *vp = j->vp + hk * j->sk_pad * dh;
    const int64_t ostride = dh * 4, nc = dh / 32;
    /* 32-key chunks item (k0, u) needs: the last block (and the diagonal block when causal) may be short */
#define CHUNKS(k0, u) ((int)(((kend[u] - (k0) < BK ? kend[u] - (k0) : BK) + 31) / 32))
#define QB(u) (qb + (int64_t)(u) * ATT_BQ * dh)
    int64_t k0 = 0;
    int u = 0;
    while (u < nsub && kend[u] <= 0) u++; /* (only a causal sub-block with no rows could see no key) */
    if (u == nsub || kend_max <= 0) goto done;
    for (int g = 0; g < CHUNKS(0, u); g++) {
        score_issue(QB(u), kp, nc, dh, 0, g);
        score_store(Sb, g);
    }
    for (int64_t it = 0;; it++) {
        const int nch = CHUNKS(k0, u);
        float *S = Sb + (it & 1) * ATT_BQ * BK, *Sn = Sb + ((it + 1) & 1) * ATT_BQ * BK, *O = Ob + u * ATT_BQ * dh;
        /* the next item: the next sub-block that still sees keys in this block, else the next block */
        int64_t nk0 = k0;
        int nu = u;
        do {
            if (++nu == nsub) nu = 0, nk0 += BK;
        } while (nk0 < kend_max && nk0 >= kend[nu]);
        const bool has_next = nk0 < kend_max;
        /* the next item's scores are computed during this item's softmax: one pass issued, then 8 rows of
         * softmax on the vector units while the tile unit works, then the pass stored and the next issued.
         * They land in the other buffer, read one item later (vector loads cannot forward from tile stores) */
        const int nnext = has_next ? CHUNKS(nk0, nu) : 0;
        int pass = 0;
        if (nnext > 0) score_issue(QB(nu), kp, nc, dh, nk0, 0);
        /* which keys of the block exist and are not masked out: a 0 / -inf bias per key (only built for a block
         * that runs past the last key or has a key mask; full unmasked blocks skip the add) */
        float bias[BK] __attribute__((aligned(64)));
        const bool use_bias = k0 + BK > sk || j->mask;
        if (use_bias)
            for (int64_t c = 0; c < BK; c++) {
                int64_t key = k0 + c;
                bias[c] = key < sk && (!j->mask || j->mask[key]) ? 0.0f : -INFINITY;
            }
        const int64_t qs = q0 + u * ATT_BQ;
        for (int64_t i = 0; i < ATT_BQ; i++) {
            if (i < nq[u])
                softmax_row(S + i * BK, use_bias ? bias : NULL, j->causal ? qs + i - k0 : BK, nch, &m[u][i], &l[u][i],
                            O + i * dh, dh, P + i * BK);
            else
                memset(P + i * BK, 0, BK * 2);
            if ((i + 1) % (ATT_BQ * 32 / BK) == 0 && pass < nnext) {
                score_store(Sn, pass);
                if (++pass < nnext) score_issue(QB(nu), kp, nc, dh, nk0, pass);
            }
        }
        for (; pass < nnext; pass++) { /* BK / 32 passes fit the checkpoints; kept for other BK */
            score_store(Sn, pass);
            if (pass + 1 < nnext) score_issue(QB(nu), kp, nc, dh, nk0, pass + 1);
        }
        /* O += P V: output tiles (2 query halves x 2 dim slices of 16) accumulate in place */
        const uint16_t *vblk = vp + (k0 / 32) * (dh / 16) * 512;
        for (int64_t sl = 0; sl < dh / 16; sl += 2) {
            _tile_loadd(0, O + sl * 16, ostride);
            _tile_loadd(1, O + sl * 16 + 16, ostride);
            _tile_loadd(2, O + 16 * dh + sl * 16, ostride);
            _tile_loadd(3, O + 16 * dh + sl * 16 + 16, ostride);
            for (int64_t kc = 0; kc < nch; kc++) {
                const uint16_t *v0 = vblk + (kc * (dh / 16) + sl) * 512;
                _tile_loadd(4, P + kc * 32, BK * 2);
                _tile_loadd(6, v0, 64);
                _tile_dpbf16ps(0, 4, 6);
                _tile_loadd(7, v0 + 512, 64);
                _tile_dpbf16ps(1, 4, 7);
                _tile_loadd(5, P + 16 * BK + kc * 32, BK * 2);
                _tile_dpbf16ps(2, 5, 6);
                _tile_dpbf16ps(3, 5, 7);
            }
            _tile_stored(0, O + sl * 16, ostride);
            _tile_stored(1, O + sl * 16 + 16, ostride);
            _tile_stored(2, O + 16 * dh + sl * 16, ostride);
            _tile_stored(3, O + 16 * dh + sl * 16 + 16, ostride);
        }
        if (!has_next) break;
        k0 = nk0, u = nu;
    }
done:
#undef CHUNKS
#undef QB
    _tile_release();
    for (int w = 0; w < nsub; w++)
        for (int64_t i = 0; i < nq[w]; i++) {
            float *dst = mat_f32_row(&j->out, q0 + w * ATT_BQ + i) + h * dh, *O = Ob + (w * ATT_BQ + i) * dh;
            __m512 inv = _mm512_set1_ps(l[w][i] > 0 ? 1.0f / l[w][i] : 0.0f);
            for (int64_t d = 0; d < dh; d += 16) _mm512_storeu_ps(dst + d, _mm512_mul_ps(_mm512_loadu_ps(O + d), inv));
        }
}

/* attention_amx.c - FAST attention on AMX tiles (bf16 operands, f32 accumulation and f32 softmax).
 *
 * Before the tasks run, K and V of every kv head are converted once into bf16 B-tile layouts (att_amx_pack):
 *   K tile (16 keys, 32 dims):  row r = dims (2r, 2r+1) of each of the 16 keys   -> S = Q . K^T
 *   V tile (32 keys, 16 dims):  row r = keys (2r, 2r+1) for each of the 16 dims  -> O += P . V
 * That copy is 2 * Hkv * Sk * Dh bf16 - linear in the sequence, the only O(seq) memory besides the output.
 * A task holds ATT_BQ_AMX queries in sub-blocks of 32 (two 16-row tiles, bf16). For each (block of ATT_BK_AMX
 * keys, sub-block) item: scores S = Q K^T into an f32 [32][BK] buffer (2x2 tile blocking), an AVX-512
 * online-softmax pass that writes P in bf16 and rescales the f32 output rows in memory when the running max
 * rises, and O += P V with the O tiles loaded from and stored back to that memory. The tile products of the
 * neighbouring items run during each softmax pass (the tile queue below). */
#include <immintrin.h>
#include <math.h>

#include "compute/cpu/attention.h"
#include "compute/cpu/transpose_avx512.h"

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
    size_t q = (size_t)ATT_BQ_AMX * (size_t)dh * 2, s = (size_t)ATT_BQ * BK * 4 * 2, p = (size_t)ATT_BQ * BK * 2 * 2,
           o = (size_t)ATT_BQ_AMX * (size_t)dh * 4;
    return (q + s + p + o + 64 * 4 + 63) & ~(size_t)63;
}

/* 2^x on 16 lanes for the softmax: 2^x = 2^f * 2^floor(x) with f = x - floor(x) in [0, 1) from one
 * vreduceps, 2^f by a degree-3 polynomial (a least-squares fit of the relative error on [0, 1]: at most 7.5e-5
 * by tools/bench/exp2_fit_error.py, against up to 2.0e-3 when P is rounded to bf16 right after), and vscalefps, which floors its exponent operand itself,
 * applies 2^floor(x). Masked scores are -inf: vreduceps gives 0 for it and vscalefps(p, -inf) = 0. */
TARGET static inline __m512 exp2_512(__m512 x) {
    __m512 f = _mm512_reduce_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 p = _mm512_set1_ps(0.0780244693f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.226067305f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.695833445f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.999925256f));
    return _mm512_scalef_ps(p, x);
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
            __m512 rows[16]; /* tile row r = dim pair r of the 16 keys: the 16 x 16 words transposed in registers */
            transpose16((const float *)&tmp[0][0], rows);
            for (int r = 0; r < 16; r++) _mm512_storeu_ps((float *)(tile + r * 16), rows[r]);
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

/* The tile unit's work during one softmax pass, in k steps (one 2x2 step: 4 tile loads, 4 products). While
 * item t's softmax runs, O += P V of item t - 1 and S = Q K^T of item t + 1 are issued between its rows, about
 * one k step per row (the queue's steps spread evenly over the 32 rows), so that out-of-order execution can
 * run them beside the exponentials; O += P V of item t then waits for item t + 1's softmax. On this VM that
 * overlap is small: tile products and 512-bit FMAs overlap only in short bursts (tools/bench/amx_overlap.c),
 * and draining the whole queue before the rows measured the same (docs/cpu-backend.md, "Fourth pass"). The
 * queue holds, in order:
 *   - O += P V for the previous item: dh/32 slices of 2x2 output tiles (O loaded, nch k steps, O stored);
 *   - S = Q . K^T for the next item: one pass per 32 keys (C zeroed, dh/32 k steps, C stored into S).
 * A slice or pass keeps its C tiles across its k steps, so the two never interleave mid-way. */
typedef struct tile_queue {
    /* O += P V: P [32][BK] bf16, V tiles of the key block, O [32][dh] f32 */
    const uint16_t *p, *v;
    float *o;
    int pv_nch, pv_sl, pv_kc, pv_nsl;
    /* S = Q K^T: Q [32][dh] bf16, K tiles of the block, S [32][BK] f32 */
    const uint16_t *q, *k;
    float *s;
    int s_n, s_g, s_c;
    int64_t dh, nc; /* nc = dh / 32 */
} tile_queue;

static inline int tq_left(const tile_queue *t) {
    return (t->pv_nsl - t->pv_sl) * t->pv_nch - t->pv_kc + (t->s_n - t->s_g) * (int)t->nc - t->s_c;
}

TARGET static inline void tq_step(tile_queue *t) {
    const int64_t dh = t->dh;
    if (t->pv_sl < t->pv_nsl) {
        const int64_t sl = 2 * t->pv_sl, kc = t->pv_kc, ostride = dh * 4;
        float *o = t->o + sl * 16;
        if (kc == 0) {
            _tile_loadd(0, o, ostride);
            _tile_loadd(1, o + 16, ostride);
            _tile_loadd(2, o + 16 * dh, ostride);
            _tile_loadd(3, o + 16 * dh + 16, ostride);
        }
        const uint16_t *v0 = t->v + (kc * (dh / 16) + sl) * 512;
        _tile_loadd(4, t->p + kc * 32, BK * 2);
        _tile_loadd(6, v0, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_loadd(7, v0 + 512, 64);
        _tile_dpbf16ps(1, 4, 7);
        _tile_loadd(5, t->p + 16 * BK + kc * 32, BK * 2);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
        if (++t->pv_kc == t->pv_nch) {
            _tile_stored(0, o, ostride);
            _tile_stored(1, o + 16, ostride);
            _tile_stored(2, o + 16 * dh, ostride);
            _tile_stored(3, o + 16 * dh + 16, ostride);
            t->pv_kc = 0, t->pv_sl++;
        }
        return;
    }
    if (t->s_g < t->s_n) {
        const int64_t c = t->s_c, g = t->s_g, qstride = dh * 2;
        const uint16_t *kt0 = t->k + (2 * g * t->nc + c) * 512, *kt1 = kt0 + t->nc * 512;
        if (c == 0) {
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
        }
        _tile_loadd(4, t->q + c * 32, qstride);
        _tile_loadd(6, kt0, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_loadd(7, kt1, 64);
        _tile_dpbf16ps(1, 4, 7);
        _tile_loadd(5, t->q + 16 * dh + c * 32, qstride);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
        if (++t->s_c == t->nc) {
            float *s = t->s + g * 32;
            _tile_stored(0, s, BK * 4);
            _tile_stored(1, s + 16, BK * 4);
            _tile_stored(2, s + 16 * BK, BK * 4);
            _tile_stored(3, s + 16 * BK + 16, BK * 4);
            t->s_c = 0, t->s_g++;
        }
    }
}

/* Queues O += P V for keys [k0, k0 + 32 * nch) (pv_sl = pv_nsl: nothing) */
static inline void tq_set_pv(tile_queue *t, const uint16_t *p, const uint16_t *vp, int64_t k0, int nch, float *o) {
    t->p = p, t->v = vp + (k0 / 32) * (t->dh / 16) * 512, t->o = o;
    t->pv_nch = nch, t->pv_sl = 0, t->pv_kc = 0, t->pv_nsl = nch > 0 ? (int)(t->dh / 32) : 0;
}

/* Queues S = Q K^T for the first 32 * n keys from k0 */
static inline void tq_set_s(tile_queue *t, const uint16_t *q, const uint16_t *kp, int64_t k0, int n, float *s) {
    t->q = q, t->k = kp + (k0 / 16) * t->nc * 512, t->s = s;
    t->s_n = n, t->s_g = 0, t->s_c = 0;
}

TARGET static inline void tq_drain(tile_queue *t) {
    while (tq_left(t) > 0) tq_step(t);
}

/* One row of the online softmax over a block: P = 2^(S - m) in bf16 (2 * nch vectors of 16 keys), the row's
 * running sum (16 lanes, summed across lanes only at the end) and the O row updated. The running max m is
 * raised lazily: only when a score exceeds it by more than ATT_RESCALE_SLACK (base-2 units) are the sum and the
 * O row rescaled by 2^(m_old - m_new). Below that, P may reach 2^SLACK = 256: exact in f32 sums, and bf16's
 * relative precision does not depend on the scale. The result O / l is the same softmax; most blocks after the
 * first few skip the rescale of O entirely, and the common case needs no horizontal max: one compare of the
 * lane maxima against m + SLACK. lim: keys at column > lim are masked (causal); bias: 0 / -inf per key, or
 * NULL. */
TARGET static inline void softmax_row(const float *S, const float *bias, int64_t lim, int nch, float *m, float *lv,
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
    /* a finite m: masked keys (-inf) give 2^-inf = 0 below, so only a score above m + SLACK needs the slow path */
    if (*m == -INFINITY || _mm512_cmp_ps_mask(mx, _mm512_set1_ps(*m + ATT_RESCALE_SLACK), _CMP_GT_OQ)) {
        float bmax = _mm512_reduce_max_ps(mx);
        if (bmax == -INFINITY) { /* nothing visible yet: P row 0, O row unchanged */
            memset(P, 0, BK * 2);
            return;
        }
        if (*m != -INFINITY) { /* raise the running max: rescale the sum and the O row */
            __m512 cv = exp2_512(_mm512_set1_ps(*m - bmax)); /* vector exp2, no libm */
            _mm512_store_ps(lv, _mm512_mul_ps(_mm512_load_ps(lv), cv));
            for (int64_t d = 0; d < dh; d += 16) _mm512_storeu_ps(O + d, _mm512_mul_ps(_mm512_loadu_ps(O + d), cv));
        }
        *m = bmax;
    }
    __m512 mn = _mm512_set1_ps(*m), sum = _mm512_load_ps(lv);
    for (int b = 0; b < 2 * nch; b += 2) {
        __m512 e0 = exp2_512(_mm512_sub_ps(s[b], mn)), e1 = exp2_512(_mm512_sub_ps(s[b + 1], mn));
        sum = _mm512_add_ps(sum, _mm512_add_ps(e0, e1));
        _mm512_storeu_si512(P + 16 * b, (__m512i)_mm512_cvtne2ps_pbh(e1, e0));
    }
    _mm512_store_ps(lv, sum);
}

/* The key/value stream is the cost to manage: K and V of one head at 4,608 keys are 2.4 MB of bf16 - more than
 * L2 - and every pass over them comes from L3. A task therefore takes ATT_BQ_AMX queries (NSUB sub-blocks of
 * 32, each with its own running max, sum and output), and each key block (BK keys: 64 KB of K and V tiles) is
 * used by all sub-blocks while it sits in L2: a quarter of the L3 traffic of 32-query tasks, which left the
 * tile unit waiting on L3 at 1/4 of its rate even with the softmax removed. Work items are (key block,
 * sub-block) pairs in that order; the products of the items before and after run during each softmax pass
 * (the tile queue above). */
#define NSUB (ATT_BQ_AMX / ATT_BQ)

TARGET void att_task_amx(const att_job *j, int64_t h, int64_t q0, float *scratch) {
    const int64_t dh = j->dh, hk = h / (j->hq / j->hkv), sk = j->k.rows;
    const int64_t nq_all = j->q.rows - q0 < ATT_BQ_AMX ? j->q.rows - q0 : ATT_BQ_AMX;
    const int nsub = (int)((nq_all + ATT_BQ - 1) / ATT_BQ);
    uint16_t *qb = (uint16_t *)scratch;                      /* NSUB x [32][dh] bf16 */
    float *Sb = (float *)(qb + ATT_BQ_AMX * dh);             /* 2 x [32][BK] f32 (double buffer) */
    uint16_t *P = (uint16_t *)(Sb + 2 * ATT_BQ * BK);        /* 2 x [32][BK] bf16 (double buffer) */
    float *Ob = (float *)(P + 2 * ATT_BQ * BK);                  /* NSUB x [32][dh] f32 */
    float m[NSUB][ATT_BQ], l[NSUB][ATT_BQ][16] __attribute__((aligned(64))); /* l: 16 lanes per row */
    int64_t nq[NSUB], kend[NSUB], kend_max = 0;
    /* q is scaled by scale * log2(e) as it is rounded to bf16, so scores come out in base-2 exponent units */
    const __m512 qscale = _mm512_set1_ps(j->scale * 1.44269504088896341f);
    for (int u = 0; u < nsub; u++) {
        const int64_t qs = q0 + u * ATT_BQ;
        nq[u] = nq_all - u * ATT_BQ < ATT_BQ ? nq_all - u * ATT_BQ : ATT_BQ;
        kend[u] = j->causal ? (qs + nq[u] < sk ? qs + nq[u] : sk) : sk;
        if (kend[u] > kend_max) kend_max = kend[u];
        for (int64_t i = 0; i < ATT_BQ; i++) {
            m[u][i] = -INFINITY;
            memset(l[u][i], 0, sizeof l[u][i]);
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
    /* 32-key chunks item (k0, u) needs: the last block (and the diagonal block when causal) may be short */
#define CHUNKS(k0, u) ((int)(((kend[u] - (k0) < BK ? kend[u] - (k0) : BK) + 31) / 32))
#define QB(u) (qb + (int64_t)(u) * ATT_BQ * dh)
    tile_queue tq = {.dh = dh, .nc = dh / 32};
    int64_t k0 = 0;
    int u = 0;
    while (u < nsub && kend[u] <= 0) u++; /* (only a causal sub-block with no rows could see no key) */
    if (u == nsub || kend_max <= 0) goto done;
    tq_set_pv(&tq, NULL, vp, 0, 0, NULL);
    tq_set_s(&tq, QB(u), kp, 0, CHUNKS(0, u), Sb);
    tq_drain(&tq);
    for (int64_t it = 0;; it++) {
        const int nch = CHUNKS(k0, u);
        float *S = Sb + (it & 1) * ATT_BQ * BK, *Sn = Sb + ((it + 1) & 1) * ATT_BQ * BK, *O = Ob + u * ATT_BQ * dh;
        uint16_t *Pi = P + (it & 1) * ATT_BQ * BK;
        /* the next item: the next sub-block that still sees keys in this block, else the next block */
        int64_t nk0 = k0;
        int nu = u;
        do {
            if (++nu == nsub) nu = 0, nk0 += BK;
        } while (nk0 < kend_max && nk0 >= kend[nu]);
        const bool has_next = nk0 < kend_max;
        /* The queue already holds O += P V of the previous item (set at the end of the last iteration). Its
         * O rows may not be this item's: this softmax rescales O rows in memory, which must not happen while
         * the same rows sit in tiles - so with one sub-block the previous product finishes first. */
        if (tq.o == O) tq_drain(&tq);
        /* the next item's scores land in the other buffer, read one item later (vector loads cannot forward
         * from tile stores) */
        tq_set_s(&tq, QB(has_next ? nu : u), kp, nk0, has_next ? CHUNKS(nk0, nu) : 0, Sn);
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
        /* the next key block's K and V tiles into L2, spread over this block's items */
        const int64_t blk_bytes = BK * dh * 2, pf_per_item = blk_bytes / 64 / nsub;
        const char *pfk = k0 + BK < kend_max ? (const char *)(kp + (k0 + BK) * dh) + u * pf_per_item * 64 : NULL;
        const char *pfv = pfk ? (const char *)(vp + (k0 + BK) * dh) + u * pf_per_item * 64 : NULL;
        for (int64_t i = 0; i < ATT_BQ; i++) {
            if (pfk)
                for (int64_t c = i * pf_per_item / ATT_BQ; c < (i + 1) * pf_per_item / ATT_BQ; c++) {
                    _mm_prefetch(pfk + c * 64, _MM_HINT_T1);
                    _mm_prefetch(pfv + c * 64, _MM_HINT_T1);
                }
            if (i < nq[u])
                softmax_row(S + i * BK, use_bias ? bias : NULL, j->causal ? qs + i - k0 : BK, nch, &m[u][i], l[u][i],
                            O + i * dh, dh, Pi + i * BK);
            else
                memset(Pi + i * BK, 0, BK * 2);
            /* spread the queue evenly over the rows left */
            for (int n = (tq_left(&tq) + (int)(ATT_BQ - 1 - i)) / (int)(ATT_BQ - i); n > 0; n--) tq_step(&tq);
        }
        tq_drain(&tq);
        tq_set_pv(&tq, Pi, vp, k0, nch, O);
        if (!has_next) break;
        k0 = nk0, u = nu;
    }
    tq_drain(&tq);
done:
#undef CHUNKS
#undef QB
    _tile_release();
    for (int w = 0; w < nsub; w++)
        for (int64_t i = 0; i < nq[w]; i++) {
            float *dst = mat_f32_row(&j->out, q0 + w * ATT_BQ + i) + h * dh, *O = Ob + (w * ATT_BQ + i) * dh;
            const float li = _mm512_reduce_add_ps(_mm512_load_ps(l[w][i]));
            __m512 inv = _mm512_set1_ps(li > 0 ? 1.0f / li : 0.0f);
            for (int64_t d = 0; d < dh; d += 16) _mm512_storeu_ps(dst + d, _mm512_mul_ps(_mm512_loadu_ps(O + d), inv));
        }
}

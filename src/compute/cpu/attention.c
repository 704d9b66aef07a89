/* attention.c - multi-head attention with an online softmax (flash-attention style): for each head and each
 * block of ATT_BQ queries, keys are visited in blocks of ATT_BK; a running max m, running sum l and the
 * unnormalised output O are rescaled as each block arrives, so only ATT_BQ x ATT_BK scores exist at a time
 * (O(seq) extra memory, never the Sq x Sk matrix). GQA: query head h reads kv head h / (Hq / Hkv).
 * Masks: causal (key j visible to query i iff j <= i) and a u8/bool key mask (0 = excluded); a query that sees
 * no key gets zeros. An additive bias (f32 [Hq*Sq, Sk], T5's relative positions) joins each score before the
 * softmax: every kernel adds its row while the block's scores are formed, so it costs one read of the table. */
#include <math.h>

#include "compute/cpu/attention.h"

size_t att_scratch_f32(int64_t dh) { /* packed Q, O, the score block and the block's key mask */
    return ((size_t)(2 * ATT_BQ_F32 * dh + ATT_BQ_F32 * ATT_BKP + ATT_BK) * sizeof(float) + 63) & ~(size_t)63;
}

/* Per call, not per task: every query block of a head reads the same keys and values. A scalar transpose of K
 * per task cost as much as the score products themselves; V rows read in place lie a whole fused-QKV row apart
 * (36 KB in the DiT), a different page for every key, and the P V loop stalled on them (half of its time by
 * perf), so V is copied into contiguous rows per kv head. */
void att_f32_pack_kv(const att_job *j, int64_t hk, int64_t k0) {
    const int64_t dh = j->dh;
    float *kt = j->kt + (hk * j->sk_pad + k0) * dh, *vc = j->vc + (hk * j->sk_pad + k0) * dh;
    for (int64_t c = 0; c < ATT_BK; c++) {
        const bool in = k0 + c < j->k.rows;
        const float *kr = in ? mat_f32_row(&j->k, k0 + c) + hk * dh : NULL;
        for (int64_t d = 0; d < dh; d++) kt[d * ATT_BK + c] = in ? kr[d] : 0.0f;
        if (in) memcpy(vc + c * dh, mat_f32_row(&j->v, k0 + c) + hk * dh, sizeof(float) * (size_t)dh);
        else memset(vc + c * dh, 0, sizeof(float) * (size_t)dh);
    }
}

/* The portable reference kernel: any dh, plain loops. */
void att_task_scalar(const att_job *j, int64_t h, int64_t q0, float *scratch) {
    int64_t nq = j->q.rows - q0 < ATT_BQ ? j->q.rows - q0 : ATT_BQ, dh = j->dh, hk = h / (j->hq / j->hkv);
    float *o = scratch;        /* [ATT_BQ][dh] */
    float *s = o + ATT_BQ * dh; /* [ATT_BQ][ATT_BK] */
    float m[ATT_BQ], l[ATT_BQ];
    for (int64_t i = 0; i < nq; i++) {
        m[i] = -INFINITY;
        l[i] = 0;
    }
    memset(o, 0, sizeof(float) * (size_t)(ATT_BQ * dh));
    int64_t sk = j->k.rows, kend = j->causal ? (q0 + nq < sk ? q0 + nq : sk) : sk;
    for (int64_t k0 = 0; k0 < kend; k0 += ATT_BK) {
        int64_t nk = kend - k0 < ATT_BK ? kend - k0 : ATT_BK;
        for (int64_t i = 0; i < nq; i++) {
            const float *qi = mat_f32_row(&j->q, q0 + i) + h * dh;
            const float *bi = j->bias ? j->bias + (h * j->q.rows + q0 + i) * j->bias_ld : NULL;
            float *si = s + i * ATT_BK, bmax = -INFINITY;
            for (int64_t c = 0; c < nk; c++) {
                int64_t key = k0 + c;
                if ((j->causal && key > q0 + i) || (j->mask && !j->mask[key])) {
                    si[c] = -INFINITY;
                    continue;
                }
                const float *kc = mat_f32_row(&j->k, key) + hk * dh;
                float d = 0;
                for (int64_t e = 0; e < dh; e++) d += qi[e] * kc[e];
                si[c] = d * j->scale;
                if (bi) si[c] += bi[key]; /* -inf: the key is excluded, as by the mask */
                bmax = si[c] > bmax ? si[c] : bmax;
            }
            if (bmax == -INFINITY) continue; /* nothing visible in this block */
            float mnew = bmax > m[i] ? bmax : m[i], corr = expf(m[i] - mnew), sum = 0;
            float *oi = o + i * dh;
            if (corr != 1.0f) {
                for (int64_t e = 0; e < dh; e++) oi[e] *= corr;
            }
            for (int64_t c = 0; c < nk; c++) {
                float p = expf(si[c] - mnew); /* exp(-inf) = 0 for masked keys */
                sum += p;
                if (p == 0.0f) continue;
                const float *vc = mat_f32_row(&j->v, k0 + c) + hk * dh;
                for (int64_t e = 0; e < dh; e++) oi[e] += p * vc[e];
            }
            l[i] = l[i] * corr + sum;
            m[i] = mnew;
        }
    }
    for (int64_t i = 0; i < nq; i++) {
        float *dst = mat_f32_row(&j->out, q0 + i) + h * dh, inv = l[i] > 0 ? 1.0f / l[i] : 0.0f;
        for (int64_t e = 0; e < dh; e++) dst[e] = o[i * dh + e] * inv;
    }
}

typedef struct att_run {
    const att_job *j;
    void (*task)(const att_job *, int64_t, int64_t, float *);
} att_run;

static void run_task(void *ctx, size_t t, int thread) {
    const att_run *r = ctx;
    const att_job *j = r->j;
    r->task(j, (int64_t)t / j->nqb, ((int64_t)t % j->nqb) * j->bq, (float *)(j->scratch + (size_t)thread * j->per_thread));
}

static void pack_task(void *ctx, size_t t, int thread) {
    const att_job *j = ctx;
    if (j->kt) {
        int64_t nblk = j->sk_pad / ATT_BK, hk = (int64_t)t / nblk, b = (int64_t)t % nblk;
        att_f32_pack_kv(j, hk, b * ATT_BK);
        return;
    }
    int64_t nblk = j->sk_pad / ATT_BK_AMX, hk = (int64_t)t / nblk, b = (int64_t)t % nblk;
    att_amx_pack(j, hk, b * ATT_BK_AMX, (b + 1) * ATT_BK_AMX);
}

kiln_status cpu_attention(kiln_backend *be, kiln_tensor *out, const kiln_tensor *q, const kiln_tensor *k,
                          const kiln_tensor *v, int n_q_heads, int n_kv_heads, float scale, bool causal,
                          const kiln_tensor *key_mask, const kiln_tensor *bias, kiln_err *err) {
    kiln_cpu_backend *cb = cpu_be(be);
    att_job j = {.hq = n_q_heads, .hkv = n_kv_heads, .scale = scale, .causal = causal};
    KILN_TRY(cpu_as_mat(out, KILN_DT_F32, "attention", "out", &j.out, err));
    KILN_TRY(cpu_as_mat(q, KILN_DT_F32, "attention", "q", &j.q, err));
    KILN_TRY(cpu_as_mat(k, KILN_DT_F32, "attention", "k", &j.k, err));
    KILN_TRY(cpu_as_mat(v, KILN_DT_F32, "attention", "v", &j.v, err));
    if (n_q_heads < 1 || n_kv_heads < 1 || n_q_heads % n_kv_heads)
        return KILN_FAIL(err, KILN_E_INVALID, "attention: %d query heads do not group over %d kv heads", n_q_heads,
                         n_kv_heads);
    if (j.q.cols % n_q_heads)
        return KILN_FAIL(err, KILN_E_INVALID, "attention: q width %lld is not %d heads", (long long)j.q.cols, n_q_heads);
    j.dh = j.q.cols / n_q_heads;
    if (j.k.cols != j.dh * n_kv_heads || j.v.cols != j.k.cols || j.k.rows != j.v.rows)
        return KILN_FAIL(err, KILN_E_INVALID, "attention: k/v must both be [Sk, %lld], got [%lld, %lld] and [%lld, %lld]",
                         (long long)(j.dh * n_kv_heads), (long long)j.k.rows, (long long)j.k.cols,
                         (long long)j.v.rows, (long long)j.v.cols);
    if (j.out.rows != j.q.rows || j.out.cols != j.q.cols)
        return KILN_FAIL(err, KILN_E_INVALID, "attention: out must have q's shape");
    if (key_mask) {
        if (key_mask->backend != KILN_BACKEND_CPU || (key_mask->dtype != KILN_DT_U8 && key_mask->dtype != KILN_DT_BOOL) ||
            kiln_tensor_numel(key_mask) != j.k.rows || !kiln_tensor_is_contiguous(key_mask))
            return KILN_FAIL(err, KILN_E_INVALID, "attention: key_mask must be a contiguous u8/bool [%lld]",
                             (long long)j.k.rows);
        j.mask = key_mask->data;
    }
    if (bias) {
        cpu_mat bm;
        KILN_TRY(cpu_as_mat(bias, KILN_DT_F32, "attention", "bias", &bm, err));
        if (bm.rows != (int64_t)n_q_heads * j.q.rows || bm.cols != j.k.rows || (bm.rows > 1 && bm.ld != bm.cols))
            return KILN_FAIL(err, KILN_E_INVALID,
                             "attention: bias must be a contiguous f32 [%lld, %lld] (%d heads x %lld queries, %lld "
                             "keys), got [%lld, %lld] with row stride %lld",
                             (long long)n_q_heads * j.q.rows, (long long)j.k.rows, n_q_heads, (long long)j.q.rows,
                             (long long)j.k.rows, (long long)bm.rows, (long long)bm.cols, (long long)bm.ld);
        j.bias = (const float *)bm.data;
        j.bias_ld = bm.cols;
    }
    if (j.q.rows == 0 || j.dh == 0) return KILN_OK;
    j.bq = ATT_BQ;
    att_run r = {&j, att_task_scalar};
    /* kernel choice: AMX for FAST when the head size fits whole tiles; else the f32 vector kernel of the tier.
     * With a bias the f32 vector kernel runs instead of AMX: the AMX kernel has no bias path, because no machine
     * that builds and tests kiln has AMX (its code would ship unrun), and the one model with a bias, T5, spends
     * a few per cent of its encode in attention (64-wide heads over 512 tokens, next to 4096 x 10240 GEMMs). */
    bool amx = cb->tier >= KILN_CPU_AMX && be->precision == KILN_PREC_FAST && j.dh % 32 == 0 && j.dh <= 512 &&
               j.k.rows > 0 && !j.bias;
    size_t pack_bytes = 0;
    bool f32 = false;
    if (amx) {
        r.task = att_task_amx;
        j.bq = ATT_BQ_AMX;
        j.per_thread = att_scratch_amx(j.dh);
        j.sk_pad = (j.k.rows + ATT_BK_AMX - 1) / ATT_BK_AMX * ATT_BK_AMX;
        pack_bytes = (size_t)(2 * n_kv_heads * j.sk_pad * j.dh) * sizeof(uint16_t);
    } else if (j.dh % 16 == 0 && j.dh <= 512) {
        r.task = cb->tier >= KILN_CPU_AVX512 ? att_task_f32_avx512
                 : cb->tier >= KILN_CPU_AVX2 ? att_task_f32_avx2
                                              : att_task_f32_generic;
        f32 = true;
        j.bq = ATT_BQ_F32;
        j.per_thread = att_scratch_f32(j.dh);
        j.sk_pad = (j.k.rows + ATT_BK - 1) / ATT_BK * ATT_BK;
        pack_bytes = (size_t)(2 * n_kv_heads * j.sk_pad * j.dh) * sizeof(float);
    } else {
        j.per_thread = ((size_t)ATT_BQ * (size_t)(j.dh + ATT_BK) * sizeof(float) + 63) & ~(size_t)63;
    }
    j.nqb = (j.q.rows + j.bq - 1) / j.bq;
    void *s;
    KILN_TRY(cpu_scratch(cb, j.per_thread * (size_t)cb->n_threads + pack_bytes, &s, err));
    j.scratch = s;
    if (amx) { /* bf16 K and V tiles of every kv head: O(seq) memory, built once, read by every query block */
        j.kp = (uint16_t *)(j.scratch + j.per_thread * (size_t)cb->n_threads);
        j.vp = j.kp + n_kv_heads * j.sk_pad * j.dh;
        kiln_pool_run(cb->pool, (size_t)(n_kv_heads * (j.sk_pad / ATT_BK_AMX)), pack_task, &j);
    } else if (f32) { /* K transposed per key block and V in rows: O(seq) memory, built once, read by every task */
        j.kt = (float *)(j.scratch + j.per_thread * (size_t)cb->n_threads);
        j.vc = j.kt + n_kv_heads * j.sk_pad * j.dh;
        kiln_pool_run(cb->pool, (size_t)(n_kv_heads * (j.sk_pad / ATT_BK)), pack_task, &j);
    }
    kiln_pool_run(cb->pool, (size_t)(n_q_heads * j.nqb), run_task, &r);
    return KILN_OK;
}

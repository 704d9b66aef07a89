/* attention.c - multi-head attention with an online softmax (flash-attention style): for each head and each
 * block of ATT_BQ queries, keys are visited in blocks of ATT_BK; a running max m, running sum l and the
 * unnormalised output O are rescaled as each block arrives, so only ATT_BQ x ATT_BK scores exist at a time
 * (O(seq) extra memory, never the Sq x Sk matrix). GQA: query head h reads kv head h / (Hq / Hkv).
 * Masks: causal (key j visible to query i iff j <= i) and a u8/bool key mask (0 = excluded); a query that sees
 * no key gets zeros. */
#include <math.h>

#include "compute/cpu/cpu_internal.h"

#define ATT_BQ 32
#define ATT_BK 64

typedef struct att_job {
    cpu_mat out, q, k, v;
    const uint8_t *mask;
    int64_t hq, hkv, dh, nqb;
    float scale;
    bool causal;
    char *scratch;
    size_t per_thread;
} att_job;

static void att_task(void *ctx, size_t t, int thread) {
    const att_job *j = ctx;
    int64_t h = (int64_t)t / j->nqb, q0 = ((int64_t)t % j->nqb) * ATT_BQ;
    int64_t nq = j->q.rows - q0 < ATT_BQ ? j->q.rows - q0 : ATT_BQ, dh = j->dh, hk = h / (j->hq / j->hkv);
    float *o = (float *)(j->scratch + (size_t)thread * j->per_thread); /* [ATT_BQ][dh] */
    float *s = o + ATT_BQ * dh;                                          /* [ATT_BQ][ATT_BK] */
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

kiln_status cpu_attention(kiln_backend *be, kiln_tensor *out, const kiln_tensor *q, const kiln_tensor *k,
                          const kiln_tensor *v, int n_q_heads, int n_kv_heads, float scale, bool causal,
                          const kiln_tensor *key_mask, kiln_err *err) {
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
    if (j.q.rows == 0 || j.dh == 0) return KILN_OK;
    j.nqb = (j.q.rows + ATT_BQ - 1) / ATT_BQ;
    j.per_thread = ((size_t)ATT_BQ * (size_t)(j.dh + ATT_BK) * sizeof(float) + 63) & ~(size_t)63;
    void *s;
    KILN_TRY(cpu_scratch(cb, j.per_thread * (size_t)cb->n_threads, &s, err));
    j.scratch = s;
    kiln_pool_run(cb->pool, (size_t)(n_q_heads * j.nqb), att_task, &j);
    return KILN_OK;
}

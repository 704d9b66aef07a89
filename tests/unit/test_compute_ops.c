/* test_compute_ops.c - every CPU op against a plain float64 reference, on every instruction-set tier this
 * machine has (KILN_CPU=generic|avx2|avx512|amx), in both precisions where they differ.
 *
 * Inputs are random in [-1, 1) with awkward sizes (not multiples of any tile: 1, 7, 33, 513 ...); outputs are
 * poisoned with NaN first, so an element the op forgets to write fails the comparison. Tolerances are stated
 * per op next to the check: f32 accumulation error is bounded relative to sum |a*b| of the dot product. */
#include <stdint.h>
#include <stdlib.h>

#include "compute/cpu/cpu_internal.h"
#include "compute/ops.h"
#include "test.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}
static float *randf(int64_t n) {
    float *p = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) p[i] = frand();
    return p;
}
static float *nanf_buf(int64_t n) { /* 64-byte aligned, so kernels' aligned (e.g. streaming-store) paths run */
    float *p = aligned_alloc(64, (sizeof(float) * (size_t)(n ? n : 1) + 63) & ~(size_t)63);
    for (int64_t i = 0; i < n; i++) p[i] = NAN;
    return p;
}
static uint16_t *to_bf16(const float *x, int64_t n) {
    uint16_t *p = malloc(2 * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) p[i] = f32_to_bf16(x[i]);
    return p;
}
static kiln_tensor t2(void *d, kiln_dtype dt, int64_t r, int64_t c) { return kiln_tensor_make(d, dt, 2, (int64_t[]){r, c}); }
static kiln_tensor t1(void *d, kiln_dtype dt, int64_t n) { return kiln_tensor_make(d, dt, 1, (int64_t[]){n}); }
static kiln_tensor t4(void *d, int64_t n, int64_t c, int64_t h, int64_t w) {
    return kiln_tensor_make(d, KILN_DT_F32, 4, (int64_t[]){n, c, h, w});
}
/* A [r, c] view at column c0 of a wider [r, ld] buffer. */
static kiln_tensor view(float *base, int64_t r, int64_t c, int64_t ld, int64_t c0) {
    kiln_tensor t = t2(base + c0, KILN_DT_F32, r, c);
    t.stride[0] = ld;
    return t;
}

/* max |got - want| / (tol_abs + tol_rel * scale_i) over n elements: <= 1 passes. NaN fails. */
static double worst(const float *got, const double *want, const double *scale, int64_t n, double tol_abs,
                    double tol_rel) {
    double w = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]) / (tol_abs + tol_rel * (scale ? scale[i] : fabs(want[i])));
        if (!(e <= w)) w = isnan(e) ? INFINITY : e;
    }
    return w;
}

static kiln_backend *be;

/* Fills the backend's scratch with NaN bytes: a kernel that reads scratch it did not write in this call (what an
 * earlier op or another thread's task left there) then gives NaN or a wrong value instead of passing by luck.
 * The FAST VAE decode once differed at 3+ threads because the f32 attention's softmax read the stale score
 * columns past a short last key block (docs/pitfalls.md O2). 16 MB covers the shapes here but the largest
 * matmuls, whose bigger scratch is then fresh memory. */
static void poison_scratch(void) {
    kiln_cpu_backend *cb = cpu_be(be);
    void *p;
    kiln_err e = {0};
    if (cpu_scratch(cb, (size_t)16 << 20, &p, &e) == KILN_OK) memset(cb->scratch, 0xff, cb->scratch_cap);
}

static kiln_cpu_tier tier;
#define ERR_OK(expr)                                                                                          \
    do {                                                                                                      \
        kiln_err e_ = {0};                                                                                    \
        kiln_err *err = &e_;                                                                                  \
        kiln_status s_ = (expr);                                                                              \
        CHECK_MSG(s_ == KILN_OK, "%s: %s", #expr, e_.msg);                                                    \
    } while (0)

/* ---------------------------------------------------------------------------------------------------- */
static void check_matmul(int64_t M, int64_t N, int64_t K, bool wbf, int biaskind, kiln_epilogue_kind epi,
                         kiln_precision prec, bool strided) {
    int64_t ldx = strided ? K + 5 : K, ldy = strided ? N + 3 : N;
    float *x = randf(M * ldx), *wf = randf(N * K), *b = randf(N), *gate = randf(N), *y = nanf_buf(M * ldy);
    float *y0 = randf(M * ldy);
    uint16_t *wb = to_bf16(wf, N * K), *bb = to_bf16(b, N);
    if (wbf)
        for (int64_t i = 0; i < N * K; i++) wf[i] = bf16_to_f32(wb[i]);
    if (biaskind == 2)
        for (int64_t i = 0; i < N; i++) b[i] = bf16_to_f32(bb[i]);
    if (epi != KILN_EPI_NONE) memcpy(y, y0, sizeof(float) * (size_t)(M * ldy));
    bool fast = prec == KILN_PREC_FAST && wbf;
    double *want = malloc(sizeof(double) * (size_t)(M * N)), *scale = malloc(sizeof(double) * (size_t)(M * N));
    float *got = malloc(sizeof(float) * (size_t)(M * N));
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double s = 0, a = 0;
            for (int64_t k = 0; k < K; k++) {
                double xv = fast ? round_bf16(x[m * ldx + k]) : x[m * ldx + k];
                s += xv * wf[n * K + k];
                a += fabs(xv * wf[n * K + k]);
            }
            if (biaskind) s += b[n], a += fabs(b[n]);
            double r = y0[m * ldy + n];
            if (epi == KILN_EPI_NONE) r = s;
            else if (epi == KILN_EPI_ADD) r += s, a += fabs(y0[m * ldy + n]);
            else r += gate[n] * s, a = fabs(gate[n]) * a + fabs(y0[m * ldy + n]);
            want[m * N + n] = r;
            scale[m * N + n] = a;
        }
    kiln_tensor xt = view(x, M, K, ldx, 0), yt = view(y, M, N, ldy, 0);
    kiln_tensor wt = wbf ? t2(wb, KILN_DT_BF16, N, K) : t2(wf, KILN_DT_F32, N, K);
    kiln_tensor bt = biaskind == 2 ? t1(bb, KILN_DT_BF16, N) : t1(b, KILN_DT_F32, N), gt = t1(gate, KILN_DT_F32, N);
    kiln_epilogue e = {epi, &gt};
    be->precision = prec;
    poison_scratch();
    ERR_OK(kiln_matmul_epi(be, &yt, &xt, &wt, biaskind ? &bt : NULL, &e, err));
    be->precision = KILN_PREC_FAST;
    for (int64_t m = 0; m < M; m++) memcpy(got + m * N, y + m * ldy, sizeof(float) * (size_t)N);
    /* f32 accumulation: |err| <= 1e-5 * sum|x w| (+1e-6); FAST compares to bf16-rounded x, so the same bound */
    double wv = worst(got, want, scale, M * N, 1e-6, 1e-5);
    CHECK_MSG(wv <= 1, "matmul %s M=%lld N=%lld K=%lld w=%s bias=%d epi=%d prec=%d strided=%d: err %.3g x tol",
              kiln_cpu_tier_name(tier), (long long)M, (long long)N, (long long)K, wbf ? "bf16" : "f32", biaskind,
              (int)epi, (int)prec, (int)strided, wv);
    /* the padding columns of strided y are never written */
    if (strided && epi == KILN_EPI_NONE)
        for (int64_t m = 0; m < M; m++) CHECK(isnan(y[m * ldy + N]));
    free(x), free(wf), free(b), free(gate), free(y), free(y0), free(wb), free(bb), free(want), free(scale), free(got);
}

static void test_matmul(void) {
    static const int64_t shapes[][3] = {{1, 1, 1},   {7, 13, 33},  {37, 70, 96},  {65, 64, 128},
                                        {33, 32, 64}, {70, 96, 160}, {130, 160, 257}, {513, 64, 96}, {5, 300, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int prec = 0; prec < 2; prec++)
            for (int wbf = 0; wbf < 2; wbf++)
                check_matmul(shapes[s][0], shapes[s][1], shapes[s][2], wbf, (int)(s % 3), (kiln_epilogue_kind)(s % 3),
                             (kiln_precision)prec, s % 2);
    check_matmul(40, 64, 64, true, 1, KILN_EPI_GATED_RESIDUAL, KILN_PREC_FAST, true);
    check_matmul(40, 64, 64, true, 2, KILN_EPI_ADD, KILN_PREC_FAST, false);
    check_matmul(0, 64, 64, true, 0, KILN_EPI_NONE, KILN_PREC_FAST, false);
    check_matmul(3, 32, 0, true, 1, KILN_EPI_NONE, KILN_PREC_FAST, false);
    /* packed kernel (vector tiers, and the AMX tier when N % 32 != 0): three row blocks; then x in two row
     * chunks (K = 12288: 960 rows of f32 per 48 MB chunk) */
    check_matmul(1700, 40, 40, true, 1, KILN_EPI_GATED_RESIDUAL, KILN_PREC_FAST, true);
    check_matmul(1100, 8, 12288, true, 2, KILN_EPI_ADD, KILN_PREC_FAST, false);
    /* AMX: several K slices of unequal length, two column blocks (256 + 64), rows not a multiple of 32 */
    check_matmul(45, 320, 3200, true, 1, KILN_EPI_NONE, KILN_PREC_FAST, false);
    check_matmul(45, 320, 3200, true, 2, KILN_EPI_GATED_RESIDUAL, KILN_PREC_FAST, true);
    check_matmul(33, 288, 1600, true, 0, KILN_EPI_ADD, KILN_PREC_FAST, false);
    check_matmul(20, 40, 7, true, 1, KILN_EPI_NONE, KILN_PREC_FAST, false); /* odd K: the bf16 pairs' tail */
    /* shape errors */
    float buf[64] = {0};
    kiln_tensor x = t2(buf, KILN_DT_F32, 2, 4), w = t2(buf, KILN_DT_F32, 3, 5), y = t2(buf, KILN_DT_F32, 2, 3);
    kiln_err err = {0};
    CHECK(kiln_matmul(be, &y, &x, &w, NULL, &err) == KILN_E_INVALID);
    CHECK_ERR_CONTAINS(&err, "do not chain");
    kiln_tensor wi = t2(buf, KILN_DT_I32, 3, 4);
    CHECK(kiln_matmul(be, &y, &x, &wi, NULL, &err) == KILN_E_UNSUPPORTED);
}

/* ---------------------------------------------------------------------------------------------------- */
/* key_ramp > 0 scales key j by 1 + key_ramp * j / sk: scores then grow along the keys, so the running max of
 * an online softmax keeps rising from block to block (its rescale path runs, not only the first block's).
 *
 * The reference is float64 on exactly the operands the kernel multiplies, and the bound is derived from what the
 * kernel rounds (u = 2^-24, gamma(n) = n u / (1 - n u), scores s_j in base-2 units, weights w_j = 2^(s_j - max)):
 * - Which kernel runs is attention.c's choice: the AMX one for FAST when the tier has AMX and the head is whole
 *   32-wide tiles (it takes q * (scale log2 e) rounded to bf16 as it is scaled, and k, v rounded to bf16, so the
 *   reference does too: products of bf16 are exact in f32); every other case runs an f32 kernel (the vector
 *   ones, or the scalar one when dh % 16 != 0) on the f32 operands.
 * - Score: |ds_j| <= gamma(dh + 4) a_j, a_j = sum_e |q_e k_e| (base 2): dh additions, plus for f32 the
 *   roundings of scale log2 e, q times it and each product (AMX: gamma(dh), its products are exact).
 * - s - m: one rounding, u (|s_j - max| + 8 + ds_j) (the running max lags the true one by at most the kernels'
 *   slack of 8). 2^x: AMX's cubic, 7.5e-5 relative (7.49e-5 with its f32 evaluation, on a 2e6-point grid of
 *   [0, 1]); the f32 kernels' degree-6 Taylor 1.2e-7 plus Horner's roundings, 12 of terms at most twice the
 *   result, 24u (libm expf in the scalar kernel is within 1 ulp). A rescale multiplies O and l by the same
 *   factor, so its own error cancels. Each weight's factor w'/w therefore lies within 1 +- eps_j, eps_j =
 *   expm1(ln 2 (ds_j + sub_j) + exp_err), and the weighted mean moves by at most
 *   sum_j w_j eps_j |v_j - out| / ((1 - max eps) sum_j w_j)  (since sum_j w_j (v_j - out) = 0).
 * - AMX rounds P to bf16 (relative 2^-8) for P V while its sum l adds the unrounded P: at most
 *   2^-8 sum_j w'_j |v_j| / sum_j w'_j more.
 * - Accumulation of P V and of l in f32 (sk terms and a rescale per 128-key block, any order):
 *   gamma(N) relative to sum P|v| and to sum P, so 2 gamma(N) M1 with M1 = the weighted mean of |v|; then
 *   1 / l and the product, 2u |out|.
 * - An additive bias b_j (biaskind 1: uniform in [-4, 4); 2: the same with -inf entries - every 7th key, and
 *   every key of query 3 - which exclude keys as the mask does; ops.h) joins the score in base-2 units,
 *   b_j log2 e: its own rounding (the f32 kernels multiply it by log2 e in f32: 2u) and the addition's
 *   (u |s_j + b_j|) add u (a_j + 3 |b_j log2 e|) to ds_j. With a bias the AMX kernel is not used (attention.c).
 * This is a worst case (rounding errors at their largest and all of one sign); what it admits is 1e-3 for
 * AMX (mostly P's rounding) and ~1e-5 for f32, where a wrong rescale, a causal limit off by one or a missing
 * normalisation moves outputs by 1e-2 to 1 (and a bias not added, or added in the wrong units, by 1e-1 to 1).
 * scale 0: 1/sqrt(dh); T5 runs 1. */
static void check_attention_full(int64_t sq, int64_t sk, int hq, int hkv, int64_t dh, bool causal, int maskkind,
                                 kiln_precision prec, float key_ramp, float scale, int biaskind) {
    int64_t dq = hq * dh, dkv = hkv * dh;
    /* q, k, v as column blocks of fused [S, dq + 2 dkv] buffers (strided views), queries and keys separately */
    int64_t ldq = dq + 2 * dkv;
    float *fq = randf(sq * ldq), *fk = randf(sk * ldq), *out = nanf_buf(sq * dq);
    for (int64_t i = 0; i < sq * ldq; i++) fq[i] *= 2.0f; /* some peaked softmaxes */
    for (int64_t j = 0; j < sk; j++)
        for (int64_t e = 0; e < dkv; e++) fk[j * ldq + dq + e] *= 1.0f + key_ramp * (float)j / (float)sk;
    uint8_t *mask = malloc((size_t)(sk ? sk : 1));
    for (int64_t j = 0; j < sk; j++) mask[j] = maskkind == 1 ? (j % 3 != 1) : maskkind == 2 ? (j >= 2) : 1;
    kiln_tensor q = view(fq, sq, dq, ldq, 0), k = view(fk, sk, dkv, ldq, dq), v = view(fk, sk, dkv, ldq, dq + dkv);
    kiln_tensor o = t2(out, KILN_DT_F32, sq, dq), mt = t1(mask, KILN_DT_U8, sk);
    float *bias = biaskind ? randf(hq * sq * sk) : NULL; /* [hq * sq, sk]: row h * sq + i */
    for (int64_t r = 0; bias && r < hq * sq; r++)
        for (int64_t j = 0; j < sk; j++) {
            float *b = &bias[r * sk + j];
            *b *= 4.0f;
            if (biaskind == 2 && (j % 7 == 3 || r % sq == 3)) *b = -INFINITY;
        }
    kiln_tensor bt = t2(bias, KILN_DT_F32, hq * sq, sk);
    if (scale == 0) scale = 1.0f / sqrtf((float)dh);
    be->precision = prec;
    poison_scratch();
    ERR_OK(be->ops->attention(be, &o, &q, &k, &v, hq, hkv, scale, causal, maskkind ? &mt : NULL, bias ? &bt : NULL,
                              err));
    be->precision = KILN_PREC_FAST;

    const bool amx = tier >= KILN_CPU_AMX && prec == KILN_PREC_FAST && dh % 32 == 0 && dh <= 512 && sk > 0 && !bias;
    const double u = 0x1p-24, log2e = 1.4426950408889634;
    const float qscale = scale * 1.44269504088896341f; /* the AMX kernel's factor, in f32 as it computes it */
    const double exp_err = amx ? 7.5e-5 : 1.2e-7 + 24 * u, p_round = amx ? 0x1p-8 : 0;
    const int64_t nacc = sk + sk / 128 + 2;
    const double gamma_s = (double)(amx ? dh : dh + 4) * u, gamma_n = (double)nacc * u / (1 - (double)nacc * u);
    /* the operands as the kernel multiplies them: q in base-2 score units */
    double *qd = malloc(sizeof(double) * (size_t)(sq * dq)), *kd = malloc(sizeof(double) * (size_t)(sk * dkv + 1));
    double *vd = malloc(sizeof(double) * (size_t)(sk * dkv + 1));
    for (int64_t i = 0; i < sq; i++)
        for (int64_t e = 0; e < dq; e++)
            qd[i * dq + e] = amx ? round_bf16(fq[i * ldq + e] * qscale) : (double)fq[i * ldq + e] * scale * log2e;
    for (int64_t j = 0; j < sk; j++)
        for (int64_t e = 0; e < dkv; e++) {
            kd[j * dkv + e] = amx ? round_bf16(fk[j * ldq + dq + e]) : fk[j * ldq + dq + e];
            vd[j * dkv + e] = amx ? round_bf16(fk[j * ldq + dq + dkv + e]) : fk[j * ldq + dq + dkv + e];
        }
    double *want = malloc(sizeof(double) * (size_t)(sq * dq)), *bound = malloc(sizeof(double) * (size_t)(sq * dq));
    double *w = malloc(sizeof(double) * (size_t)(sk + 1)), *eps = malloc(sizeof(double) * (size_t)(sk + 1));
    for (int h = 0; h < hq; h++) {
        int hk = h / (hq / hkv);
        for (int64_t i = 0; i < sq; i++) {
            double mx = -INFINITY, wsum = 0, eps_max = 0;
            for (int64_t j = 0; j < sk; j++) {
                const double b2 = bias ? bias[(h * sq + i) * sk + j] * log2e : 0; /* base-2 units */
                bool vis = mask[j] && (!causal || j <= i) && b2 != -INFINITY;
                double s = 0, a = 0;
                for (int64_t e = 0; vis && e < dh; e++) {
                    double qk = qd[i * dq + h * dh + e] * kd[j * dkv + hk * dh + e];
                    s += qk, a += fabs(qk);
                }
                w[j] = vis ? s + b2 : -INFINITY;
                eps[j] = gamma_s * a + (bias && vis ? u * (a + 3 * fabs(b2)) : 0); /* score error, until the max is known */
                if (w[j] > mx) mx = w[j];
            }
            for (int64_t j = 0; j < sk; j++) {
                if (w[j] == -INFINITY) {
                    w[j] = 0;
                    continue;
                }
                const double ds = eps[j], sub = u * (mx - w[j] + 8 + ds);
                eps[j] = expm1(log(2.0) * (ds + sub) + exp_err);
                if (eps[j] > eps_max) eps_max = eps[j];
                wsum += w[j] = exp2(w[j] - mx);
            }
            for (int64_t e = 0; e < dh; e++) {
                double acc = 0, m1 = 0, dev = 0;
                for (int64_t j = 0; j < sk; j++) {
                    double vj = vd[j * dkv + hk * dh + e];
                    acc += w[j] * vj, m1 += w[j] * fabs(vj);
                }
                double mean = wsum > 0 ? acc / wsum : 0;
                m1 = wsum > 0 ? m1 / wsum : 0;
                for (int64_t j = 0; j < sk; j++) dev += w[j] * eps[j] * fabs(vd[j * dkv + hk * dh + e] - mean);
                dev = wsum > 0 ? dev / ((1 - eps_max) * wsum) : 0;
                const double grow = (1 + eps_max) / (1 - eps_max);
                want[i * dq + h * dh + e] = mean;
                bound[i * dq + h * dh + e] = dev + (p_round + 2 * gamma_n * (1 + p_round)) * grow * m1 + 2 * u * fabs(mean);
            }
        }
    }
    /* 1e-30 absolute only admits the weights below 2^-126 (relative to the largest) that f32 and bf16 flush */
    double wv = worst(out, want, bound, sq * dq, 1e-30, 1);
    CHECK_MSG(wv <= 1,
              "attention %s%s sq=%lld sk=%lld hq=%d hkv=%d dh=%lld causal=%d mask=%d bias=%d prec=%d: err %.3g x tol",
              kiln_cpu_tier_name(tier), amx ? " (amx kernel)" : "", (long long)sq, (long long)sk, hq, hkv,
              (long long)dh, causal, maskkind, biaskind, (int)prec, wv);
    if (getenv("KILN_TEST_VERBOSE")) { /* what the bound admits next to what the kernel did */
        double emax = 0, bmax = 0;
        for (int64_t i = 0; i < sq * dq; i++) {
            emax = fmax(emax, fabs(out[i] - want[i]));
            bmax = fmax(bmax, bound[i]);
        }
        printf("#   attention %s%s sq=%lld sk=%lld dh=%lld causal=%d ramp=%g bias=%d prec=%d: max err %.3g, max bound "
               "%.3g, worst %.3g x bound\n", kiln_cpu_tier_name(tier), amx ? " amx" : "", (long long)sq, (long long)sk,
               (long long)dh, causal, (double)key_ramp, biaskind, (int)prec, emax, bmax, wv);
    }
    free(fq), free(fk), free(out), free(mask), free(want), free(bound), free(w), free(eps), free(qd), free(kd),
        free(vd), free(bias);
}

static void check_attention_ramp(int64_t sq, int64_t sk, int hq, int hkv, int64_t dh, bool causal, int maskkind,
                                 kiln_precision prec, float key_ramp) {
    check_attention_full(sq, sk, hq, hkv, dh, causal, maskkind, prec, key_ramp, 0, 0);
}

static void check_attention(int64_t sq, int64_t sk, int hq, int hkv, int64_t dh, bool causal, int maskkind,
                            kiln_precision prec) {
    check_attention_ramp(sq, sk, hq, hkv, dh, causal, maskkind, prec, 0.0f);
}

static void test_attention(void) {
    for (int prec = 0; prec < 2; prec++) {
        check_attention(1, 1, 2, 1, 16, false, 0, (kiln_precision)prec);
        check_attention(7, 7, 4, 2, 32, true, 0, (kiln_precision)prec);
        check_attention(7, 513, 3, 3, 24, false, 1, (kiln_precision)prec);
        check_attention(513, 513, 2, 1, 128, false, 0, (kiln_precision)prec);
        check_attention(100, 100, 4, 1, 64, true, 2, (kiln_precision)prec); /* queries 0,1 see no key: zeros */
        check_attention(70, 33, 2, 2, 128, false, 0, (kiln_precision)prec);
        check_attention(40, 40, 1, 1, 512, false, 0, (kiln_precision)prec); /* the VAE's single 512-wide head */
        check_attention_ramp(33, 700, 2, 1, 128, false, 0, (kiln_precision)prec, 12.0f); /* rising running max */
        /* one 32-query sub-block: the AMX kernel's P V of a block must land before the next block rescales O */
        check_attention_ramp(20, 700, 2, 1, 128, false, 0, (kiln_precision)prec, 12.0f);
        check_attention_ramp(300, 300, 2, 2, 64, true, 1, (kiln_precision)prec, 12.0f);
        /* causal over several key blocks with a rising max: the diagonal block of every query block, and rows
         * whose last visible key is the first of a block */
        check_attention_ramp(520, 520, 2, 1, 64, true, 0, (kiln_precision)prec, 12.0f);
        /* dh % 16 != 0: the scalar kernel, its rescale and causal limit */
        check_attention_ramp(40, 600, 2, 2, 24, false, 0, (kiln_precision)prec, 12.0f);
        check_attention_ramp(150, 150, 2, 1, 24, true, 0, (kiln_precision)prec, 12.0f);
        /* an additive bias (T5's relative positions: scale 1, every head its own rows): the scalar kernel (dh 12,
         * the tiny T5's; dh 24), the f32 vector kernels (dh 64, 128; 32, which AMX would take without the bias),
         * GQA, Sq != Sk, several key blocks and a short last one, with the causal limit and the key mask, and
         * -inf entries (a query row that sees no key: zeros) */
        const kiln_precision pr = (kiln_precision)prec;
        check_attention_full(77, 77, 3, 3, 12, false, 0, pr, 0.0f, 1.0f, 1);
        check_attention_full(40, 300, 4, 2, 24, true, 1, pr, 0.0f, 0, 2);
        check_attention_full(140, 77, 4, 4, 64, false, 0, pr, 0.0f, 1.0f, 1);
        check_attention_full(130, 300, 4, 2, 64, true, 1, pr, 12.0f, 0, 1);
        check_attention_full(60, 200, 2, 1, 128, false, 2, pr, 0.0f, 0, 2);
        check_attention_full(33, 260, 2, 2, 32, false, 0, pr, 12.0f, 0, 1);
        check_attention_full(100, 100, 2, 1, 64, true, 2, pr, 0.0f, 0, 2);
    }
    float buf[64] = {0};
    kiln_tensor q = t2(buf, KILN_DT_F32, 2, 8), k = t2(buf, KILN_DT_F32, 2, 8);
    kiln_err err = {0};
    CHECK(be->ops->attention(be, &q, &q, &k, &k, 3, 2, 1.0f, false, NULL, NULL, &err) == KILN_E_INVALID);
    /* the bias: [Hq * Sq, Sk] f32, contiguous (2 heads, 2 queries, 2 keys here) */
    float bb[64] = {0};
    uint16_t bh[16] = {0};
    kiln_tensor ok = t2(bb, KILN_DT_F32, 4, 2), rows = t2(bb, KILN_DT_F32, 2, 2), cols = t2(bb, KILN_DT_F32, 4, 3);
    kiln_tensor strided = t2(bb, KILN_DT_F32, 4, 2), half = t2(bh, KILN_DT_BF16, 4, 2);
    strided.stride[0] = 3;
    CHECK_MSG(be->ops->attention(be, &q, &q, &k, &k, 2, 2, 1.0f, false, NULL, &ok, &err) == KILN_OK, "%s", err.msg);
    const kiln_tensor *bad[] = {&rows, &cols, &strided};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(be->ops->attention(be, &q, &q, &k, &k, 2, 2, 1.0f, false, NULL, bad[i], &err) == KILN_E_INVALID);
        CHECK_ERR_CONTAINS(&err, "attention: bias must be a contiguous f32 [4, 2]");
    }
    CHECK(be->ops->attention(be, &q, &q, &k, &k, 2, 2, 1.0f, false, NULL, &half, &err) == KILN_E_UNSUPPORTED);
    CHECK_ERR_CONTAINS(&err, "attention: bias is bf16, expected f32");
}

/* ---------------------------------------------------------------------------------------------------- */
static void test_norms(void) {
    int64_t R = 37, C = 96;
    float *x = randf(R * C), *g = randf(C), *sh = randf(C), *sc = randf(C), *y = nanf_buf(R * C);
    double *want = malloc(sizeof(double) * (size_t)(R * C));
    uint16_t *gb = to_bf16(g, C);
    for (int grp = 0; grp < 2; grp++) { /* gain over the whole row, then per head of 32 */
        int64_t G = grp ? 32 : C;
        for (int64_t r = 0; r < R; r++)
            for (int64_t b0 = 0; b0 < C; b0 += G) {
                double ss = 0;
                for (int64_t i = 0; i < G; i++) ss += (double)x[r * C + b0 + i] * x[r * C + b0 + i];
                for (int64_t i = 0; i < G; i++)
                    want[r * C + b0 + i] = x[r * C + b0 + i] / sqrt(ss / G + 1e-6) * bf16_to_f32(gb[i]);
            }
        kiln_tensor xt = t2(x, KILN_DT_F32, R, C), yt = t2(y, KILN_DT_F32, R, C), gt = t1(gb, KILN_DT_BF16, G);
        for (int64_t i = 0; i < R * C; i++) y[i] = NAN;
        ERR_OK(be->ops->rms_norm(be, &yt, &xt, &gt, 1e-6f, err));
        CHECK(worst(y, want, NULL, R * C, 1e-6, 1e-5) <= 1);
        memcpy(y, x, sizeof(float) * (size_t)(R * C)); /* in place */
        ERR_OK(be->ops->rms_norm(be, &yt, &yt, &gt, 1e-6f, err));
        CHECK(worst(y, want, NULL, R * C, 1e-6, 1e-5) <= 1);
    }
    for (int mod = 0; mod < 2; mod++) {
        for (int64_t r = 0; r < R; r++) {
            double s = 0, v = 0;
            for (int64_t i = 0; i < C; i++) s += x[r * C + i];
            for (int64_t i = 0; i < C; i++) v += (x[r * C + i] - s / C) * (x[r * C + i] - s / C);
            for (int64_t i = 0; i < C; i++) {
                double n = (x[r * C + i] - s / C) / sqrt(v / C + 1e-6);
                want[r * C + i] = mod ? (1.0 + sc[i]) * n + sh[i] : n;
            }
        }
        kiln_tensor xt = t2(x, KILN_DT_F32, R, C), yt = t2(y, KILN_DT_F32, R, C), sht = t1(sh, KILN_DT_F32, C),
                    sct = t1(sc, KILN_DT_F32, C);
        for (int64_t i = 0; i < R * C; i++) y[i] = NAN;
        ERR_OK(be->ops->layer_norm_modulate(be, &yt, &xt, mod ? &sht : NULL, mod ? &sct : NULL, 1e-6f, err));
        CHECK(worst(y, want, NULL, R * C, 1e-5, 1e-5) <= 1);
        memcpy(y, x, sizeof(float) * (size_t)(R * C));
        ERR_OK(be->ops->layer_norm_modulate(be, &yt, &yt, mod ? &sht : NULL, mod ? &sct : NULL, 1e-6f, err));
        CHECK(worst(y, want, NULL, R * C, 1e-5, 1e-5) <= 1);
    }
    kiln_tensor xt = t2(x, KILN_DT_F32, R, C), gt = t1(g, KILN_DT_F32, 40);
    kiln_err err = {0};
    CHECK(be->ops->rms_norm(be, &xt, &xt, &gt, 1e-6f, &err) == KILN_E_INVALID);
    free(x), free(g), free(sh), free(sc), free(y), free(want), free(gb);
}

static void test_group_norm(void) {
    int64_t N = 2, C = 12, H = 5, W = 7, G = 4, HW = H * W, n = N * C * HW;
    float *x = randf(n), *gm = randf(C), *bt = randf(C), *y = nanf_buf(n);
    double *want = malloc(sizeof(double) * (size_t)n);
    for (int silu = 0; silu < 2; silu++) {
        for (int64_t b = 0; b < N; b++)
            for (int64_t g = 0; g < G; g++) {
                int64_t cpg = C / G, base = (b * C + g * cpg) * HW, len = cpg * HW;
                double s = 0, v = 0;
                for (int64_t i = 0; i < len; i++) s += x[base + i];
                for (int64_t i = 0; i < len; i++) v += (x[base + i] - s / len) * (x[base + i] - s / len);
                for (int64_t i = 0; i < len; i++) {
                    int64_t c = g * cpg + i / HW;
                    double h = (x[base + i] - s / len) / sqrt(v / len + 1e-6) * gm[c] + bt[c];
                    want[base + i] = silu ? h / (1 + exp(-h)) : h;
                }
            }
        kiln_tensor xt = t4(x, N, C, H, W), yt = t4(y, N, C, H, W), gt = t1(gm, KILN_DT_F32, C),
                    btt = t1(bt, KILN_DT_F32, C);
        for (int64_t i = 0; i < n; i++) y[i] = NAN;
        ERR_OK(be->ops->group_norm(be, &yt, &xt, (int)G, &gt, &btt, 1e-6f, silu, err));
        CHECK(worst(y, want, NULL, n, 1e-5, 1e-5) <= 1);
        memcpy(y, x, sizeof(float) * (size_t)n);
        ERR_OK(be->ops->group_norm(be, &yt, &yt, (int)G, &gt, &btt, 1e-6f, silu, err));
        CHECK(worst(y, want, NULL, n, 1e-5, 1e-5) <= 1);
    }
    kiln_tensor xt = t4(x, N, C, H, W), gt = t1(gm, KILN_DT_F32, C);
    kiln_err err = {0};
    CHECK(be->ops->group_norm(be, &xt, &xt, 5, &gt, &gt, 1e-6f, false, &err) == KILN_E_INVALID);
    free(x), free(gm), free(bt), free(y), free(want);
}

/* ---------------------------------------------------------------------------------------------------- */
static void test_rope(void) {
    int64_t T = 7, B = 2, H = 3, Dh = 8, S = T * B, C = H * Dh, ld = C + 4;
    for (int il = 0; il < 2; il++) {
        float *x = randf(S * ld), *cs = randf(T * Dh / 2), *sn = randf(T * Dh / 2), *x0 = malloc(sizeof(float) * (size_t)(S * ld));
        memcpy(x0, x, sizeof(float) * (size_t)(S * ld));
        double *want = malloc(sizeof(double) * (size_t)(S * C));
        float *got = malloc(sizeof(float) * (size_t)(S * C));
        for (int64_t r = 0; r < S; r++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t i = 0; i < Dh / 2; i++) {
                    int64_t a = il ? 2 * i : i, b = il ? 2 * i + 1 : i + Dh / 2;
                    double c = cs[(r % T) * Dh / 2 + i], s = sn[(r % T) * Dh / 2 + i];
                    double xa = x0[r * ld + h * Dh + a], xb = x0[r * ld + h * Dh + b];
                    want[r * C + h * Dh + a] = xa * c - xb * s;
                    want[r * C + h * Dh + b] = xa * s + xb * c;
                }
        kiln_tensor xt = view(x, S, C, ld, 0), ct = t2(cs, KILN_DT_F32, T, Dh / 2), st = t2(sn, KILN_DT_F32, T, Dh / 2);
        ERR_OK(be->ops->rope(be, &xt, &ct, &st, (int)H, il, err));
        for (int64_t r = 0; r < S; r++) memcpy(got + r * C, x + r * ld, sizeof(float) * (size_t)C);
        CHECK(worst(got, want, NULL, S * C, 1e-6, 1e-6) <= 1);
        for (int64_t r = 0; r < S; r++)
            for (int64_t c = C; c < ld; c++) CHECK(x[r * ld + c] == x0[r * ld + c]); /* padding untouched */
        kiln_tensor bad = t2(x, KILN_DT_F32, 5, C);
        kiln_err err = {0};
        CHECK(be->ops->rope(be, &bad, &ct, &st, (int)H, il, &err) == KILN_E_INVALID); /* 5 rows vs a 7-row table */
        free(x), free(cs), free(sn), free(x0), free(want), free(got);
    }
}

/* ---------------------------------------------------------------------------------------------------- */
static double silu_d(double v) { return v / (1 + exp(-v)); }
static double gelu_d(double v) { return 0.5 * v * (1 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); }

static void test_elementwise(void) {
    int64_t R = 13, F = 301, n = R * F;
    float *a = randf(n), *b = randf(n), *ab = randf(2 * n), *g = randf(F), *y = nanf_buf(n);
    for (int64_t i = 0; i < n; i++) a[i] *= 8, ab[i] *= 8; /* reach the saturated ends */
    double *want = malloc(sizeof(double) * (size_t)n);
    kiln_tensor at = t2(a, KILN_DT_F32, R, F), bt = t2(b, KILN_DT_F32, R, F), abt = t2(ab, KILN_DT_F32, R, 2 * F),
                yt = t2(y, KILN_DT_F32, R, F), gt = t1(g, KILN_DT_F32, F);
#define POISON() for (int64_t i_ = 0; i_ < n; i_++) y[i_] = NAN
    POISON();
    ERR_OK(be->ops->silu(be, &yt, &at, err));
    for (int64_t i = 0; i < n; i++) want[i] = silu_d(a[i]);
    CHECK(worst(y, want, NULL, n, 1e-6, 1e-5) <= 1);
    memcpy(y, a, sizeof(float) * (size_t)n); /* in place y == x */
    ERR_OK(be->ops->silu(be, &yt, &yt, err));
    CHECK(worst(y, want, NULL, n, 1e-6, 1e-5) <= 1);
    POISON();
    ERR_OK(be->ops->gelu_tanh(be, &yt, &at, err));
    for (int64_t i = 0; i < n; i++) want[i] = gelu_d(a[i]);
    CHECK(worst(y, want, NULL, n, 1e-6, 1e-5) <= 1);
    memcpy(y, a, sizeof(float) * (size_t)n);
    ERR_OK(be->ops->gelu_tanh(be, &yt, &yt, err));
    CHECK(worst(y, want, NULL, n, 1e-6, 1e-5) <= 1);
    POISON();
    ERR_OK(be->ops->swiglu(be, &yt, &abt, err));
    for (int64_t r = 0; r < R; r++)
        for (int64_t i = 0; i < F; i++) want[r * F + i] = silu_d(ab[r * 2 * F + i]) * ab[r * 2 * F + F + i];
    CHECK(worst(y, want, NULL, n, 1e-6, 1e-5) <= 1);
    POISON();
    ERR_OK(be->ops->silu_mul(be, &yt, &at, &bt, err));
    for (int64_t i = 0; i < n; i++) want[i] = silu_d(a[i]) * b[i];
    CHECK(worst(y, want, NULL, n, 1e-6, 1e-5) <= 1);
    memcpy(y, a, sizeof(float) * (size_t)n); /* in place y == a */
    ERR_OK(be->ops->silu_mul(be, &yt, &yt, &bt, err));
    CHECK(worst(y, want, NULL, n, 1e-6, 1e-5) <= 1);
    POISON();
    ERR_OK(be->ops->gelu_mul(be, &yt, &at, &bt, err));
    for (int64_t i = 0; i < n; i++) want[i] = gelu_d(a[i]) * b[i];
    CHECK(worst(y, want, NULL, n, 1e-6, 1e-5) <= 1);
    memcpy(y, a, sizeof(float) * (size_t)n); /* in place y == a (T5's G = gelu(G) * U) */
    ERR_OK(be->ops->gelu_mul(be, &yt, &yt, &bt, err));
    CHECK(worst(y, want, NULL, n, 1e-6, 1e-5) <= 1);
    POISON();
    ERR_OK(be->ops->add(be, &yt, &at, &bt, err));
    for (int64_t i = 0; i < n; i++) want[i] = (double)a[i] + b[i];
    CHECK(worst(y, want, NULL, n, 0, 1e-7) <= 1);
    memcpy(y, a, sizeof(float) * (size_t)n);
    ERR_OK(be->ops->add(be, &yt, &yt, &bt, err));
    CHECK(worst(y, want, NULL, n, 0, 1e-7) <= 1);
    memcpy(y, a, sizeof(float) * (size_t)n);
    ERR_OK(be->ops->gated_add(be, &yt, &gt, &bt, err));
    for (int64_t i = 0; i < n; i++) want[i] = a[i] + (double)g[i % F] * b[i];
    CHECK(worst(y, want, NULL, n, 1e-6, 1e-6) <= 1);
    POISON();
    ERR_OK(be->ops->scale_shift(be, &yt, &at, 0.5f, -2.0f, err));
    for (int64_t i = 0; i < n; i++) want[i] = 0.5 * a[i] - 2.0;
    CHECK(worst(y, want, NULL, n, 1e-6, 1e-6) <= 1);
    /* softmax, with a row of all -inf (zeros) and some -inf entries */
    for (int64_t i = 0; i < F; i++) a[i] = -INFINITY;
    for (int64_t i = F; i < 2 * F; i += 3) a[i] = -INFINITY;
    POISON();
    ERR_OK(be->ops->softmax(be, &yt, &at, err));
    for (int64_t r = 0; r < R; r++) {
        double mx = -INFINITY, s = 0;
        for (int64_t i = 0; i < F; i++) mx = a[r * F + i] > mx ? a[r * F + i] : mx;
        for (int64_t i = 0; i < F; i++) s += want[r * F + i] = mx == -INFINITY ? 0 : exp(a[r * F + i] - mx);
        for (int64_t i = 0; i < F; i++) want[r * F + i] = s > 0 ? want[r * F + i] / s : 0;
    }
    CHECK(worst(y, want, NULL, n, 1e-7, 1e-5) <= 1);
    kiln_err err = {0};
    kiln_tensor small = t2(y, KILN_DT_F32, R, F - 1);
    CHECK(be->ops->add(be, &small, &at, &bt, &err) == KILN_E_INVALID);
    CHECK(be->ops->swiglu(be, &yt, &at, &err) == KILN_E_INVALID);
    CHECK(be->ops->gelu_mul(be, &yt, &at, &small, &err) == KILN_E_INVALID);
    CHECK_ERR_CONTAINS(&err, "gelu_mul");
    free(a), free(b), free(ab), free(g), free(y), free(want);
}

/* ---------------------------------------------------------------------------------------------------- */
static void test_copy(void) {
    /* concat: two [5, 3] and [5, 4] blocks into columns of a [5, 7]; then a bf16 round trip; then a transpose */
    int64_t R = 5;
    float *a = randf(R * 3), *b = randf(R * 4), *y = nanf_buf(R * 7);
    kiln_tensor at = t2(a, KILN_DT_F32, R, 3), bt = t2(b, KILN_DT_F32, R, 4);
    kiln_tensor y0 = view(y, R, 3, 7, 0), y1 = view(y, R, 4, 7, 3);
    ERR_OK(be->ops->copy(be, &y0, &at, err));
    ERR_OK(be->ops->copy(be, &y1, &bt, err));
    for (int64_t r = 0; r < R; r++) {
        for (int64_t c = 0; c < 3; c++) CHECK(y[r * 7 + c] == a[r * 3 + c]);
        for (int64_t c = 0; c < 4; c++) CHECK(y[r * 7 + 3 + c] == b[r * 4 + c]);
    }
    uint16_t hb[35], hh[35];
    float back[35];
    kiln_tensor yt = t2(y, KILN_DT_F32, R, 7), hbt = t2(hb, KILN_DT_BF16, R, 7), hht = t2(hh, KILN_DT_F16, R, 7),
                bk = t2(back, KILN_DT_F32, R, 7);
    ERR_OK(be->ops->copy(be, &hbt, &yt, err));
    ERR_OK(be->ops->copy(be, &bk, &hbt, err));
    for (int i = 0; i < 35; i++) CHECK(fabsf(back[i] - y[i]) <= fabsf(y[i]) * (1.0f / 256) && back[i] == round_bf16(y[i]));
    ERR_OK(be->ops->copy(be, &hht, &yt, err));
    ERR_OK(be->ops->copy(be, &bk, &hht, err));
    for (int i = 0; i < 35; i++) CHECK(fabsf(back[i] - y[i]) <= fabsf(y[i]) * (1.0f / 2048) + 6e-8f);
    /* f16 specials: 1, 65504, 1e-7 (subnormal), 1e6 (inf) */
    float sp[4] = {1.0f, 65504.0f, 1e-7f, 1e6f}, sb[4];
    uint16_t sh[4];
    kiln_tensor spt = t1(sp, KILN_DT_F32, 4), sht = t1(sh, KILN_DT_F16, 4), sbt = t1(sb, KILN_DT_F32, 4);
    ERR_OK(be->ops->copy(be, &sht, &spt, err));
    ERR_OK(be->ops->copy(be, &sbt, &sht, err));
    CHECK(sh[0] == 0x3c00 && sh[1] == 0x7bff && sh[3] == 0x7c00 && sb[0] == 1.0f && sb[1] == 65504.0f);
    CHECK(fabsf(sb[2] - 1e-7f) <= 3e-8f && isinf(sb[3]));
    /* transpose [2, 3, 4] -> [4, 3, 2] via strides */
    float src[24], dst[24];
    for (int i = 0; i < 24; i++) src[i] = (float)i, dst[i] = NAN;
    kiln_tensor st = kiln_tensor_make(src, KILN_DT_F32, 3, (int64_t[]){4, 3, 2});
    st.stride[0] = 1, st.stride[1] = 4, st.stride[2] = 12; /* element (i, j, k) = src[k][j][i] */
    kiln_tensor dt = kiln_tensor_make(dst, KILN_DT_F32, 3, (int64_t[]){4, 3, 2});
    ERR_OK(be->ops->copy(be, &dt, &st, err));
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 2; k++) CHECK(dst[(i * 3 + j) * 2 + k] == src[(k * 3 + j) * 4 + i]);
    kiln_tensor it = t1(src, KILN_DT_I32, 4);
    kiln_err err = {0};
    CHECK(be->ops->copy(be, &spt, &it, &err) == KILN_E_UNSUPPORTED);
    free(a), free(b), free(y);
}

/* ---------------------------------------------------------------------------------------------------- */
static void check_conv(int64_t N, int64_t Ci, int64_t Co, int64_t H, int64_t W, int64_t k, int stride, int pb,
                       int pe, bool wbf, bool bias, kiln_precision prec) {
    int64_t Ho = (H + pb + pe - k) / stride + 1, Wo = (W + pb + pe - k) / stride + 1, nw = Co * Ci * k * k;
    float *x = randf(N * Ci * H * W), *wf = randf(nw), *b = randf(Co), *y = nanf_buf(N * Co * Ho * Wo);
    uint16_t *wb = to_bf16(wf, nw);
    if (wbf)
        for (int64_t i = 0; i < nw; i++) wf[i] = bf16_to_f32(wb[i]);
    bool fast = prec == KILN_PREC_FAST && wbf;
    int64_t ny = N * Co * Ho * Wo;
    double *want = malloc(sizeof(double) * (size_t)ny), *scale = malloc(sizeof(double) * (size_t)ny);
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < Co; o++)
            for (int64_t oy = 0; oy < Ho; oy++)
                for (int64_t ox = 0; ox < Wo; ox++) {
                    double s = bias ? b[o] : 0, a = bias ? fabs(b[o]) : 0;
                    for (int64_t c = 0; c < Ci; c++)
                        for (int64_t ky = 0; ky < k; ky++)
                            for (int64_t kx = 0; kx < k; kx++) {
                                int64_t iy = oy * stride + ky - pb, ix = ox * stride + kx - pb;
                                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                                double xv = x[((n * Ci + c) * H + iy) * W + ix];
                                if (fast) xv = round_bf16((float)xv);
                                double p = xv * wf[((o * Ci + c) * k + ky) * k + kx];
                                s += p, a += fabs(p);
                            }
                    int64_t idx = ((n * Co + o) * Ho + oy) * Wo + ox;
                    want[idx] = s, scale[idx] = a;
                }
    kiln_tensor xt = t4(x, N, Ci, H, W), yt = t4(y, N, Co, Ho, Wo), bt = t1(b, KILN_DT_F32, Co);
    kiln_tensor wt = kiln_tensor_make(wbf ? (void *)wb : (void *)wf, wbf ? KILN_DT_BF16 : KILN_DT_F32, 4,
                                      (int64_t[]){Co, Ci, k, k});
    be->precision = prec;
    poison_scratch();
    ERR_OK(be->ops->conv2d(be, &yt, &xt, &wt, bias ? &bt : NULL, stride, pb, pe, err));
    be->precision = KILN_PREC_FAST;
    double wv = worst(y, want, scale, ny, 1e-6, 1e-5);
    CHECK_MSG(wv <= 1, "conv2d %s N=%lld Ci=%lld Co=%lld %lldx%lld k=%lld s=%d pad=%d/%d w=%s prec=%d: %.3g x tol",
              kiln_cpu_tier_name(tier), (long long)N, (long long)Ci, (long long)Co, (long long)H, (long long)W,
              (long long)k, stride, pb, pe, wbf ? "bf16" : "f32", (int)prec, wv);
    free(x), free(wf), free(b), free(y), free(wb), free(want), free(scale);
}

static void test_conv2d(void) {
    for (int prec = 0; prec < 2; prec++) {
        check_conv(2, 5, 7, 9, 11, 3, 1, 1, 1, true, true, (kiln_precision)prec);
        check_conv(1, 5, 7, 9, 11, 3, 2, 0, 1, true, false, (kiln_precision)prec); /* VAE downsample padding */
        check_conv(1, 6, 3, 8, 8, 1, 1, 0, 0, false, true, (kiln_precision)prec);
        /* the direct path (stride 1, Co <= 16): full vectors plus a tail per row, asymmetric padding */
        check_conv(2, 3, 3, 5, 37, 3, 1, 1, 1, true, true, (kiln_precision)prec);
        check_conv(1, 4, 5, 6, 19, 3, 1, 0, 2, true, false, (kiln_precision)prec);
        check_conv(1, 4, 16, 3, 33, 3, 1, 2, 0, false, true, (kiln_precision)prec);
        check_conv(1, 32, 64, 13, 10, 3, 1, 1, 1, true, true, (kiln_precision)prec); /* AMX-eligible: K 288, N 64 */
        check_conv(1, 64, 32, 9, 9, 1, 1, 0, 0, true, false, (kiln_precision)prec);
        /* AMX implicit-GEMM shapes (Ci, Co, Wo multiples of 32), incl. asymmetric padding and 1x1 */
        check_conv(2, 64, 32, 5, 32, 3, 1, 1, 1, true, true, (kiln_precision)prec);
        check_conv(1, 32, 64, 4, 64, 3, 1, 0, 2, true, false, (kiln_precision)prec);
        check_conv(1, 32, 64, 3, 64, 1, 1, 0, 0, true, true, (kiln_precision)prec);
        /* packed kernel (vector tiers): two pixel tiles of 192, two column blocks (128 + 8) */
        check_conv(1, 8, 136, 7, 30, 3, 1, 1, 1, true, true, (kiln_precision)prec);
    }
    float buf[256] = {0};
    kiln_tensor x = t4(buf, 1, 2, 4, 4), y = t4(buf + 64, 1, 3, 4, 4);
    kiln_tensor w = kiln_tensor_make(buf + 128, KILN_DT_F32, 4, (int64_t[]){3, 2, 5, 5});
    kiln_err err = {0};
    CHECK(be->ops->conv2d(be, &y, &x, &w, NULL, 1, 2, 2, &err) == KILN_E_UNSUPPORTED);
}

static void test_upsample(void) {
    int64_t N = 2, C = 3, H = 5, W = 7;
    float *x = randf(N * C * H * W), *y = nanf_buf(N * C * 4 * H * W);
    kiln_tensor xt = t4(x, N, C, H, W), yt = t4(y, N, C, 2 * H, 2 * W);
    ERR_OK(be->ops->upsample2x(be, &yt, &xt, err));
    for (int64_t p = 0; p < N * C; p++)
        for (int64_t i = 0; i < 2 * H; i++)
            for (int64_t j = 0; j < 2 * W; j++) CHECK(y[(p * 2 * H + i) * 2 * W + j] == x[(p * H + i / 2) * W + j / 2]);
    kiln_err err = {0};
    CHECK(be->ops->upsample2x(be, &xt, &xt, &err) == KILN_E_INVALID);
    free(x), free(y);
}

static void test_memory_and_cuda_stub(void) {
    void *p = be->ops->alloc(be, 100);
    CHECK(p && ((uintptr_t)p % 64) == 0);
    char src[100];
    memset(src, 7, sizeof src);
    ERR_OK(be->ops->upload(be, p, src, sizeof src, err));
    memset(src, 0, sizeof src);
    ERR_OK(be->ops->download(be, src, p, sizeof src, err));
    CHECK(src[99] == 7);
    ERR_OK(be->ops->sync(be, err));
    be->ops->free(be, p);
    /* a misspelt kernel or tier override is refused, not ignored */
    kiln_backend *other = NULL;
    kiln_err oerr = {0};
    setenv("KILN_GEMM", "fast", 1);
    CHECK(kiln_backend_open_cpu(1, &other, &oerr) == KILN_E_INVALID && other == NULL);
    CHECK_ERR_CONTAINS(&oerr, "KILN_GEMM=fast");
    unsetenv("KILN_GEMM");
    const char *tier_env = getenv("KILN_CPU");
    char saved[16];
    snprintf(saved, sizeof saved, "%s", tier_env ? tier_env : "");
    setenv("KILN_CPU", "avx3", 1);
    CHECK(kiln_backend_open_cpu(1, &other, &oerr) == KILN_E_INVALID && other == NULL);
    CHECK_ERR_CONTAINS(&oerr, "KILN_CPU=avx3");
    if (tier_env) setenv("KILN_CPU", saved, 1);
    else unsetenv("KILN_CPU");
#ifndef KILN_HAVE_CUDA
    kiln_backend *cu = (kiln_backend *)1;
    kiln_err err = {0};
    CHECK(kiln_backend_open_cuda(0, &cu, &err) == KILN_E_DEVICE && cu == NULL);
    CHECK_ERR_CONTAINS(&err, "without CUDA");
#endif
}

int main(void) {
    kiln_cpu_tier top = kiln_cpu_detect_tier();
    for (int t = 0; t <= (int)top; t++) {
        tier = (kiln_cpu_tier)t;
        setenv("KILN_CPU", kiln_cpu_tier_name(tier), 1);
        kiln_err err = {0};
        if (kiln_backend_open_cpu(t % 2 ? 3 : 2, &be, &err) != KILN_OK) {
            fprintf(stderr, "cannot open the CPU backend at tier %s: %s\n", kiln_cpu_tier_name(tier), err.msg);
            return 1;
        }
        printf("# tier %s (%s)\n", kiln_cpu_tier_name(tier), be->ops->name);
        RUN(test_matmul);
        RUN(test_attention);
        RUN(test_norms);
        RUN(test_group_norm);
        RUN(test_rope);
        RUN(test_elementwise);
        RUN(test_copy);
        RUN(test_conv2d);
        RUN(test_upsample);
        RUN(test_memory_and_cuda_stub);
        kiln_backend_close(be);
        if (tier == KILN_CPU_AVX512) { /* the other FAST matmul/conv kernel of this tier (which runs is by vendor) */
            setenv("KILN_GEMM", kiln_cpu_prefers_bf16_dot() ? "fma" : "dot", 1);
            printf("# tier avx512, KILN_GEMM=%s\n", getenv("KILN_GEMM"));
            if (kiln_backend_open_cpu(2, &be, &err) != KILN_OK) return 1;
            RUN(test_matmul);
            RUN(test_conv2d);
            kiln_backend_close(be);
            unsetenv("KILN_GEMM");
        }
    }
    unsetenv("KILN_CPU");
    return test_summary();
}

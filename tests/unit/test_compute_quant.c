/* test_compute_quant.c - matmul with quantised weights (GGML blocks, fp8 with a per-tensor scale) and f16 weights
 * (ComfyUI's t5xxl_fp16), which stay as stored and are widened per K slice inside the weight packing
 * (compute/cpu/gemm_quant.c).
 *
 * On every instruction-set tier this machine has, and in both precisions (quantised weights always run EXACT):
 * y = x . W^T against a float64 product with W the dequantised weight (tensor/quant.h kiln_dequant, fp8 -> f32
 * times the scale), with the bound the other matmul tests use (|err| <= 1e-5 sum|x w| + 1e-6). Shapes cover one
 * row (the DiT's modulation vectors, which bf16 weights read in place), row counts that are not whole
 * micro-kernel groups, N not whole panels, K over several slices and a partial last slice, row views into a
 * fused weight (kiln_tensor_rows: byte offsets), and the strict-residency mode with exactly the weight's bytes
 * placed (the span of a row view of blocks). Refusals: a type kiln cannot dequantise, a row that is not whole
 * blocks. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "compute/cpu/cpu_internal.h"
#include "compute/ops.h"
#include "tensor/convert.h"
#include "tensor/quant.h"
#include "test.h"

static kiln_backend *be;
static kiln_cpu_tier tier;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float frand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

typedef struct qcase {
    const char *what;
    kiln_dtype dt;   /* QBLOCK, F8_* or F16 */
    uint32_t qtype;  /* QBLOCK */
    float scale;     /* fp8 */
} qcase;

/* Quantises a random [N, K] weight into the case's storage; fills wf with the dequantised values. Returns the
 * bytes (malloc) and its size. */
static void *make_weight(const qcase *c, int64_t N, int64_t K, float *wf, size_t *bytes) {
    float *src = malloc(sizeof(float) * (size_t)(N * K));
    for (int64_t i = 0; i < N * K; i++) src[i] = frand();
    void *w = NULL;
    kiln_err err = {0};
    if (c->dt == KILN_DT_QBLOCK) {
        const kiln_qtype_info *q = kiln_qtype_get(c->qtype);
        *bytes = kiln_qtype_nbytes(q, (size_t)(N * K));
        w = malloc(*bytes);
        CHECK(kiln_quantize(w, c->qtype, src, (size_t)(N * K), &err) == KILN_OK);
        CHECK(kiln_dequant_ref(wf, c->qtype, w, (size_t)(N * K), &err) == KILN_OK);
    } else if (c->dt == KILN_DT_F16) {
        *bytes = (size_t)(N * K) * 2;
        uint16_t *h = malloc(*bytes);
        for (int64_t i = 0; i < N * K; i++) {
            h[i] = kiln_f32_to_f16(src[i] * 3.0f);
            wf[i] = kiln_f16_to_f32(h[i]);
        }
        w = h;
    } else {
        *bytes = (size_t)(N * K);
        uint8_t *b = malloc(*bytes);
        for (int64_t i = 0; i < N * K; i++) {
            float v = src[i] * (c->dt == KILN_DT_F8_E4M3 ? 400.0f : 9000.0f);
            b[i] = c->dt == KILN_DT_F8_E4M3 ? kiln_f32_to_e4m3(v) : kiln_f32_to_e5m2(v);
            wf[i] = (c->dt == KILN_DT_F8_E4M3 ? kiln_e4m3_to_f32(b[i]) : kiln_e5m2_to_f32(b[i])) * c->scale;
        }
        w = b;
    }
    free(src);
    return w;
}

static kiln_tensor weight_view(const qcase *c, void *w, int64_t N, int64_t K) {
    if (c->dt == KILN_DT_QBLOCK) return kiln_tensor_make_q(w, c->qtype, N, K);
    kiln_tensor t = kiln_tensor_make(w, c->dt, 2, (int64_t[]){N, K});
    t.qscale = c->scale;
    return t;
}

/* y rows of x . W[r0:r0+nr]^T against float64. */
static void check_case(const qcase *c, int64_t M, int64_t N, int64_t K, int64_t r0, int64_t nr, kiln_precision prec,
                       bool bias) {
    float *wf = malloc(sizeof(float) * (size_t)(N * K));
    size_t wbytes = 0;
    void *w = make_weight(c, N, K, wf, &wbytes);
    float *x = be->ops->alloc(be, sizeof(float) * (size_t)(M * K) + 64);
    float *y = be->ops->alloc(be, sizeof(float) * (size_t)(M * nr) + 64);
    float *b = be->ops->alloc(be, sizeof(float) * (size_t)nr + 64);
    for (int64_t i = 0; i < M * K; i++) x[i] = frand();
    for (int64_t i = 0; i < nr; i++) b[i] = frand();
    kiln_err err = {0};
    CHECK(be->ops->place(be, w, wbytes, &err) == KILN_OK); /* exactly the weight's bytes (strict mode checks) */
    kiln_tensor wt = weight_view(c, w, N, K);
    if (r0 || nr != N) wt = kiln_tensor_rows(&wt, r0, nr);
    kiln_tensor xt = kiln_tensor_make(x, KILN_DT_F32, 2, (int64_t[]){M, K});
    kiln_tensor yt = kiln_tensor_make(y, KILN_DT_F32, 2, (int64_t[]){M, nr});
    kiln_tensor bt = kiln_tensor_make(b, KILN_DT_F32, 1, (int64_t[]){nr});
    be->precision = prec;
    kiln_status s = kiln_matmul(be, &yt, &xt, &wt, bias ? &bt : NULL, &err);
    be->precision = KILN_PREC_FAST;
    CHECK_MSG(s == KILN_OK, "%s: %s", c->what, err.msg);
    double worst = 0;
    for (int64_t m = 0; s == KILN_OK && m < M; m++)
        for (int64_t n = 0; n < nr; n++) {
            double acc = bias ? b[n] : 0, mag = bias ? fabs(b[n]) : 0;
            for (int64_t k = 0; k < K; k++) {
                double p = (double)x[m * K + k] * wf[(r0 + n) * K + k];
                acc += p, mag += fabs(p);
            }
            double e = fabs(y[m * nr + n] - acc) / (1e-5 * mag + 1e-6);
            if (e > worst) worst = e;
        }
    CHECK_MSG(worst <= 1, "%s tier %s M=%lld N=%lld K=%lld rows %lld+%lld prec %d: err %.3g x tol", c->what,
              kiln_cpu_tier_name(tier), (long long)M, (long long)N, (long long)K, (long long)r0, (long long)nr, (int)prec,
              worst);
    be->ops->unplace(be, w);
    be->ops->free(be, x), be->ops->free(be, y), be->ops->free(be, b);
    free(w), free(wf);
}

static const qcase cases[] = {
    {"Q8_0", KILN_DT_QBLOCK, KILN_QT_Q8_0, 0},
    {"Q4_K", KILN_DT_QBLOCK, KILN_QT_Q4_K, 0},
    {"e4m3 x 0.0021", KILN_DT_F8_E4M3, 0, 0.0021f},
    {"e5m2 x 3.5e-5", KILN_DT_F8_E5M2, 0, 3.5e-5f},
    {"f16 (t5xxl_fp16)", KILN_DT_F16, 0, 0},
};

static void test_matmul_quant(void) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const qcase *c = &cases[i];
        const bool kq = c->dt == KILN_DT_QBLOCK && kiln_qtype_get(c->qtype)->block == 256;
        const int64_t K1 = kq ? 768 : 320, K2 = kq ? 256 : 96; /* several slices, a partial last one (fp8/Q8_0) */
        for (int prec = 0; prec < 2; prec++) {
            check_case(c, 1, 70, K1, 0, 70, (kiln_precision)prec, true);    /* a modulation vector */
            check_case(c, 7, 33, K2, 0, 33, (kiln_precision)prec, false);
            check_case(c, 130, 140, K1, 0, 140, (kiln_precision)prec, true); /* blocks of 128 columns + 12 */
        }
        /* the Q, K and V rows of a fused QKV weight: views whose data starts mid-weight; the last ends at its end */
        check_case(c, 13, 96, K2, 32, 32, KILN_PREC_FAST, true);
        check_case(c, 13, 96, K2, 64, 32, KILN_PREC_EXACT, false);
    }
}

static void test_refusals(void) {
    uint8_t buf[4096] = {0};
    float xb[64] = {0}, yb[64];
    kiln_err err = {0};
    CHECK(be->ops->place(be, buf, sizeof buf, &err) == KILN_OK);
    float *x = be->ops->alloc(be, sizeof xb), *y = be->ops->alloc(be, sizeof yb);
    kiln_tensor xt = kiln_tensor_make(x, KILN_DT_F32, 2, (int64_t[]){1, 32});
    kiln_tensor yt = kiln_tensor_make(y, KILN_DT_F32, 2, (int64_t[]){1, 2});
    kiln_tensor w = kiln_tensor_make_q(buf, 16 /* IQ2_XXS */, 2, 256);
    xt.shape[1] = 256;
    float *x2 = be->ops->alloc(be, 256 * sizeof(float));
    memset(x2, 0, 256 * sizeof(float));
    xt.data = x2, xt.stride[0] = 256;
    CHECK(kiln_matmul(be, &yt, &xt, &w, NULL, &err) == KILN_E_UNSUPPORTED);
    CHECK_ERR_CONTAINS(&err, "IQ2_XXS");
    /* a Q8_0 "row" of 40 values is not whole 32-value blocks */
    kiln_tensor w2 = kiln_tensor_make_q(buf, KILN_QT_Q8_0, 2, 40);
    xt.shape[1] = 40;
    CHECK(kiln_matmul(be, &yt, &xt, &w2, NULL, &err) == KILN_E_INVALID);
    CHECK_ERR_CONTAINS(&err, "whole rows");
    be->ops->unplace(be, buf);
    be->ops->free(be, x), be->ops->free(be, y), be->ops->free(be, x2);
}

int main(void) {
    kiln_cpu_tier top = kiln_cpu_detect_tier();
    for (int strict = 0; strict < 2; strict++)
        for (int t = 0; t <= (int)top; t++) {
            tier = (kiln_cpu_tier)t;
            setenv("KILN_CPU", kiln_cpu_tier_name(tier), 1);
            if (strict) setenv("KILN_STRICT_RESIDENCY", "1", 1);
            else unsetenv("KILN_STRICT_RESIDENCY");
            kiln_err err = {0};
            if (kiln_backend_open_cpu(2, &be, &err) != KILN_OK) {
                fprintf(stderr, "cannot open the CPU backend at tier %s: %s\n", kiln_cpu_tier_name(tier), err.msg);
                return 1;
            }
            printf("# tier %s%s (%s)\n", kiln_cpu_tier_name(tier), strict ? ", strict residency" : "", be->ops->name);
            RUN(test_matmul_quant);
            RUN(test_refusals);
            kiln_backend_close(be);
        }
    return test_summary();
}

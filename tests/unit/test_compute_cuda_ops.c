/* test_compute_cuda_ops.c - every op of the CUDA backend against a float64 reference computed here (matmul,
 * attention, conv2d) or the CPU backend in EXACT mode (the f32 ops: norms, elementwise, data movement), plus a
 * determinism check (run twice, compare the bytes).
 *
 * Why float64 and not the CPU backend: the CPU's default (FAST) attention runs bf16 tiles, so a correct f32 CUDA
 * kernel compared with it at 1e-4 would fail, and a wrong one could hide inside the CPU's own error. The
 * references round exactly what the device rounds - FAST matmul/conv: the activation operand to bf16 (weights are
 * bf16 already); the tensor-core attention (KILN_CUDA_ATTENTION=tc): q, k, v - and then sum in double, so the
 * tolerance measures only the device's own f32 arithmetic:
 *   1e-5  everything in f32 on the device (FAST/EXACT matmul and conv against bf16-rounded operands, attention,
 *         norms, elementwise, RoPE, softmax)
 *   5e-3  the tensor-core attention (P is rounded to bf16 too, which the reference does not model)
 *   0     data movement (upsample, raw copies): bit-exact
 *
 * Without a GPU (CI) the CUDA backend is NOT run: the harness runs with the CPU backend as the device under test
 * (so the reference code itself is checked on every commit), prints "not run: CUDA ...", and exits with 77,
 * which ctest reports as Skipped (SKIP_RETURN_CODE), never Passed. A failure of the harness run still fails.
 * KILN_REQUIRE_GPU=1 (tests/gpu/run.sh) makes a missing GPU a failure.
 *
 * Inputs are random in [-1, 1) with awkward sizes; device outputs start as NaN (or as the same random residual
 * on both sides), so an element the kernel forgets to write fails. Whole buffers are compared, so elements a
 * strided view must NOT touch are checked too. Error measure: relative L2 ||dut - ref|| / ||ref||. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compute/ops.h"
#include "tensor/convert.h"
#include "tensor/quant.h"
#include "test.h"

static kiln_backend *ref, *dut;
static const char *dut_name = "cuda";

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}
static uint16_t bf16_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static float f32_of_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The same tensor on both backends: h on the host (the CPU reference), d on the device under test. */
typedef struct pair {
    kiln_tensor h, d;
    void *hbuf, *dbuf;
    size_t bytes;
} pair;

#define MAX_PAIRS 64
#define TC_TOL 5e-3 /* the tensor-core attention: P rounded to bf16 (~1e-3 rel. L2 on the emulated GPU; a bf16 output ~2.5e-3) */
static pair *pairs[MAX_PAIRS];
static int n_pairs;

typedef enum fill { FILL_RAND, FILL_NAN, FILL_POS } fill;

static pair *mk(kiln_dtype dt, int ndim, const int64_t *shape, fill how) {
    pair *p = calloc(1, sizeof *p);
    p->h = kiln_tensor_make(NULL, dt, ndim, shape);
    p->bytes = kiln_tensor_nbytes(&p->h);
    p->hbuf = malloc(p->bytes ? p->bytes : 1);
    int64_t n = kiln_tensor_numel(&p->h);
    for (int64_t i = 0; i < n; i++) {
        float v = how == FILL_NAN ? NAN : how == FILL_POS ? 0.5f + 0.5f * frand() : frand();
        if (dt == KILN_DT_F32) ((float *)p->hbuf)[i] = v;
        else if (dt == KILN_DT_BF16) ((uint16_t *)p->hbuf)[i] = bf16_of(v);
        else ((uint8_t *)p->hbuf)[i] = (uint8_t)(frand() > -0.6f); /* masks: ~80% visible */
    }
    p->h.data = p->hbuf;
    p->d = p->h;
    p->dbuf = dut->ops->alloc(dut, p->bytes ? p->bytes : 1);
    p->d.data = p->dbuf;
    p->d.backend = dut->kind;
    p->d.device = dut->device;
    CHECK(p->dbuf != NULL);
    if (p->dbuf) CHECK_EQ_INT(dut->ops->upload(dut, p->dbuf, p->hbuf, p->bytes, NULL), KILN_OK);
    if (n_pairs < MAX_PAIRS) pairs[n_pairs++] = p;
    return p;
}
static pair *mk2(kiln_dtype dt, int64_t r, int64_t c, fill how) { return mk(dt, 2, (int64_t[]){r, c}, how); }
static pair *mk1(kiln_dtype dt, int64_t n, fill how) { return mk(dt, 1, (int64_t[]){n}, how); }
static pair *mk4(int64_t n, int64_t c, int64_t h, int64_t w, fill how) {
    return mk(KILN_DT_F32, 4, (int64_t[]){n, c, h, w}, how);
}

static void free_pairs(void) {
    for (int i = 0; i < n_pairs; i++) {
        dut->ops->free(dut, pairs[i]->dbuf);
        free(pairs[i]->hbuf);
        free(pairs[i]);
    }
    n_pairs = 0;
}

/* A [rows, cols] view at (r0, c0) of a 2-D pair, on both sides. */
typedef struct vpair {
    kiln_tensor h, d;
} vpair;
static vpair view(pair *p, int64_t r0, int64_t rows, int64_t c0, int64_t cols) {
    vpair v = {p->h, p->d};
    size_t es = kiln_dtype_size(p->h.dtype);
    int64_t off = r0 * p->h.stride[0] + c0;
    v.h.data = (char *)p->hbuf + off * (int64_t)es;
    v.d.data = (char *)p->dbuf + off * (int64_t)es;
    v.h.shape[0] = v.d.shape[0] = rows;
    v.h.shape[1] = v.d.shape[1] = cols;
    return v;
}

/* Downloads p's device buffer and compares it with the host one. tol < 0: bit-exact. */
static void compare(const char *what, const pair *p, double tol) {
    int64_t n = kiln_tensor_numel(&p->h);
    void *got = malloc(p->bytes ? p->bytes : 1);
    kiln_err err = {0};
    CHECK_EQ_INT(dut->ops->download(dut, got, p->dbuf, p->bytes, &err), KILN_OK);
    double se = 0, sr = 0, maxabs = 0;
    int64_t nan_bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double a, b;
        if (p->h.dtype == KILN_DT_BF16) {
            a = f32_of_bf16(((uint16_t *)got)[i]);
            b = f32_of_bf16(((uint16_t *)p->hbuf)[i]);
        } else {
            a = ((float *)got)[i];
            b = ((float *)p->hbuf)[i];
        }
        if (isnan(a) != isnan(b)) nan_bad++;
        if (isnan(a) || isnan(b)) continue;
        se += (a - b) * (a - b);
        sr += b * b;
        if (fabs(a - b) > maxabs) maxabs = fabs(a - b);
    }
    double rel = sr > 0 ? sqrt(se / sr) : sqrt(se);
    bool ok = nan_bad == 0 && (tol < 0 ? memcmp(got, p->hbuf, p->bytes) == 0 : rel <= tol);
    char tols[16] = "exact";
    if (tol >= 0) snprintf(tols, sizeof tols, "%.0e", tol);
    printf("  %-44s n=%-8lld rel_l2 %.2e  max_abs %.2e  tol %-6s %s\n", what, (long long)n, rel, maxabs, tols,
           ok ? "ok" : "FAIL");
    CHECK_MSG(ok, "%s: rel_l2 %.3g (tol %.1g), %lld NaN mismatches", what, rel, tol, (long long)nan_bad);
    free(got);
}

#define BOTH(call_h, call_d)                                                                                  \
    do {                                                                                                      \
        kiln_err e_ = {0};                                                                                    \
        kiln_status sh_ = (call_h);                                                                           \
        CHECK_MSG(sh_ == KILN_OK, "cpu: %s", e_.msg);                                                         \
        kiln_status sd_ = (call_d);                                                                           \
        CHECK_MSG(sd_ == KILN_OK, "%s: %s", dut_name, e_.msg);                                                \
    } while (0)

/* ---- float64 references (results into the pair's host buffer, which holds the initial values) ---- */

static double val(const pair *p, int64_t i) {
    if (p->h.dtype == KILN_DT_BF16) return f32_of_bf16(((const uint16_t *)p->hbuf)[i]);
    return ((const float *)p->hbuf)[i];
}
/* An activation as the device reads it: rounded to bf16 when the op runs on bf16 operands. */
static double act(const pair *p, int64_t i, bool round) {
    double v = val(p, i);
    return round ? f32_of_bf16(bf16_of((float)v)) : v;
}

static void ref_matmul(pair *y, const pair *x, const pair *w, const pair *b, const pair *gate, kiln_epilogue_kind kind,
                       bool round, int64_t y_ld, int64_t y_off, int64_t x_ld, int64_t x_off) {
    int64_t n = w->h.shape[0], k = w->h.shape[1], m = y_ld ? y->h.shape[0] : x->h.shape[0];
    float *yh = y->hbuf;
    for (int64_t r = 0; r < m; r++)
        for (int64_t c = 0; c < n; c++) {
            double acc = b ? val(b, c) : 0;
            for (int64_t i = 0; i < k; i++) acc += act(x, r * x_ld + x_off + i, round) * val(w, c * k + i);
            float *out = &yh[r * y_ld + y_off + c];
            if (kind == KILN_EPI_NONE) *out = (float)acc;
            else if (kind == KILN_EPI_ADD) *out = (float)((double)*out + acc);
            else *out = (float)((double)*out + val(gate, c) * acc);
        }
}

/* bias: NULL or f32 [hq * sq, sk] (row h * sq + i), added to the scaled scores; a -inf entry hides the key. */
static void ref_attention(pair *o, const pair *q, const pair *k, const pair *v, int hq, int hkv, int dh, float scale,
                          bool causal, const pair *mask, const pair *bias, bool round) {
    int64_t sq = q->h.shape[0], sk = k->h.shape[0];
    double *s = malloc((size_t)sk * sizeof *s);
    float *oh = o->hbuf;
    for (int h = 0; h < hq; h++) {
        int g = h / (hq / hkv);
        for (int64_t i = 0; i < sq; i++) {
            double mx = -INFINITY;
            for (int64_t j = 0; j < sk; j++) {
                const double b = bias ? val(bias, ((int64_t)h * sq + i) * sk + j) : 0;
                bool vis = (!causal || j <= i) && (!mask || ((const uint8_t *)mask->hbuf)[j]) && b != -INFINITY;
                double d = 0;
                for (int e = 0; e < dh && vis; e++)
                    d += act(q, i * hq * dh + h * dh + e, round) * act(k, j * hkv * dh + g * dh + e, round);
                s[j] = vis ? d * scale + b : -INFINITY;
                if (s[j] > mx) mx = s[j];
            }
            double sum = 0;
            for (int64_t j = 0; j < sk; j++) sum += s[j] > -INFINITY ? exp(s[j] - mx) : 0;
            for (int e = 0; e < dh; e++) {
                double acc = 0;
                for (int64_t j = 0; j < sk && sum > 0; j++)
                    if (s[j] > -INFINITY) acc += exp(s[j] - mx) * act(v, j * hkv * dh + g * dh + e, round);
                oh[i * hq * dh + h * dh + e] = sum > 0 ? (float)(acc / sum) : 0.0f;
            }
        }
    }
    free(s);
}

static void ref_conv(pair *y, const pair *x, const pair *w, const pair *b, int stride, int pb, bool round) {
    int64_t n = x->h.shape[0], ci = x->h.shape[1], h = x->h.shape[2], wd = x->h.shape[3];
    int64_t co = y->h.shape[1], ho = y->h.shape[2], wo = y->h.shape[3], ks = w->h.shape[2];
    float *yh = y->hbuf;
    for (int64_t in = 0; in < n; in++)
        for (int64_t oc = 0; oc < co; oc++)
            for (int64_t oy = 0; oy < ho; oy++)
                for (int64_t ox = 0; ox < wo; ox++) {
                    double acc = b ? val(b, oc) : 0;
                    for (int64_t c = 0; c < ci; c++)
                        for (int64_t ky = 0; ky < ks; ky++)
                            for (int64_t kx = 0; kx < ks; kx++) {
                                int64_t iy = oy * stride - pb + ky, ix = ox * stride - pb + kx;
                                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                                acc += act(x, ((in * ci + c) * h + iy) * wd + ix, round) *
                                       val(w, ((oc * ci + c) * ks + ky) * ks + kx);
                            }
                    yh[((in * co + oc) * ho + oy) * wo + ox] = (float)acc;
                }
}

/* Runs the device op only (the reference is computed separately). */
#define DUT(call_d)                                                                                           \
    do {                                                                                                      \
        kiln_err e_ = {0};                                                                                    \
        kiln_status sd_ = (call_d);                                                                           \
        CHECK_MSG(sd_ == KILN_OK, "%s: %s", dut_name, e_.msg);                                                \
    } while (0)

/* ---- matmul ---- */

static void matmul_case(const char *what, int64_t m, int64_t n, int64_t k, kiln_dtype wdt, bool bias,
                        kiln_epilogue_kind kind, kiln_precision prec) {
    pair *x = mk2(KILN_DT_F32, m, k, FILL_RAND), *w = mk2(wdt, n, k, FILL_RAND);
    pair *y = mk2(KILN_DT_F32, m, n, kind == KILN_EPI_NONE ? FILL_NAN : FILL_RAND);
    pair *b = bias ? mk1(KILN_DT_F32, n, FILL_RAND) : NULL, *g = mk1(KILN_DT_F32, n, FILL_RAND);
    kiln_epilogue epd = {kind, &g->d};
    dut->precision = prec;
    DUT(dut->ops->matmul(dut, &y->d, &x->d, &w->d, b ? &b->d : NULL, &epd, &e_));
    dut->precision = KILN_PREC_FAST;
    ref_matmul(y, x, w, b, g, kind, prec == KILN_PREC_FAST && wdt == KILN_DT_BF16, n, 0, k, 0);
    compare(what, y, 1e-5);
}

static void test_matmul(void) {
    matmul_case("matmul bf16 77x300x256", 77, 300, 256, KILN_DT_BF16, false, KILN_EPI_NONE, KILN_PREC_FAST);
    matmul_case("matmul bf16 +bias", 33, 130, 96, KILN_DT_BF16, true, KILN_EPI_NONE, KILN_PREC_FAST);
    matmul_case("matmul bf16 add", 65, 72, 200, KILN_DT_BF16, false, KILN_EPI_ADD, KILN_PREC_FAST);
    matmul_case("matmul bf16 add+bias", 65, 72, 200, KILN_DT_BF16, true, KILN_EPI_ADD, KILN_PREC_FAST);
    matmul_case("matmul bf16 gated residual", 129, 96, 320, KILN_DT_BF16, false, KILN_EPI_GATED_RESIDUAL, KILN_PREC_FAST);
    matmul_case("matmul bf16 m=1 (modulation)", 1, 1536, 512, KILN_DT_BF16, false, KILN_EPI_NONE, KILN_PREC_FAST);
    matmul_case("matmul bf16 odd k=27", 50, 16, 27, KILN_DT_BF16, true, KILN_EPI_NONE, KILN_PREC_FAST);
    matmul_case("matmul bf16 256x1536x1024", 256, 1536, 1024, KILN_DT_BF16, false, KILN_EPI_NONE, KILN_PREC_FAST);
    matmul_case("matmul f32 weights", 31, 65, 33, KILN_DT_F32, true, KILN_EPI_NONE, KILN_PREC_FAST);
    matmul_case("matmul bf16 EXACT", 40, 48, 300, KILN_DT_BF16, false, KILN_EPI_GATED_RESIDUAL, KILN_PREC_EXACT);
    /* strided: x is a column block of a wider buffer, y a column block of another (fused QKV layouts) */
    pair *xb = mk2(KILN_DT_F32, 45, 200, FILL_RAND), *w = mk2(KILN_DT_BF16, 64, 96, FILL_RAND);
    pair *yb = mk2(KILN_DT_F32, 45, 192, FILL_RAND);
    vpair xv = view(xb, 0, 45, 100, 96), yv = view(yb, 0, 45, 64, 64);
    DUT(dut->ops->matmul(dut, &yv.d, &xv.d, &w->d, NULL, NULL, &e_));
    ref_matmul(yb, xb, w, NULL, NULL, KILN_EPI_NONE, true, 192, 64, 200, 100);
    compare("matmul strided x and y views", yb, 1e-5);
    /* residency (compute/ops.h): a weight placed from host memory is used through its placement (on CUDA: the
     * device copy at the same offset, also for a row view), and an activation over device memory whose tensor
     * still says CPU is accepted */
    pair *x2 = mk2(KILN_DT_F32, 37, 96, FILL_RAND), *y2 = mk2(KILN_DT_F32, 37, 32, FILL_NAN);
    kiln_tensor xd_cpu_tag = x2->d;
    xd_cpu_tag.backend = KILN_BACKEND_CPU;
    kiln_err e = {0};
    if (dut->kind == KILN_BACKEND_CUDA) { /* not placed: refused, never uploaded behind the caller's back */
        CHECK_EQ_INT(dut->ops->matmul(dut, &y2->d, &xd_cpu_tag, &w->h, NULL, NULL, &e), KILN_E_INVALID);
        CHECK_ERR_CONTAINS(&e, "host memory");
    }
    CHECK_MSG(dut->ops->place(dut, w->hbuf, w->bytes, &e) == KILN_OK, "%s", e.msg);
    kiln_tensor w_rows = kiln_tensor_rows(&w->h, 32, 32);
    DUT(dut->ops->matmul(dut, &y2->d, &xd_cpu_tag, &w_rows, NULL, NULL, &e_));
    dut->ops->unplace(dut, w->hbuf);
    float *y2h = y2->hbuf;
    for (int64_t r = 0; r < 37; r++)
        for (int64_t c = 0; c < 32; c++) {
            double acc = 0;
            for (int64_t i = 0; i < 96; i++) acc += act(x2, r * 96 + i, true) * val(w, (32 + c) * 96 + i);
            y2h[r * 32 + c] = (float)acc;
        }
    compare("matmul placed host weight (row view), CPU-tagged activation", y2, 1e-5);
    /* shape errors are errors */
    CHECK_EQ_INT(dut->ops->matmul(dut, &yv.d, &xv.d, &xb->d, NULL, NULL, &e), KILN_E_INVALID);
    free_pairs();
}

/* ---- quantised weights: GGUF blocks, fp8 with a scale, f16 ---- */

/* The f16 factors (d, dmin) of each block type, by byte offset: set to +-[1/64, 1/8) so that no value is inf or
 * NaN, the rest of the block random. */
static const struct qcase {
    uint32_t qtype;
    const char *name;
    int factors[2]; /* byte offsets of d (and dmin), -1: none */
} qcases[] = {
    {KILN_QT_Q8_0, "Q8_0", {0, -1}}, {KILN_QT_Q4_0, "Q4_0", {0, -1}}, {KILN_QT_Q5_0, "Q5_0", {0, -1}},
    {KILN_QT_Q2_K, "Q2_K", {80, 82}}, {KILN_QT_Q3_K, "Q3_K", {108, -1}}, {KILN_QT_Q4_K, "Q4_K", {0, 2}},
    {KILN_QT_Q5_K, "Q5_K", {0, 2}},  {KILN_QT_Q6_K, "Q6_K", {208, -1}},
};

/* A quantised [n, k] weight (dt KILN_DT_QBLOCK of qtype, fp8 with scale, or f16) on both sides, and in *deq its
 * values as the device's GEMM sees them: the CPU's dequantisation (kiln_dequant; fp8 times the scale in f32),
 * rounded to bf16 when round (CUDA FAST). The CPU backend widens them to f32 in every mode. */
static pair *mkq(kiln_dtype dt, uint32_t qtype, const int *factors, int64_t n, int64_t k, float scale, bool round,
                 pair **deq) {
    pair *p = calloc(1, sizeof *p);
    p->h = dt == KILN_DT_QBLOCK ? kiln_tensor_make_q(NULL, qtype, n, k) : kiln_tensor_make(NULL, dt, 2, (int64_t[]){n, k});
    if (dt == KILN_DT_F8_E4M3 || dt == KILN_DT_F8_E5M2) p->h.qscale = scale;
    p->bytes = kiln_tensor_nbytes(&p->h);
    uint8_t *b = p->hbuf = malloc(p->bytes);
    for (size_t i = 0; i < p->bytes; i++) b[i] = (uint8_t)((frand() + 1.0f) * 128.0f);
    float *v = malloc((size_t)(n * k) * sizeof *v);
    kiln_err e = {0};
    if (dt == KILN_DT_QBLOCK) {
        const kiln_qtype_info *qi = kiln_qtype_get(qtype);
        for (size_t blk = 0; blk < p->bytes / qi->bytes; blk++)
            for (int f = 0; f < 2 && factors[f] >= 0; f++) {
                float d = (frand() > 0 ? 1.0f : -1.0f) * (1.0f / 64 + (0.5f + 0.5f * frand()) * (1.0f / 8 - 1.0f / 64));
                uint16_t h = kiln_f32_to_f16(d);
                b[blk * qi->bytes + (size_t)factors[f]] = (uint8_t)h;
                b[blk * qi->bytes + (size_t)factors[f] + 1] = (uint8_t)(h >> 8);
            }
        CHECK_EQ_INT(kiln_dequant(v, qtype, b, (size_t)(n * k), &e), KILN_OK);
    } else if (dt == KILN_DT_F16) {
        for (int64_t i = 0; i < n * k; i++) { /* random halves in +-[0, 2) */
            uint16_t h = kiln_f32_to_f16(2.0f * frand());
            memcpy(b + 2 * i, &h, 2);
            v[i] = kiln_f16_to_f32(h);
        }
    } else {
        for (int64_t i = 0; i < n * k; i++) {
            if (dt == KILN_DT_F8_E4M3 && (b[i] & 0x7f) == 0x7f) b[i] = 0; /* the NaN codes */
            if (dt == KILN_DT_F8_E5M2 && (b[i] & 0x7c) == 0x7c) b[i] = 0; /* inf and NaN */
            v[i] = (dt == KILN_DT_F8_E4M3 ? kiln_e4m3_to_f32(b[i]) : kiln_e5m2_to_f32(b[i])) * scale;
        }
    }
    p->h.data = p->hbuf;
    p->d = p->h;
    p->dbuf = dut->ops->alloc(dut, p->bytes);
    p->d.data = p->dbuf;
    p->d.backend = dut->kind;
    p->d.device = dut->device;
    CHECK(p->dbuf != NULL);
    if (p->dbuf) CHECK_EQ_INT(dut->ops->upload(dut, p->dbuf, p->hbuf, p->bytes, NULL), KILN_OK);
    if (n_pairs < MAX_PAIRS) pairs[n_pairs++] = p;
    *deq = mk2(KILN_DT_F32, n, k, FILL_NAN);
    float *dh = (*deq)->hbuf;
    for (int64_t i = 0; i < n * k; i++) dh[i] = round ? f32_of_bf16(bf16_of(v[i])) : v[i];
    free(v);
    return p;
}

/* y = x . w^T for a quantised w against the float64 product on its dequantised values; and with x the identity,
 * y = the device's dequantised weight itself, which must equal the CPU's bit for bit (tolerance 0). */
static void quant_case(const char *what, kiln_dtype dt, uint32_t qtype, const int *factors, float scale,
                       kiln_precision prec, bool bias, kiln_epilogue_kind kind) {
    const int64_t m = 19, n = 40, k = 512;
    const bool round = prec == KILN_PREC_FAST && dut->kind == KILN_BACKEND_CUDA;
    pair *deq, *w = mkq(dt, qtype, factors, n, k, scale, round, &deq);
    pair *x = mk2(KILN_DT_F32, m, k, FILL_RAND);
    pair *y = mk2(KILN_DT_F32, m, n, kind == KILN_EPI_NONE ? FILL_NAN : FILL_RAND);
    pair *b = bias ? mk1(KILN_DT_F32, n, FILL_RAND) : NULL, *g = mk1(KILN_DT_F32, n, FILL_RAND);
    kiln_epilogue epd = {kind, &g->d};
    dut->precision = prec;
    DUT(dut->ops->matmul(dut, &y->d, &x->d, &w->d, b ? &b->d : NULL, &epd, &e_));
    ref_matmul(y, x, deq, b, g, kind, round, n, 0, k, 0);
    char name[96];
    snprintf(name, sizeof name, "%s %s", what, prec == KILN_PREC_EXACT ? "EXACT" : "FAST");
    compare(name, y, 1e-5);
    /* the identity: y[i][j] = w[j][i] exactly (one non-zero product per output) */
    pair *eye = mk2(KILN_DT_F32, k, k, FILL_NAN), *yt = mk2(KILN_DT_F32, k, n, FILL_NAN);
    float *eh = eye->hbuf, *th = yt->hbuf, *dqh = deq->hbuf;
    for (int64_t i = 0; i < k * k; i++) eh[i] = i / k == i % k ? 1.0f : 0.0f;
    CHECK_EQ_INT(dut->ops->upload(dut, eye->dbuf, eye->hbuf, eye->bytes, NULL), KILN_OK);
    DUT(dut->ops->matmul(dut, &yt->d, &eye->d, &w->d, NULL, NULL, &e_));
    dut->precision = KILN_PREC_FAST;
    for (int64_t i = 0; i < k; i++)
        for (int64_t j = 0; j < n; j++) th[i * n + j] = dqh[j * k + i];
    snprintf(name, sizeof name, "%s %s: dequantised values", what, prec == KILN_PREC_EXACT ? "EXACT" : "FAST");
    compare(name, yt, 0.0);
    free_pairs();
}

/* KILN_CUDA_FP8=1 (sm_89+): an e4m3 weight as stored times the activation quantised per tensor - s = max|x| / 448,
 * e4m3(x / s) rounded to nearest even - and the product times both scales. The reference quantises exactly so
 * (tensor/convert.h's e4m3 conversions) and sums in double: 1e-5 measures the device's f32 sums only. k = 40 is
 * not a multiple of 16, which cuBLASLt's fp8 GEMMs refuse: that weight must be widened as without the variable. */
static void fp8_gemm_case(kiln_backend *be8, int64_t m, int64_t n, int64_t k, bool native, bool bias,
                          kiln_epilogue_kind kind) {
    const int none[2] = {-1, -1};
    pair *deq, *w = mkq(KILN_DT_F8_E4M3, 0, none, n, k, 0.0173f, !native, &deq);
    pair *x = mk2(KILN_DT_F32, m, k, FILL_RAND), *y = mk2(KILN_DT_F32, m, n, kind == KILN_EPI_NONE ? FILL_NAN : FILL_RAND);
    pair *b = bias ? mk1(KILN_DT_F32, n, FILL_RAND) : NULL, *g = mk1(KILN_DT_F32, n, FILL_RAND);
    float *xh = x->hbuf;
    for (int64_t i = 0; i < m * k; i++) xh[i] *= 7.0f; /* a range away from 448: the scale matters */
    CHECK_EQ_INT(dut->ops->upload(dut, x->dbuf, x->hbuf, x->bytes, NULL), KILN_OK);
    kiln_epilogue epd = {kind, &g->d};
    DUT(be8->ops->matmul(be8, &y->d, &x->d, &w->d, b ? &b->d : NULL, &epd, &e_));
    if (native) { /* the reference's operands: x quantised as the device does, w's e4m3 values unscaled */
        float amax = 0;
        for (int64_t i = 0; i < m * k; i++) amax = fabsf(xh[i]) > amax ? fabsf(xh[i]) : amax;
        float sx = amax > 0 ? amax / 448.0f : 1.0f;
        for (int64_t i = 0; i < m * k; i++) xh[i] = kiln_e4m3_to_f32(kiln_f32_to_e4m3(xh[i] / sx));
        float *dh = deq->hbuf;
        for (int64_t i = 0; i < n * k; i++) dh[i] = kiln_e4m3_to_f32(((uint8_t *)w->hbuf)[i]) * (0.0173f * sx);
    }
    ref_matmul(y, x, deq, b, g, kind, !native, n, 0, k, 0);
    char what[96];
    snprintf(what, sizeof what, "matmul fp8 %s %lldx%lldx%lld%s", native ? "e4m3 x e4m3" : "widened",
             (long long)m, (long long)n, (long long)k, kind == KILN_EPI_GATED_RESIDUAL ? " gated" : kind == KILN_EPI_ADD ? " y += P"
             : bias ? " +bias" : "");
    compare(what, y, 1e-5);
    free_pairs();
}

static void fp8_gemm_cases(void) {
    setenv("KILN_CUDA_FP8", "1", 1);
    kiln_backend *be8 = NULL;
    kiln_err e = {0};
    kiln_status s = kiln_backend_open_cuda(0, &be8, &e);
    unsetenv("KILN_CUDA_FP8");
    CHECK_MSG(s == KILN_OK, "KILN_CUDA_FP8=1: %s", e.msg);
    if (s != KILN_OK) return;
    /* before sm_89 there are no e4m3 GEMMs: the weight is widened, as without the variable */
    const bool native = kiln_backend_cuda_cc(be8) >= 89;
    printf("  KILN_CUDA_FP8=1 on sm_%d: %s\n", kiln_backend_cuda_cc(be8), native ? "e4m3 x e4m3 GEMMs" : "widened weights");
    fp8_gemm_case(be8, 37, 48, 256, native, false, KILN_EPI_NONE);
    fp8_gemm_case(be8, 5, 64, 512, native, true, KILN_EPI_NONE);
    fp8_gemm_case(be8, 21, 32, 128, native, false, KILN_EPI_GATED_RESIDUAL);
    fp8_gemm_case(be8, 64, 48, 256, native, false, KILN_EPI_ADD); /* the GEMM's own beta = 1, in device memory */
    fp8_gemm_case(be8, 9, 24, 40, false, false, KILN_EPI_NONE);
    kiln_backend_close(be8);
}

static void test_quant_matmul(void) {
    const int none[2] = {-1, -1};
    for (size_t i = 0; i < sizeof qcases / sizeof qcases[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "matmul GGUF %s", qcases[i].name);
        quant_case(what, KILN_DT_QBLOCK, qcases[i].qtype, qcases[i].factors, 1.0f, KILN_PREC_FAST, i == 0,
                   i == 1 ? KILN_EPI_GATED_RESIDUAL : KILN_EPI_NONE);
    }
    quant_case("matmul GGUF Q4_K", KILN_DT_QBLOCK, KILN_QT_Q4_K, qcases[5].factors, 1.0f, KILN_PREC_EXACT, true,
               KILN_EPI_ADD);
    quant_case("matmul fp8 e4m3 x 0.0173", KILN_DT_F8_E4M3, 0, none, 0.0173f, KILN_PREC_FAST, true, KILN_EPI_NONE);
    quant_case("matmul fp8 e4m3 x 0.0173", KILN_DT_F8_E4M3, 0, none, 0.0173f, KILN_PREC_EXACT, false, KILN_EPI_NONE);
    quant_case("matmul fp8 e5m2 x 3.5", KILN_DT_F8_E5M2, 0, none, 3.5f, KILN_PREC_FAST, false, KILN_EPI_ADD);
    quant_case("matmul f16 weights", KILN_DT_F16, 0, none, 1.0f, KILN_PREC_FAST, false, KILN_EPI_NONE);
    quant_case("matmul f16 weights", KILN_DT_F16, 0, none, 1.0f, KILN_PREC_EXACT, false, KILN_EPI_NONE);

    /* a row view of a quantised weight placed from host memory (FLUX.1's fused qkv rows, sliced as views of the
     * quantised rows): used through its placement at the same offset */
    pair *deq, *w = mkq(KILN_DT_QBLOCK, KILN_QT_Q6_K, qcases[7].factors, 48, 256, 1.0f,
                        dut->kind == KILN_BACKEND_CUDA, &deq);
    pair *x = mk2(KILN_DT_F32, 7, 256, FILL_RAND), *y = mk2(KILN_DT_F32, 7, 16, FILL_NAN);
    kiln_err e = {0};
    CHECK_MSG(dut->ops->place(dut, w->hbuf, w->bytes, &e) == KILN_OK, "%s", e.msg);
    kiln_tensor rows = kiln_tensor_rows(&w->h, 16, 16);
    DUT(dut->ops->matmul(dut, &y->d, &x->d, &rows, NULL, NULL, &e_));
    dut->ops->unplace(dut, w->hbuf);
    float *yh = y->hbuf;
    for (int64_t r = 0; r < 7; r++)
        for (int64_t c = 0; c < 16; c++) {
            double acc = 0;
            for (int64_t i = 0; i < 256; i++)
                acc += act(x, r * 256 + i, dut->kind == KILN_BACKEND_CUDA) * val(deq, (16 + c) * 256 + i);
            yh[r * 16 + c] = (float)acc;
        }
    compare("matmul placed GGUF Q6_K weight (row view)", y, 1e-5);
    /* a GGML type without a device dequantisation is refused by name */
    if (dut->kind == KILN_BACKEND_CUDA) {
        kiln_tensor q41 = kiln_tensor_make_q(w->dbuf, 3 /* GGML Q4_1 */, 4, 64);
        q41.backend = dut->kind, q41.device = dut->device;
        kiln_tensor x4 = kiln_tensor_rows(&x->d, 0, 4), y4 = kiln_tensor_rows(&y->d, 0, 4);
        x4.shape[1] = 64, y4.shape[1] = 4;
        CHECK_EQ_INT(dut->ops->matmul(dut, &y4, &x4, &q41, NULL, NULL, &e), KILN_E_UNSUPPORTED);
        CHECK_ERR_CONTAINS(&e, "Q4_1");
    }
    free_pairs();
    if (dut->kind == KILN_BACKEND_CUDA) fp8_gemm_cases();
    else printf("  not run: e4m3 x e4m3 GEMMs (KILN_CUDA_FP8; CUDA only)\n");
}

/* ---- attention ---- */

/* T5's position bias as an attention bias: [hq * sq, sk] f32 in [-4, 4), every 5th key of query row 1 -inf (an
 * excluded key). */
static pair *attn_bias(int64_t sq, int64_t sk, int hq) {
    pair *b = mk2(KILN_DT_F32, (int64_t)hq * sq, sk, FILL_RAND);
    float *bh = b->hbuf;
    for (int64_t r = 0; r < (int64_t)hq * sq; r++)
        for (int64_t j = 0; j < sk; j++) bh[r * sk + j] = r % sq == 1 && j % 5 == 0 ? -INFINITY : 4.0f * bh[r * sk + j];
    CHECK_EQ_INT(dut->ops->upload(dut, b->dbuf, b->hbuf, b->bytes, NULL), KILN_OK);
    return b;
}

/* scale 0: 3 / sqrt(dh), sharper than usual (exercises the running max); bias: attn_bias's table. */
static void attn_case_full(const char *what, int64_t sq, int64_t sk, int hq, int hkv, int dh, bool causal, bool mask,
                           float scale, bool with_bias) {
    pair *q = mk2(KILN_DT_F32, sq, (int64_t)hq * dh, FILL_RAND), *k = mk2(KILN_DT_F32, sk, (int64_t)hkv * dh, FILL_RAND);
    pair *v = mk2(KILN_DT_F32, sk, (int64_t)hkv * dh, FILL_RAND), *o = mk2(KILN_DT_F32, sq, (int64_t)hq * dh, FILL_NAN);
    pair *km = mask ? mk1(KILN_DT_U8, sk, FILL_RAND) : NULL, *bias = with_bias ? attn_bias(sq, sk, hq) : NULL;
    if (scale == 0) scale = 1.0f / sqrtf((float)dh) * 3.0f;
    /* the device's attention in f32: EXACT on the CPU harness (its FAST attention runs bf16 tiles); CUDA's
     * default kernel is f32 either way */
    dut->precision = KILN_PREC_EXACT;
    DUT(dut->ops->attention(dut, &o->d, &q->d, &k->d, &v->d, hq, hkv, scale, causal, km ? &km->d : NULL,
                            bias ? &bias->d : NULL, &e_));
    dut->precision = KILN_PREC_FAST;
    /* KILN_CUDA_ATTENTION=tc rounds q, k, v (and p) to bf16 (tensor-core operands), every head dim to 512 */
    const char *att = getenv("KILN_CUDA_ATTENTION");
    bool tc = dut->kind == KILN_BACKEND_CUDA && att && (strcmp(att, "tc") == 0 || strcmp(att, "cudnn") == 0) && dh <= 512;
    ref_attention(o, q, k, v, hq, hkv, dh, scale, causal, km, bias, tc);
    compare(what, o, tc ? TC_TOL : 1e-5);
}

static void attn_case(const char *what, int64_t sq, int64_t sk, int hq, int hkv, int dh, bool causal, bool mask) {
    attn_case_full(what, sq, sk, hq, hkv, dh, causal, mask, 0, false);
}

static void test_attention(void) {
    attn_case("attention 4 heads dh128 s=77", 77, 77, 4, 4, 128, false, false);
    attn_case("attention dh128 s=300 (DiT-like)", 300, 300, 3, 3, 128, false, false);
    attn_case("attention GQA 8q/2kv causal (Qwen3)", 70, 70, 8, 2, 128, true, false);
    attn_case("attention key mask", 40, 90, 2, 2, 64, false, true);
    attn_case("attention causal + mask", 33, 33, 2, 1, 64, true, true);
    attn_case("attention 1 head dh512 (VAE mid)", 64, 64, 1, 1, 512, false, false);
    attn_case("attention 1 head dh512, 77 queries x 100 keys", 77, 100, 1, 1, 512, false, false);
    free_pairs();
    /* with an additive bias (T5: scale 1, the relative-position table): T5's head dims (64; 12 in the tiny
     * model), GQA, Sq != Sk, causal and the key mask with it */
    attn_case_full("attention + bias, scale 1 (T5) 8 heads dh64", 77, 77, 8, 8, 64, false, false, 1.0f, true);
    attn_case_full("attention + bias, scale 1 (tiny T5) dh12", 77, 77, 3, 3, 12, false, false, 1.0f, true);
    attn_case_full("attention + bias GQA 4q/2kv, sq 40 != sk 90", 40, 90, 4, 2, 64, false, true, 0, true);
    attn_case_full("attention + bias, causal + mask", 70, 70, 2, 1, 128, true, true, 0, true);
    /* over 128 the tensor-core variant splits the dims across warps (kernel B): 200 pads to 256, two warps */
    attn_case_full("attention dh200 GQA 4q/2kv, causal + mask + bias", 45, 45, 4, 2, 200, true, true, 0, true);
    free_pairs();
    /* the bias's shape and dtype are checked by name */
    pair *q = mk2(KILN_DT_F32, 3, 2 * 64, FILL_RAND), *o = mk2(KILN_DT_F32, 3, 2 * 64, FILL_NAN);
    pair *bad = mk2(KILN_DT_F32, 3, 3, FILL_RAND), *b16 = mk2(KILN_DT_BF16, 6, 3, FILL_RAND);
    kiln_err e = {0};
    CHECK_EQ_INT(dut->ops->attention(dut, &o->d, &q->d, &q->d, &q->d, 2, 2, 1.0f, false, NULL, &bad->d, &e),
                 KILN_E_INVALID);
    CHECK_ERR_CONTAINS(&e, "attention: bias must be a contiguous f32 [6, 3]");
    CHECK_EQ_INT(dut->ops->attention(dut, &o->d, &q->d, &q->d, &q->d, 2, 2, 1.0f, false, NULL, &b16->d, &e),
                 KILN_E_UNSUPPORTED);
    CHECK_ERR_CONTAINS(&e, "attention: bias is bf16, expected f32");
    free_pairs();
}

/* ---- norms, RoPE, softmax ---- */

static void test_norms(void) {
    pair *x = mk2(KILN_DT_F32, 37, 4 * 128, FILL_RAND), *y = mk2(KILN_DT_F32, 37, 512, FILL_NAN);
    pair *g = mk1(KILN_DT_F32, 128, FILL_RAND), *gb = mk1(KILN_DT_BF16, 512, FILL_RAND);
    BOTH(ref->ops->rms_norm(ref, &y->h, &x->h, &g->h, 1e-6f, &e_), dut->ops->rms_norm(dut, &y->d, &x->d, &g->d, 1e-6f, &e_));
    compare("rms_norm per head (G=128)", y, 1e-5);
    BOTH(ref->ops->rms_norm(ref, &y->h, &x->h, &gb->h, 1e-6f, &e_), dut->ops->rms_norm(dut, &y->d, &x->d, &gb->d, 1e-6f, &e_));
    compare("rms_norm whole row, bf16 gain", y, 1e-5);
    BOTH(ref->ops->rms_norm(ref, &x->h, &x->h, &g->h, 1e-6f, &e_), dut->ops->rms_norm(dut, &x->d, &x->d, &g->d, 1e-6f, &e_));
    compare("rms_norm in place", x, 1e-5);

    pair *a = mk2(KILN_DT_F32, 29, 3 * 96 + 5, FILL_RAND), *b = mk2(KILN_DT_F32, 29, 293, FILL_NAN);
    pair *sh = mk1(KILN_DT_F32, 293, FILL_RAND), *sc = mk1(KILN_DT_F32, 293, FILL_RAND);
    BOTH(ref->ops->layer_norm_modulate(ref, &b->h, &a->h, &sh->h, &sc->h, 1e-6f, &e_),
         dut->ops->layer_norm_modulate(dut, &b->d, &a->d, &sh->d, &sc->d, 1e-6f, &e_));
    compare("layer_norm_modulate", b, 1e-5);
    BOTH(ref->ops->layer_norm_modulate(ref, &b->h, &a->h, NULL, NULL, 1e-6f, &e_),
         dut->ops->layer_norm_modulate(dut, &b->d, &a->d, NULL, NULL, 1e-6f, &e_));
    compare("layer_norm (no modulation)", b, 1e-5);

    pair *s = mk2(KILN_DT_F32, 21, 1000, FILL_RAND), *so = mk2(KILN_DT_F32, 21, 1000, FILL_NAN);
    BOTH(ref->ops->softmax(ref, &so->h, &s->h, &e_), dut->ops->softmax(dut, &so->d, &s->d, &e_));
    compare("softmax", so, 1e-5);

    for (int il = 0; il < 2; il++) {
        pair *r = mk2(KILN_DT_F32, 2 * 19, 3 * 64, FILL_RAND);
        pair *c = mk2(KILN_DT_F32, 19, 32, FILL_RAND), *sn = mk2(KILN_DT_F32, 19, 32, FILL_RAND);
        BOTH(ref->ops->rope(ref, &r->h, &c->h, &sn->h, 3, il, &e_), dut->ops->rope(dut, &r->d, &c->d, &sn->d, 3, il, &e_));
        compare(il ? "rope interleaved (batch 2 shares the table)" : "rope half-split", r, 1e-5);
    }
    free_pairs();
}

/* ---- elementwise ---- */

static void test_elementwise(void) {
    pair *ab = mk2(KILN_DT_F32, 23, 2 * 150, FILL_RAND), *y = mk2(KILN_DT_F32, 23, 150, FILL_NAN);
    BOTH(ref->ops->swiglu(ref, &y->h, &ab->h, &e_), dut->ops->swiglu(dut, &y->d, &ab->d, &e_));
    compare("swiglu", y, 1e-5);
    pair *a = mk2(KILN_DT_F32, 23, 150, FILL_RAND), *b = mk2(KILN_DT_F32, 23, 150, FILL_RAND);
    BOTH(ref->ops->silu_mul(ref, &y->h, &a->h, &b->h, &e_), dut->ops->silu_mul(dut, &y->d, &a->d, &b->d, &e_));
    compare("silu_mul", y, 1e-5);
    BOTH(ref->ops->gelu_mul(ref, &y->h, &a->h, &b->h, &e_), dut->ops->gelu_mul(dut, &y->d, &a->d, &b->d, &e_));
    compare("gelu_mul", y, 1e-5);
    pair *g2 = mk2(KILN_DT_F32, 23, 150, FILL_RAND); /* in place, y == a (T5's G = gelu(G) * U) */
    BOTH(ref->ops->gelu_mul(ref, &g2->h, &g2->h, &b->h, &e_), dut->ops->gelu_mul(dut, &g2->d, &g2->d, &b->d, &e_));
    compare("gelu_mul in place", g2, 1e-5);
    BOTH(ref->ops->silu(ref, &y->h, &a->h, &e_), dut->ops->silu(dut, &y->d, &a->d, &e_));
    compare("silu", y, 1e-5);
    BOTH(ref->ops->gelu_tanh(ref, &y->h, &a->h, &e_), dut->ops->gelu_tanh(dut, &y->d, &a->d, &e_));
    compare("gelu_tanh", y, 1e-5);
    BOTH(ref->ops->add(ref, &y->h, &a->h, &b->h, &e_), dut->ops->add(dut, &y->d, &a->d, &b->d, &e_));
    compare("add", y, 1e-6);
    pair *g = mk1(KILN_DT_F32, 150, FILL_RAND);
    BOTH(ref->ops->gated_add(ref, &a->h, &g->h, &b->h, &e_), dut->ops->gated_add(dut, &a->d, &g->d, &b->d, &e_));
    compare("gated_add", a, 1e-6);
    BOTH(ref->ops->scale_shift(ref, &y->h, &b->h, 1.5f, -0.25f, &e_), dut->ops->scale_shift(dut, &y->d, &b->d, 1.5f, -0.25f, &e_));
    compare("scale_shift", y, 1e-6);
    /* copy: a cast into a column block, and a transposed (strided) read */
    pair *src = mk2(KILN_DT_F32, 17, 40, FILL_RAND), *dst = mk2(KILN_DT_BF16, 17, 64, FILL_RAND);
    vpair dv = view(dst, 0, 17, 10, 40);
    kiln_tensor sh = src->h, sd = src->d;
    BOTH(ref->ops->copy(ref, &dv.h, &sh, &e_), dut->ops->copy(dut, &dv.d, &sd, &e_));
    compare("copy f32 -> bf16 into a column block", dst, -1);
    pair *tr = mk2(KILN_DT_F32, 40, 17, FILL_NAN);
    kiln_tensor th = src->h, td = src->d; /* [17, 40] seen as [40, 17] with swapped strides */
    th.shape[0] = td.shape[0] = 40, th.shape[1] = td.shape[1] = 17;
    th.stride[0] = td.stride[0] = 1, th.stride[1] = td.stride[1] = 40;
    BOTH(ref->ops->copy(ref, &tr->h, &th, &e_), dut->ops->copy(dut, &tr->d, &td, &e_));
    compare("copy transposed", tr, -1);
    free_pairs();
}

/* ---- bf16 activations (compute/ops.h kiln_backend_act_dtype: the DiT's activations on CUDA in FAST) ---- */

/* Rounds f32 pair p's values to bf16 (host and device) and returns a bf16 pair holding the same numbers: the CPU
 * reference then runs in f32 on exactly what the device reads in bf16. */
static pair *bf16_twin(pair *p) {
    pair *t = mk(KILN_DT_BF16, p->h.ndim, p->h.shape, FILL_NAN);
    int64_t n = kiln_tensor_numel(&p->h);
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = bf16_of(((float *)p->hbuf)[i]);
        ((uint16_t *)t->hbuf)[i] = h;
        ((float *)p->hbuf)[i] = f32_of_bf16(h);
    }
    CHECK_EQ_INT(dut->ops->upload(dut, p->dbuf, p->hbuf, p->bytes, NULL), KILN_OK);
    CHECK_EQ_INT(dut->ops->upload(dut, t->dbuf, t->hbuf, t->bytes, NULL), KILN_OK);
    return t;
}
/* Compares bf16 output t of the device with f32 reference r rounded to bf16 (r's host values, as computed). The
 * device rounds its f32 result once, so the two differ only where a value lies within the f32 error of a bf16
 * rounding boundary: rel. L2 1e-3 is far below one bf16 step (3.9e-3) everywhere. */
static void compare_bf16(const char *what, pair *t, const pair *r) {
    int64_t n = kiln_tensor_numel(&r->h);
    for (int64_t i = 0; i < n; i++) ((uint16_t *)t->hbuf)[i] = bf16_of(((const float *)r->hbuf)[i]);
    compare(what, t, 1e-3);
}

/* A bf16 attention output against the f32 reference o: the bf16 tolerance, or (tc: P rounded to bf16 too) the
 * tensor-core variant's on the widened output. */
static void compare_attention_bf16(const char *what, pair *o16, pair *o, bool tc) {
    if (!tc) {
        compare_bf16(what, o16, o);
        return;
    }
    pair *of = mk2(KILN_DT_F32, o->h.shape[0], o->h.shape[1], FILL_NAN);
    BOTH(ref->ops->copy(ref, &of->h, &o->h, &e_), dut->ops->copy(dut, &of->d, &o16->d, &e_));
    char name[160];
    snprintf(name, sizeof name, "%s (tensor cores)", what);
    compare(name, of, TC_TOL);
}

/* Attention on contiguous bf16 q, k, v (rounded twins of the f32 reference's) into a bf16 output. */
static void attn_bf16_case(const char *what, int64_t sq, int64_t sk, int hq, int hkv, int dh, bool causal, bool tc) {
    pair *q = mk2(KILN_DT_F32, sq, (int64_t)hq * dh, FILL_RAND), *k = mk2(KILN_DT_F32, sk, (int64_t)hkv * dh, FILL_RAND);
    pair *v = mk2(KILN_DT_F32, sk, (int64_t)hkv * dh, FILL_RAND), *o = mk2(KILN_DT_F32, sq, (int64_t)hq * dh, FILL_NAN);
    pair *q16 = bf16_twin(q), *k16 = bf16_twin(k), *v16 = bf16_twin(v);
    pair *o16 = mk2(KILN_DT_BF16, sq, (int64_t)hq * dh, FILL_NAN);
    const float scale = 1.0f / sqrtf((float)dh);
    BOTH(ref->ops->attention(ref, &o->h, &q->h, &k->h, &v->h, hq, hkv, scale, causal, NULL, NULL, &e_),
         dut->ops->attention(dut, &o16->d, &q16->d, &k16->d, &v16->d, hq, hkv, scale, causal, NULL, NULL, &e_));
    compare_attention_bf16(what, o16, o, tc);
}

/* conv_case on a bf16 x (its rounded f32 twin for the reference), into bf16 (out16) or f32 */
static void conv_bf16_case(const char *what, int64_t n, int64_t ci, int64_t h, int64_t w, int64_t co, int ksz,
                           int stride, int pb, int pe, bool bias, bool out16) {
    int64_t ho = (h + pb + pe - ksz) / stride + 1, wo = (w + pb + pe - ksz) / stride + 1;
    pair *x = mk4(n, ci, h, w, FILL_RAND), *x16 = bf16_twin(x), *y = mk4(n, co, ho, wo, FILL_NAN);
    pair *y16 = out16 ? mk(KILN_DT_BF16, 4, y->h.shape, FILL_NAN) : y;
    pair *wt = mk(KILN_DT_BF16, 4, (int64_t[]){co, ci, ksz, ksz}, FILL_RAND);
    pair *b = bias ? mk1(KILN_DT_F32, co, FILL_RAND) : NULL;
    DUT(dut->ops->conv2d(dut, &y16->d, &x16->d, &wt->d, b ? &b->d : NULL, stride, pb, pe, &e_));
    ref_conv(y, x, wt, b, stride, pb, true);
    if (out16) compare_bf16(what, y16, y);
    else compare(what, y, 1e-5);
}

/* Relative L2 error of the bf16 values in got against the bf16 codes want (NaN where either is counted apart). */
static double rel_l2_bf16(const uint16_t *got, const uint16_t *want, int64_t n, int64_t *nan_bad) {
    double se = 0, sr = 0;
    *nan_bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double a = f32_of_bf16(got[i]), b = f32_of_bf16(want[i]);
        if (isnan(a) != isnan(b)) ++*nan_bad;
        if (isnan(a) || isnan(b)) continue;
        se += (a - b) * (a - b);
        sr += b * b;
    }
    return sr > 0 ? sqrt(se / sr) : sqrt(se);
}

/* A bf16 y the GEMM itself adds to (beta = 1: y += P, or the fused gated residual y += g * P) against two
 * legitimate numerics, passing within the bf16 tolerance (1e-3) of EITHER: (a) once = the float64 result y + P
 * (r's host values) rounded once to bf16; (b) twice = the product rounded to bf16 first (P, or g * P: prod's host
 * values), then added to y (y0, the bf16 values it held) in float and rounded again - PyTorch's unfused bf16
 * `y + linear(x)`, the official implementation's numerics. On an H200 (cuBLASLt 13.1) the kernel chosen for
 * 65x72x200 rounds twice (rel_l2 0 against (b), 2.9e-3 against (a)) while 77x300x256 rounds once
 * (tests/gpu/lt_probe.cu). Prints which model matched. */
static void compare_bf16_either(const char *what, pair *t, const pair *r, const pair *prod, const float *y0) {
    int64_t n = kiln_tensor_numel(&r->h), nan_a, nan_b;
    uint16_t *got = malloc((size_t)n * 2 + 2), *once = malloc((size_t)n * 2 + 2), *twice = malloc((size_t)n * 2 + 2);
    kiln_err err = {0};
    CHECK_EQ_INT(dut->ops->download(dut, got, t->dbuf, t->bytes, &err), KILN_OK);
    for (int64_t i = 0; i < n; i++) {
        once[i] = bf16_of(((const float *)r->hbuf)[i]);
        twice[i] = bf16_of(f32_of_bf16(bf16_of(((const float *)prod->hbuf)[i])) + y0[i]);
    }
    double ra = rel_l2_bf16(got, once, n, &nan_a), rb = rel_l2_bf16(got, twice, n, &nan_b);
    const double tol = 1e-3;
    bool ok_a = nan_a == 0 && ra <= tol, ok_b = nan_b == 0 && rb <= tol;
    printf("  %-44s n=%-8lld rel_l2 %.2e (rounded once) / %.2e (product rounded first)  tol 1e-03 %s%s\n", what,
           (long long)n, ra, rb, ok_a || ok_b ? "ok: matches " : "FAIL",
           ok_a && ok_b ? "both" : ok_a ? "rounded once" : ok_b ? "product rounded first" : "");
    CHECK_MSG(ok_a || ok_b, "%s: rel_l2 %.3g against the result rounded once, %.3g against the product rounded to "
              "bf16 first (tol %.1g), %lld/%lld NaN mismatches", what, ra, rb, tol, (long long)nan_a, (long long)nan_b);
    free(got), free(once), free(twice);
}

/* matmul with x, y or both in bf16: y in bf16 is written by the GEMM itself (kind NONE / ADD without a bias) or by
 * the epilogue kernel (bias, gate; an EXACT f32 GEMM); ADD and the gated residual read the bf16 y they add to. */
static void matmul_bf16_case(const char *what, int64_t m, int64_t n, int64_t k, bool x16, bool y16, bool bias,
                             kiln_epilogue_kind kind, kiln_precision prec) {
    pair *x = mk2(KILN_DT_F32, m, k, FILL_RAND), *w = mk2(KILN_DT_BF16, n, k, FILL_RAND);
    pair *y = mk2(KILN_DT_F32, m, n, kind == KILN_EPI_NONE ? FILL_NAN : FILL_RAND); /* NONE writes every element */
    pair *b = bias ? mk1(KILN_DT_F32, n, FILL_RAND) : NULL, *g = mk1(KILN_DT_F32, n, FILL_RAND);
    pair *xb = x16 ? bf16_twin(x) : x, *yb = y16 ? bf16_twin(y) : y;
    kiln_epilogue epd = {kind, &g->d};
    dut->precision = prec;
    DUT(dut->ops->matmul(dut, &yb->d, &xb->d, &w->d, b ? &b->d : NULL, &epd, &e_));
    dut->precision = KILN_PREC_FAST;
    /* y += P (or g * P) into a bf16 y through the GEMM's own beta = 1 (FAST, no bias): either rounding (above) */
    const bool beta1 = y16 && !bias && prec == KILN_PREC_FAST && kind != KILN_EPI_NONE;
    float *y0 = NULL;
    pair *pp = NULL;
    if (beta1) {
        int64_t ny = m * n;
        y0 = malloc((size_t)ny * sizeof *y0);
        memcpy(y0, y->hbuf, (size_t)ny * sizeof *y0); /* the bf16 values y holds (bf16_twin rounded them) */
        pp = mk2(KILN_DT_F32, m, n, FILL_NAN);
        ref_matmul(pp, x, w, NULL, NULL, KILN_EPI_NONE, true, n, 0, k, 0);
        if (kind == KILN_EPI_GATED_RESIDUAL)
            for (int64_t i = 0; i < ny; i++)
                ((float *)pp->hbuf)[i] = (float)(val(g, i % n) * ((float *)pp->hbuf)[i]);
    }
    ref_matmul(y, x, w, b, g, kind, prec == KILN_PREC_FAST, n, 0, k, 0);
    if (beta1) compare_bf16_either(what, yb, y, pp, y0);
    else if (y16) compare_bf16(what, yb, y);
    else compare(what, y, 1e-5);
    free(y0);
    free_pairs();
}

static void test_bf16_activations(void) {
    if (!dut->bf16_activations) {
        printf("  not run: bf16 activations (%s keeps f32 activations)\n", dut_name);
        return;
    }
    matmul_bf16_case("matmul bf16 x -> bf16 y (GEMM writes bf16)", 77, 300, 256, true, true, false, KILN_EPI_NONE,
                     KILN_PREC_FAST);
    matmul_bf16_case("matmul bf16 y += P (GEMM beta = 1 on bf16)", 65, 72, 200, true, true, false, KILN_EPI_ADD,
                     KILN_PREC_FAST);
    matmul_bf16_case("matmul bf16 gated residual", 129, 96, 320, true, true, false, KILN_EPI_GATED_RESIDUAL,
                     KILN_PREC_FAST);
    matmul_bf16_case("matmul bf16 +bias (epilogue)", 33, 130, 96, true, true, true, KILN_EPI_NONE, KILN_PREC_FAST);
    matmul_bf16_case("matmul f32 x -> bf16 y (img_in)", 50, 96, 64, false, true, false, KILN_EPI_NONE, KILN_PREC_FAST);
    matmul_bf16_case("matmul bf16 x -> f32 y (final_out)", 50, 64, 96, true, false, false, KILN_EPI_NONE,
                     KILN_PREC_FAST);
    matmul_bf16_case("matmul bf16 y, EXACT (f32 GEMM, epilogue)", 40, 48, 300, true, true, false, KILN_EPI_ADD,
                     KILN_PREC_EXACT);

    /* the DiT's layout: q | k | v column views of one bf16 [S, 3D] buffer; RMSNorm and RoPE in place on q and k,
     * attention over the views into a bf16 output; the f32 twins run the same ops on the CPU */
    const int H = 3, dh = 64;
    const int64_t S = 70, D = H * dh;
    pair *qkv = mk2(KILN_DT_F32, S, 3 * D, FILL_RAND), *qkv16 = bf16_twin(qkv);
    pair *gain = mk1(KILN_DT_F32, dh, FILL_POS);
    pair *cs = mk2(KILN_DT_F32, S, dh / 2, FILL_RAND), *sn = mk2(KILN_DT_F32, S, dh / 2, FILL_RAND);
    vpair q = view(qkv, 0, S, 0, D), q16 = view(qkv16, 0, S, 0, D), k = view(qkv, 0, S, D, D);
    vpair k16 = view(qkv16, 0, S, D, D), v = view(qkv, 0, S, 2 * D, D), v16 = view(qkv16, 0, S, 2 * D, D);
    BOTH(ref->ops->rms_norm(ref, &q.h, &q.h, &gain->h, 1e-6f, &e_),
         dut->ops->rms_norm(dut, &q16.d, &q16.d, &gain->d, 1e-6f, &e_));
    BOTH(ref->ops->rope(ref, &k.h, &cs->h, &sn->h, H, true, &e_),
         dut->ops->rope(dut, &k16.d, &cs->d, &sn->d, H, true, &e_));
    compare_bf16("rms_norm (q view) and rope (k view) in place, bf16", qkv16, qkv);
    pair *o = mk2(KILN_DT_F32, S, D, FILL_NAN), *o16 = mk2(KILN_DT_BF16, S, D, FILL_NAN);
    /* the reference from the bf16 values the device holds after the two in-place ops */
    int64_t nq = kiln_tensor_numel(&qkv->h);
    for (int64_t i = 0; i < nq; i++) ((float *)qkv->hbuf)[i] = f32_of_bf16(((uint16_t *)qkv16->hbuf)[i]);
    /* FAST: the tensor-core kernel unless KILN_CUDA_ATTENTION=simple (the backend's default, cuda_ops.c) */
    const char *att = getenv("KILN_CUDA_ATTENTION");
    bool tc = dut->kind == KILN_BACKEND_CUDA && !(att && strcmp(att, "simple") == 0);
    float scale = 1.0f / sqrtf((float)dh);
    BOTH(ref->ops->attention(ref, &o->h, &q.h, &k.h, &v.h, H, H, scale, false, NULL, NULL, &e_),
         dut->ops->attention(dut, &o16->d, &q16.d, &k16.d, &v16.d, H, H, scale, false, NULL, NULL, &e_));
    compare_attention_bf16("attention bf16 q/k/v views -> bf16", o16, o, tc);
    /* T5's attention on bf16 activations: the f32 position bias, scale 1 */
    pair *tb = attn_bias(S, S, H), *t16 = mk2(KILN_DT_BF16, S, D, FILL_NAN);
    BOTH(ref->ops->attention(ref, &o->h, &q.h, &k.h, &v.h, H, H, 1.0f, false, NULL, &tb->h, &e_),
         dut->ops->attention(dut, &t16->d, &q16.d, &k16.d, &v16.d, H, H, 1.0f, false, NULL, &tb->d, &e_));
    compare_attention_bf16("attention bf16 views + f32 bias -> bf16 (T5)", t16, o, tc);
    /* the VAE's single-head 512-dim attention on bf16 activations (the wide tensor-core kernel's cp.async path):
     * 45 tokens, a full 32-key tile then a partial one */
    {
        const int64_t S5 = 45, D5 = 512;
        pair *a5 = mk2(KILN_DT_F32, S5, 3 * D5, FILL_RAND), *a516 = bf16_twin(a5);
        vpair q5 = view(a5, 0, S5, 0, D5), k5 = view(a5, 0, S5, D5, D5), v5 = view(a5, 0, S5, 2 * D5, D5);
        vpair q516 = view(a516, 0, S5, 0, D5), k516 = view(a516, 0, S5, D5, D5), v516 = view(a516, 0, S5, 2 * D5, D5);
        pair *o5 = mk2(KILN_DT_F32, S5, D5, FILL_NAN), *o516 = mk2(KILN_DT_BF16, S5, D5, FILL_NAN);
        const float sc5 = 1.0f / sqrtf((float)D5);
        BOTH(ref->ops->attention(ref, &o5->h, &q5.h, &k5.h, &v5.h, 1, 1, sc5, false, NULL, NULL, &e_),
             dut->ops->attention(dut, &o516->d, &q516.d, &k516.d, &v516.d, 1, 1, sc5, false, NULL, NULL, &e_));
        compare_attention_bf16("attention bf16 1 head x 512 (VAE mid) -> bf16", o516, o5, tc);
    }
    /* contiguous bf16 q, k, v (the text encoders' layout), causal GQA and several key tiles: with
     * KILN_CUDA_ATTENTION=cudnn these, the views above and the timed one below are the calls cuDNN takes */
    attn_bf16_case("attention bf16 GQA 8q/2kv causal dh128 (Qwen3)", 70, 70, 8, 2, 128, true, tc);
    attn_bf16_case("attention bf16 2 heads dh128, 300 queries x 300 keys", 300, 300, 2, 2, 128, false, tc);
    attn_bf16_case("attention bf16 4 heads dh64, 37 queries x 130 keys", 37, 130, 4, 4, 64, false, tc);
    /* one wide head over several key tiles and, as GEMMs (KILN_CUDA_WIDE_ATTENTION=gemm), two chunks of rows */
    attn_bf16_case("attention bf16 1 head x 512, 300 queries x 300 keys", 300, 300, 1, 1, 512, false, tc);

    pair *x = mk2(KILN_DT_F32, 29, 293, FILL_RAND), *x16 = bf16_twin(x);
    pair *y = mk2(KILN_DT_F32, 29, 293, FILL_NAN), *y16 = mk2(KILN_DT_BF16, 29, 293, FILL_NAN);
    pair *sh = mk1(KILN_DT_F32, 293, FILL_RAND), *sc = mk1(KILN_DT_F32, 293, FILL_RAND);
    BOTH(ref->ops->layer_norm_modulate(ref, &y->h, &x->h, &sh->h, &sc->h, 1e-6f, &e_),
         dut->ops->layer_norm_modulate(dut, &y16->d, &x16->d, &sh->d, &sc->d, 1e-6f, &e_));
    compare_bf16("layer_norm_modulate bf16 -> bf16", y16, y);

    pair *ab = mk2(KILN_DT_F32, 23, 2 * 150, FILL_RAND), *ab16 = bf16_twin(ab);
    pair *sw = mk2(KILN_DT_F32, 23, 150, FILL_NAN), *sw16 = mk2(KILN_DT_BF16, 23, 150, FILL_NAN);
    BOTH(ref->ops->swiglu(ref, &sw->h, &ab->h, &e_), dut->ops->swiglu(dut, &sw16->d, &ab16->d, &e_));
    compare_bf16("swiglu bf16 -> bf16", sw16, sw);
    pair *ga = mk2(KILN_DT_F32, 23, 150, FILL_RAND), *ga16 = bf16_twin(ga), *gb = mk2(KILN_DT_F32, 23, 150, FILL_RAND);
    pair *gb16 = bf16_twin(gb), *gm = mk2(KILN_DT_F32, 23, 150, FILL_NAN);
    for (int64_t i = 0; i < 23 * 150; i++) ((float *)gm->hbuf)[i] = ((float *)ga->hbuf)[i];
    /* in place on the bf16 a, as T5 runs it: the reference in f32 on the same values, one rounding at the end */
    BOTH(ref->ops->gelu_mul(ref, &gm->h, &gm->h, &gb->h, &e_), dut->ops->gelu_mul(dut, &ga16->d, &ga16->d, &gb16->d, &e_));
    compare_bf16("gelu_mul bf16 -> bf16 in place (T5)", ga16, gm);
    pair *sa16 = bf16_twin(ga), *sm16 = mk2(KILN_DT_BF16, 23, 150, FILL_NAN), *sm = mk2(KILN_DT_F32, 23, 150, FILL_NAN);
    BOTH(ref->ops->silu_mul(ref, &sm->h, &ga->h, &gb->h, &e_), dut->ops->silu_mul(dut, &sm16->d, &sa16->d, &gb16->d, &e_));
    compare_bf16("silu_mul bf16 -> bf16", sm16, sm);
    pair *r = mk2(KILN_DT_F32, 23, 150, FILL_RAND), *r16 = bf16_twin(r), *gt = mk1(KILN_DT_F32, 150, FILL_RAND);
    pair *p = mk2(KILN_DT_F32, 23, 150, FILL_RAND);
    BOTH(ref->ops->gated_add(ref, &r->h, &gt->h, &p->h, &e_), dut->ops->gated_add(dut, &r16->d, &gt->d, &p->d, &e_));
    compare_bf16("gated_add into a bf16 residual, f32 update", r16, r);
    free_pairs();

    /* the VAE's image ops on bf16 NCHW: conv (bf16 in, bf16 out through f32 scratch with its bias; f32 latents in;
     * bf16 in, f32 image out), GroupNorm + SiLU, upsample; float64 / f32-CPU references on the same values */
    for (int cv = 0; cv < 3; cv++) {
        const bool in16 = cv != 1, out16 = cv != 2;
        pair *cx = mk4(1, 24, 13, 17, FILL_RAND), *cw = mk(KILN_DT_BF16, 4, (int64_t[]){40, 24, 3, 3}, FILL_RAND);
        pair *cb = mk1(KILN_DT_F32, 40, FILL_RAND), *cy = mk4(1, 40, 13, 17, FILL_NAN);
        pair *cx16 = in16 ? bf16_twin(cx) : cx, *cy16 = out16 ? mk(KILN_DT_BF16, 4, cy->h.shape, FILL_NAN) : cy;
        DUT(dut->ops->conv2d(dut, &cy16->d, &cx16->d, &cw->d, &cb->d, 1, 1, 1, &e_));
        ref_conv(cy, cx, cw, cb, 1, 1, true);
        const char *name[3] = {"conv2d 3x3 +bias bf16 -> bf16", "conv2d 3x3 +bias f32 -> bf16 (conv_in)",
                               "conv2d 3x3 +bias bf16 -> f32 (conv_out)"};
        if (out16) compare_bf16(name[cv], cy16, cy);
        else compare(name[cv], cy, 1e-5);
        free_pairs();
    }
    /* the other shapes on bf16 (what KILN_CUDA_CONV=cudnn hands cuDNN): the stride-2 downsample with its (0, 1)
     * padding, a 1x1 shortcut without bias, conv_out's 3 channels into f32, a batch of 2 */
    conv_bf16_case("conv2d 3x3 s2 pad right/bottom bf16 -> bf16", 1, 16, 20, 18, 16, 3, 2, 0, 1, true, true);
    conv_bf16_case("conv2d 1x1 bf16 -> bf16, no bias", 1, 40, 9, 11, 24, 1, 1, 0, 0, false, true);
    conv_bf16_case("conv2d 3x3 to 3 channels bf16 -> f32", 1, 64, 16, 16, 3, 3, 1, 1, 1, true, false);
    conv_bf16_case("conv2d 3x3 batch 2, 32 -> 48, bf16 -> bf16", 2, 32, 19, 23, 48, 3, 1, 1, 1, true, true);
    pair *gx = mk4(1, 32, 9, 11, FILL_RAND), *gx16 = bf16_twin(gx), *gy = mk4(1, 32, 9, 11, FILL_NAN);
    pair *gy16 = mk(KILN_DT_BF16, 4, gy->h.shape, FILL_NAN);
    pair *gg = mk1(KILN_DT_F32, 32, FILL_RAND), *gbeta = mk1(KILN_DT_F32, 32, FILL_RAND);
    BOTH(ref->ops->group_norm(ref, &gy->h, &gx->h, 8, &gg->h, &gbeta->h, 1e-6f, true, &e_),
         dut->ops->group_norm(dut, &gy16->d, &gx16->d, 8, &gg->d, &gbeta->d, 1e-6f, true, &e_));
    compare_bf16("group_norm + SiLU bf16 -> bf16", gy16, gy);
    pair *uy = mk4(1, 32, 18, 22, FILL_NAN), *uy16 = mk(KILN_DT_BF16, 4, uy->h.shape, FILL_NAN);
    BOTH(ref->ops->upsample2x(ref, &uy->h, &gx->h, &e_), dut->ops->upsample2x(dut, &uy16->d, &gx16->d, &e_));
    compare_bf16("upsample2x bf16 -> bf16", uy16, uy);
    free_pairs();
}

/* ---- images ---- */

static void conv_case(const char *what, int64_t n, int64_t ci, int64_t h, int64_t w, int64_t co, int ksz, int stride,
                      int pb, int pe, bool bias) {
    int64_t ho = (h + pb + pe - ksz) / stride + 1, wo = (w + pb + pe - ksz) / stride + 1;
    pair *x = mk4(n, ci, h, w, FILL_RAND), *y = mk4(n, co, ho, wo, FILL_NAN);
    pair *wt = mk(KILN_DT_BF16, 4, (int64_t[]){co, ci, ksz, ksz}, FILL_RAND);
    pair *b = bias ? mk1(KILN_DT_F32, co, FILL_RAND) : NULL;
    DUT(dut->ops->conv2d(dut, &y->d, &x->d, &wt->d, b ? &b->d : NULL, stride, pb, pe, &e_));
    ref_conv(y, x, wt, b, stride, pb, dut->precision == KILN_PREC_FAST);
    compare(what, y, 1e-5);
}

static void test_images(void) {
    conv_case("conv2d 3x3 s1 p1 +bias", 2, 32, 19, 23, 48, 3, 1, 1, 1, true);
    conv_case("conv2d 3x3 s2 pad right/bottom (VAE down)", 1, 16, 20, 18, 16, 3, 2, 0, 1, true);
    conv_case("conv2d 1x1 (shortcut)", 1, 40, 9, 11, 24, 1, 1, 0, 0, false);
    conv_case("conv2d 3x3 to 3 channels (conv_out)", 1, 64, 16, 16, 3, 3, 1, 1, 1, true);
    pair *x = mk4(2, 64, 13, 15, FILL_RAND), *y = mk4(2, 64, 13, 15, FILL_NAN);
    pair *ga = mk1(KILN_DT_F32, 64, FILL_RAND), *be = mk1(KILN_DT_F32, 64, FILL_RAND);
    for (int silu = 0; silu < 2; silu++) {
        BOTH(ref->ops->group_norm(ref, &y->h, &x->h, 32, &ga->h, &be->h, 1e-6f, silu, &e_),
             dut->ops->group_norm(dut, &y->d, &x->d, 32, &ga->d, &be->d, 1e-6f, silu, &e_));
        compare(silu ? "group_norm + silu" : "group_norm", y, 1e-5);
    }
    pair *u = mk4(2, 64, 26, 30, FILL_NAN);
    BOTH(ref->ops->upsample2x(ref, &u->h, &x->h, &e_), dut->ops->upsample2x(dut, &u->d, &x->d, &e_));
    compare("upsample2x", u, -1);
    free_pairs();
}

/* ---- determinism: same inputs, same bytes ---- */

static void test_determinism(void) {
    pair *x = mk2(KILN_DT_F32, 300, 512, FILL_RAND), *w = mk2(KILN_DT_BF16, 768, 512, FILL_RAND);
    pair *y1 = mk2(KILN_DT_F32, 300, 768, FILL_NAN), *y2 = mk2(KILN_DT_F32, 300, 768, FILL_NAN);
    CHECK_EQ_INT(dut->ops->matmul(dut, &y1->d, &x->d, &w->d, NULL, NULL, NULL), KILN_OK);
    CHECK_EQ_INT(dut->ops->matmul(dut, &y2->d, &x->d, &w->d, NULL, NULL, NULL), KILN_OK);
    pair *q = mk2(KILN_DT_F32, 200, 256, FILL_RAND), *o1 = mk2(KILN_DT_F32, 200, 256, FILL_NAN);
    pair *o2 = mk2(KILN_DT_F32, 200, 256, FILL_NAN);
    CHECK_EQ_INT(dut->ops->attention(dut, &o1->d, &q->d, &q->d, &q->d, 2, 2, 0.1f, false, NULL, NULL, NULL), KILN_OK);
    CHECK_EQ_INT(dut->ops->attention(dut, &o2->d, &q->d, &q->d, &q->d, 2, 2, 0.1f, false, NULL, NULL, NULL), KILN_OK);
    size_t nb = y1->bytes, na = o1->bytes;
    void *a = malloc(nb), *b = malloc(nb), *c = malloc(na), *d = malloc(na);
    CHECK_EQ_INT(dut->ops->download(dut, a, y1->dbuf, nb, NULL), KILN_OK);
    CHECK_EQ_INT(dut->ops->download(dut, b, y2->dbuf, nb, NULL), KILN_OK);
    CHECK_EQ_INT(dut->ops->download(dut, c, o1->dbuf, na, NULL), KILN_OK);
    CHECK_EQ_INT(dut->ops->download(dut, d, o2->dbuf, na, NULL), KILN_OK);
    CHECK_MSG(memcmp(a, b, nb) == 0, "matmul is not bit-identical run to run");
    CHECK_MSG(memcmp(c, d, na) == 0, "attention is not bit-identical run to run");
    printf("  determinism (matmul, attention run twice)                   %s\n",
           memcmp(a, b, nb) == 0 && memcmp(c, d, na) == 0 ? "bit-identical" : "DIFFER");
    free(a), free(b), free(c), free(d);
    free_pairs();
}

/* ---- timing (KILN_OPS_TIME=1, CUDA only): the DiT's heaviest ops at 1024x1024 (4096 + 512 tokens) ---- */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_timing(void) {
    const char *on = getenv("KILN_OPS_TIME");
    if (!on || strcmp(on, "1") != 0 || dut->kind != KILN_BACKEND_CUDA) return;
    const int64_t t = 4608, d = 3072;
    pair *q = mk2(KILN_DT_F32, t, d, FILL_RAND), *o = mk2(KILN_DT_F32, t, d, FILL_NAN);
    pair *w = mk2(KILN_DT_BF16, 27648, d, FILL_RAND), *y = mk2(KILN_DT_F32, t, 27648, FILL_NAN);
    /* the DiT's FAST layout (bf16 activations): q | k | v column views of one bf16 [t, 3d] buffer, bf16 outputs */
    pair *qkv = mk2(KILN_DT_BF16, t, 3 * d, FILL_RAND), *o16 = mk2(KILN_DT_BF16, t, d, FILL_NAN);
    pair *x16 = mk2(KILN_DT_BF16, t, d, FILL_RAND), *y16 = mk2(KILN_DT_BF16, t, 27648, FILL_NAN);
    vpair vq = view(qkv, 0, t, 0, d), vk = view(qkv, 0, t, d, d), vv = view(qkv, 0, t, 2 * d, d);
    /* "time attention" and "time matmul" (bf16 activations, as the DiT runs) are what tests/gpu/run.sh reads */
    static const char *names[4] = {"attention 4608 tokens x 24 heads x 128", "matmul 4608 x 27648 x 3072 (single linear1)",
                                   "(f32 activations) attention, same shape", "(f32 activations) matmul, same shape"};
    for (int op = 0; op < 4; op++) {
        double best = 1e30;
        for (int rep = 0; rep < 6; rep++) { /* the first is a warm-up */
            CHECK_EQ_INT(dut->ops->sync(dut, NULL), KILN_OK);
            double t0 = now_s();
            kiln_status st =
                op == 0 ? dut->ops->attention(dut, &o16->d, &vq.d, &vk.d, &vv.d, 24, 24, 0.088f, false, NULL, NULL, NULL)
                : op == 1 ? dut->ops->matmul(dut, &y16->d, &x16->d, &w->d, NULL, NULL, NULL)
                : op == 2 ? dut->ops->attention(dut, &o->d, &q->d, &q->d, &q->d, 24, 24, 0.088f, false, NULL, NULL, NULL)
                          : dut->ops->matmul(dut, &y->d, &q->d, &w->d, NULL, NULL, NULL);
            CHECK_EQ_INT(st, KILN_OK);
            CHECK_EQ_INT(dut->ops->sync(dut, NULL), KILN_OK);
            double dt = now_s() - t0;
            if (rep > 0 && dt < best) best = dt;
        }
        double flops = op % 2 == 0 ? 4.0 * t * t * d : 2.0 * t * 27648.0 * d;
        printf("  time %-46s %8.3f ms  %7.1f TFLOP/s\n", names[op], best * 1e3, flops / best / 1e12);
    }
    /* the same linear1 from an fp8 checkpoint: widened to bf16 per matmul (default), and e4m3 x e4m3 with the
     * activation quantised per tensor (KILN_CUDA_FP8=1, sm_89+) - what the fp8 path gains, end to end per matmul */
    pair *w8 = calloc(1, sizeof *w8);
    w8->h = kiln_tensor_make(NULL, KILN_DT_F8_E4M3, 2, (int64_t[]){27648, d});
    w8->h.qscale = 0.01f;
    w8->bytes = kiln_tensor_nbytes(&w8->h);
    uint8_t *wb = w8->hbuf = malloc(w8->bytes);
    for (size_t i = 0; i < w8->bytes; i++) wb[i] = (uint8_t)((frand() + 1.0f) * 127.0f) & 0xf7; /* no NaN codes */
    w8->h.data = w8->hbuf;
    w8->d = w8->h;
    w8->d.data = w8->dbuf = dut->ops->alloc(dut, w8->bytes);
    w8->d.backend = dut->kind, w8->d.device = dut->device;
    if (n_pairs < MAX_PAIRS) pairs[n_pairs++] = w8;
    CHECK_EQ_INT(dut->ops->upload(dut, w8->dbuf, w8->hbuf, w8->bytes, NULL), KILN_OK);
    setenv("KILN_CUDA_FP8", "1", 1);
    kiln_backend *be8 = NULL;
    CHECK_EQ_INT(kiln_backend_open_cuda(0, &be8, NULL), KILN_OK);
    unsetenv("KILN_CUDA_FP8");
    for (int v = 0; v < 2 && be8; v++) {
        kiln_backend *b = v ? be8 : dut;
        double best = 1e30;
        for (int rep = 0; rep < 6; rep++) {
            CHECK_EQ_INT(b->ops->sync(b, NULL), KILN_OK);
            double t0 = now_s();
            CHECK_EQ_INT(b->ops->matmul(b, &y->d, &q->d, &w8->d, NULL, NULL, NULL), KILN_OK);
            CHECK_EQ_INT(b->ops->sync(b, NULL), KILN_OK);
            double dt = now_s() - t0;
            if (rep > 0 && dt < best) best = dt;
        }
        printf("  time %-46s %8.3f ms  %7.1f TFLOP/s\n",
               v ? "e4m3 x e4m3 4608 x 27648 x 3072 (KILN_CUDA_FP8)" : "e4m3 weight widened 4608 x 27648 x 3072",
               best * 1e3, 2.0 * t * 27648.0 * d / best / 1e12);
    }
    kiln_backend_close(be8);
    free_pairs();
    /* the VAE's mid-block attention at 1024x1024: 16384 tokens, one head of 512 (the wide tensor-core kernel, or
     * GEMMs with KILN_CUDA_WIDE_ATTENTION=gemm): "time attention 16384" is what tests/gpu/run.sh compares */
    {
        const int64_t tv = 16384, dv = 512;
        pair *vqkv = mk2(KILN_DT_BF16, tv, 3 * dv, FILL_RAND), *vo = mk2(KILN_DT_BF16, tv, dv, FILL_NAN);
        vpair aq = view(vqkv, 0, tv, 0, dv), ak = view(vqkv, 0, tv, dv, dv), av = view(vqkv, 0, tv, 2 * dv, dv);
        double bestv = 1e30;
        for (int rep = 0; rep < 4; rep++) {
            CHECK_EQ_INT(dut->ops->sync(dut, NULL), KILN_OK);
            double t0 = now_s();
            CHECK_EQ_INT(dut->ops->attention(dut, &vo->d, &aq.d, &ak.d, &av.d, 1, 1, 0.0442f, false, NULL, NULL, NULL),
                         KILN_OK);
            CHECK_EQ_INT(dut->ops->sync(dut, NULL), KILN_OK);
            double dt = now_s() - t0;
            if (rep > 0 && dt < bestv) bestv = dt;
        }
        printf("  time %-46s %8.3f ms  %7.1f TFLOP/s\n", "attention 16384 tokens x 1 head x 512 (VAE mid)", bestv * 1e3,
               4.0 * tv * tv * dv / bestv / 1e12);
        free_pairs();
    }
    /* the VAE decoder's heaviest convolution kind: 3x3, 128 -> 128 channels at 1024x1024 on bf16 (im2col and a
     * GEMM, or cuDNN with KILN_CUDA_CONV=cudnn): "time conv2d" is what tests/gpu/run.sh compares */
    const int64_t hw = 1024, c = 128;
    pair *cx = mk(KILN_DT_BF16, 4, (int64_t[]){1, c, hw, hw}, FILL_RAND), *cy = mk(KILN_DT_BF16, 4, cx->h.shape, FILL_NAN);
    pair *cw = mk(KILN_DT_BF16, 4, (int64_t[]){c, c, 3, 3}, FILL_RAND), *cb = mk1(KILN_DT_F32, c, FILL_RAND);
    double best = 1e30;
    for (int rep = 0; rep < 6; rep++) {
        CHECK_EQ_INT(dut->ops->sync(dut, NULL), KILN_OK);
        double t0 = now_s();
        CHECK_EQ_INT(dut->ops->conv2d(dut, &cy->d, &cx->d, &cw->d, &cb->d, 1, 1, 1, NULL), KILN_OK);
        CHECK_EQ_INT(dut->ops->sync(dut, NULL), KILN_OK);
        double dt = now_s() - t0;
        if (rep > 0 && dt < best) best = dt;
    }
    printf("  time %-46s %8.3f ms  %7.1f TFLOP/s\n", "conv2d 3x3 128 -> 128 at 1024x1024, bf16", best * 1e3,
           2.0 * hw * hw * c * c * 9 / best / 1e12);
    free_pairs();
}

int main(void) {
    kiln_err err = {0};
    if (kiln_backend_open_cpu(0, &ref, &err) != KILN_OK) {
        fprintf(stderr, "cannot open the CPU backend: %s\n", err.msg);
        return 1;
    }
    ref->precision = KILN_PREC_EXACT; /* the reference for the f32 ops */
    kiln_status s = kiln_backend_open_cuda(0, &dut, &err);
    bool ran_cuda = s == KILN_OK;
    if (!ran_cuda) {
        const char *req = getenv("KILN_REQUIRE_GPU");
        printf("not run: CUDA (%s)\n", err.msg);
        if (req && strcmp(req, "1") == 0) {
            fprintf(stderr, "KILN_REQUIRE_GPU=1 but no CUDA backend\n");
            return 1;
        }
        /* Exercise the harness and the float64 references anyway: the CPU backend as the device under test. */
        printf("checking the harness: CPU backend against the float64 references instead\n");
        dut_name = "cpu (harness)";
        if (kiln_backend_open_cpu(1, &dut, &err) != KILN_OK) return 1;
    } else {
        printf("device under test: %s\n", dut->ops->name);
    }
    /* KILN_OPS_ONLY=SUBSTR: only the tests whose name contains it (a profiler run of the timings alone) */
    const char *only = getenv("KILN_OPS_ONLY");
#define RUN_SELECTED(fn)                                                                                      \
    do {                                                                                                      \
        if (!only || strstr(#fn, only)) RUN(fn);                                                              \
    } while (0)
    RUN_SELECTED(test_matmul);
    RUN_SELECTED(test_quant_matmul);
    RUN_SELECTED(test_attention);
    RUN_SELECTED(test_norms);
    RUN_SELECTED(test_elementwise);
    RUN_SELECTED(test_bf16_activations);
    RUN_SELECTED(test_images);
    RUN_SELECTED(test_determinism);
    RUN_SELECTED(test_timing);
    kiln_backend_close(dut);
    kiln_backend_close(ref);
    int rc = test_summary();
    if (rc == 0 && !ran_cuda) {
        printf("not run: the CUDA ops (no device); the harness passed - exit 77 (ctest: Skipped)\n");
        return 77;
    }
    return rc;
}

/* golden.h - reading the oracle's golden tensors (tests/data/golden/NAME.safetensors, see its README) and
 * comparing kiln's numbers against them with the tolerance the golden file states.
 *
 *     golden g;
 *     if (!golden_open(&g, "dit_f32")) return;                 // a CHECK failure when missing
 *     float *ref = golden_f32(&g, "output", &n);               // malloc'd f32 copy (any stored float dtype)
 *     golden_check(&g, "output", got, n);                      // max |d| <= abs + rel |ref|, rms <= tolrms
 *     golden_close(&g);
 *
 * Tolerances: metadata "tol.<name>" = "abs,rel" and "tolrms.<name>" = rms bound (absent = not checked).
 * A tensor without "tol.<name>" is compared exactly. Every comparison prints its max and rms difference, so a
 * drift shows before it fails (STYLE habit 2). Needs test.h and the io layer.
 */
#ifndef KILN_TEST_GOLDEN_H
#define KILN_TEST_GOLDEN_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "test.h"

typedef struct golden {
    kiln_st_file *f;
    char name[128];
    double scale; /* multiplies every tolerance (1; tests never loosen it) */
} golden;

static inline int golden_open(golden *g, const char *name) {
    char rel[256];
    snprintf(rel, sizeof rel, "tests/data/golden/%s.safetensors", name);
    snprintf(g->name, sizeof g->name, "%s", name);
    g->scale = 1.0;
    kiln_err err = {0};
    if (kiln_st_open(test_src_path(rel), &g->f, &err) != KILN_OK) {
        CHECK_MSG(0, "golden %s: %s", name, err.msg);
        g->f = NULL;
        return 0;
    }
    return 1;
}

static inline void golden_close(golden *g) {
    kiln_st_close(g->f);
    g->f = NULL;
}

static inline float golden_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* A malloc'd f32 copy of a float or integer tensor; NULL (and a CHECK failure) when absent. */
static inline float *golden_f32(golden *g, const char *tensor, size_t *n) {
    const kiln_st_tensor *t = kiln_st_find(g->f, tensor);
    CHECK_MSG(t != NULL, "golden %s has no tensor %s", g->name, tensor);
    if (!t) return NULL;
    size_t cnt = 1;
    for (int d = 0; d < t->ndim; d++) cnt *= (size_t)t->shape[d];
    float *out = malloc(cnt * sizeof(float) + 4);
    const unsigned char *p = t->data;
    for (size_t i = 0; i < cnt; i++) {
        if (t->dtype == KILN_DT_F32) memcpy(&out[i], p + 4 * i, 4);
        else if (t->dtype == KILN_DT_BF16) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            out[i] = golden_bf16(h);
        } else if (t->dtype == KILN_DT_I64) {
            int64_t v;
            memcpy(&v, p + 8 * i, 8);
            out[i] = (float)v;
        } else if (t->dtype == KILN_DT_U8) out[i] = p[i];
        else {
            CHECK_MSG(0, "golden %s: %s has dtype %s", g->name, tensor, kiln_dtype_name(t->dtype));
            free(out);
            return NULL;
        }
    }
    if (n) *n = cnt;
    return out;
}

/* int64 tensor as int32 (token ids, masks). */
static inline int32_t *golden_i32(golden *g, const char *tensor, size_t *n) {
    size_t cnt;
    float *f = golden_f32(g, tensor, &cnt);
    if (!f) return NULL;
    int32_t *o = malloc(cnt * sizeof(int32_t) + 4);
    const kiln_st_tensor *t = kiln_st_find(g->f, tensor);
    for (size_t i = 0; i < cnt; i++) {
        int64_t v;
        if (t->dtype == KILN_DT_I64) {
            memcpy(&v, (const char *)t->data + 8 * i, 8);
            o[i] = (int32_t)v;
        } else o[i] = (int32_t)f[i];
    }
    free(f);
    if (n) *n = cnt;
    return o;
}

static inline const char *golden_meta(golden *g, const char *key) { return kiln_st_metadata(g->f, key); }

static inline void golden_tol(golden *g, const char *tensor, double *abs_tol, double *rel_tol, double *rms_tol) {
    char key[256];
    *abs_tol = 0;
    *rel_tol = 0;
    *rms_tol = -1;
    snprintf(key, sizeof key, "tol.%s", tensor);
    const char *v = kiln_st_metadata(g->f, key);
    if (v) sscanf(v, "%lf,%lf", abs_tol, rel_tol);
    snprintf(key, sizeof key, "tolrms.%s", tensor);
    v = kiln_st_metadata(g->f, key);
    if (v) *rms_tol = atof(v);
}

/* Compares got[0..n) with the golden tensor; prints the differences; CHECKs the tolerance. Returns 1 on pass. */
static inline int golden_compare(golden *g, const char *tensor, const float *got, size_t n, const char *label) {
    size_t cnt = 0;
    float *ref = golden_f32(g, tensor, &cnt);
    if (!ref) return 0;
    CHECK_MSG(cnt == n, "%s %s: %zu values, golden has %zu", g->name, tensor, n, cnt);
    if (cnt != n) {
        free(ref);
        return 0;
    }
    double at, rt, rmst;
    golden_tol(g, tensor, &at, &rt, &rmst);
    double maxd = 0, sq = 0;
    size_t worst = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)ref[i]);
        if (!(d <= maxd)) {
            maxd = d;
            worst = i;
        }
        if (!(d <= (at + rt * fabs(ref[i])) * g->scale)) bad++;
        sq += d * d;
    }
    double rms = n ? sqrt(sq / n) : 0;
    printf("  %s %-22s max|d| %.3g (tol %.3g) rms %.3g (tol %.3g) %s%s\n", g->name, tensor, maxd, at, rms, rmst,
           label ? label : "", bad ? "  <-- MISMATCH" : "");
    CHECK_MSG(bad == 0, "%s %s%s: %zu of %zu values off; worst [%zu] got %.7g want %.7g", g->name, tensor,
              label ? label : "", bad, n, worst, (double)got[worst], (double)ref[worst]);
    if (rmst >= 0) CHECK_MSG(rms <= rmst * g->scale, "%s %s: rms %.3g over %.3g", g->name, tensor, rms, rmst);
    free(ref);
    return bad == 0 && (rmst < 0 || rms <= rmst * g->scale);
}

static inline int golden_check(golden *g, const char *tensor, const float *got, size_t n) {
    return golden_compare(g, tensor, got, n, NULL);
}

/* Signal-to-noise ratio of got against ref in dB: 10 log10(sum ref^2 / sum (got - ref)^2); 999 when identical. */
static inline double golden_snr_db(const float *got, const float *ref, size_t n) {
    double sig = 0, noise = 0;
    for (size_t i = 0; i < n; i++) {
        sig += (double)ref[i] * ref[i];
        noise += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
    }
    return noise == 0 ? 999.0 : 10.0 * log10(sig / noise);
}

#endif

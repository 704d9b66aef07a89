/* report_variants.c - the rules of kiln's variants reports (`kiln bench variants`, src/bench/variants.h) beyond the
 * seed's: where a cycle keeps its requests, every figure of the cycle is recomputed from them, and the VAE stage
 * records are the measured requests' Decoding stages in order. A seed report (no requests) has only report.c's
 * rules. */
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "bench/report.h"
#include "bench/stats.h"

static double num(const json_t *o, const char *k) { return kiln_report_num(o, k); }
static bool same(double got, double want) { return kiln_report_same(got, want); }

/* The median of b - a (a NULL: of b) over the ok requests that have them; NaN when none do. */
static double median_over(const json_t *reqs, const char *a, const char *b) {
    size_t n = json_array_size(reqs), k = 0;
    double *x = kiln_calloc(n ? n : 1, sizeof *x);
    if (!x) return NAN;
    for (size_t i = 0; i < n; i++) {
        const json_t *r = json_array_get(reqs, i);
        double va = a ? num(r, a) : 0, vb = num(r, b);
        if (json_is_true(json_object_get(r, "ok")) && !isnan(va) && !isnan(vb)) x[k++] = vb - va;
    }
    double m = k ? kiln_median(x, k) : NAN;
    kiln_free(x);
    return m;
}

static void check_requests(const json_t *reqs, const char *path, kiln_strlist *p) {
    for (size_t i = 0; i < json_array_size(reqs); i++) {
        const json_t *r = json_array_get(reqs, i);
        bool ok = json_is_true(json_object_get(r, "ok"));
        if ((long long)json_integer_value(json_object_get(r, "index")) != (long long)i)
            kiln_strlist_add(p, "%s/%zu/index: %lld, want %zu", path, i,
                             (long long)json_integer_value(json_object_get(r, "index")), i);
        if (ok != json_is_null(json_object_get(r, "error")))
            kiln_strlist_add(p, "%s/%zu: ok is %s but error is %s", path, i, ok ? "true" : "false",
                             json_is_null(json_object_get(r, "error")) ? "null" : "set");
        double q = num(r, "queued_s"), h = num(r, "http_s"), sv = num(r, "saved_validated_s");
        double run = num(r, "running_s"), done = num(r, "done_s");
        /* the client's clock: submit (0) <= queued <= seen done <= images saved and validated */
        if (ok && (isnan(q) || isnan(h) || isnan(sv) || q < 0 || h < q || sv < h))
            kiln_strlist_add(p, "%s/%zu: the client's times are not 0 <= queued_s <= http_s <= saved_validated_s", path, i);
        if (!isnan(run) && !isnan(done) && done < run) /* the server's clock */
            kiln_strlist_add(p, "%s/%zu: done_s %.6g before running_s %.6g", path, i, done, run);
    }
}

static void check_cycle(const json_t *cy, const char *path, long long want_requests, kiln_strlist *p) {
    const json_t *reqs = json_object_get(cy, "requests");
    char sub[256];
    snprintf(sub, sizeof sub, "%s/requests", path);
    check_requests(reqs, sub, p);
    snprintf(sub, sizeof sub, "%s/warmup", path);
    check_requests(json_object_get(cy, "warmup"), sub, p);
    size_t n_ok = 0;
    for (size_t i = 0; i < json_array_size(reqs); i++) n_ok += json_is_true(json_object_get(json_array_get(reqs, i), "ok"));
    if ((size_t)json_integer_value(json_object_get(cy, "n")) != n_ok)
        kiln_strlist_add(p, "%s/n: %lld, but %zu requests succeeded", path,
                         (long long)json_integer_value(json_object_get(cy, "n")), n_ok);
    if (want_requests >= 0 && (long long)json_array_size(reqs) != want_requests)
        kiln_strlist_add(p, "%s/requests: %zu, but config.requests is %lld", path, json_array_size(reqs), want_requests);
    const json_t *cc = json_object_get(cy, "complete_cell");
    if (json_is_boolean(cc) && json_is_true(cc) != (n_ok == json_array_size(reqs)))
        kiln_strlist_add(p, "%s/complete_cell: %s, but %zu of %zu requests succeeded", path,
                         json_is_true(cc) ? "true" : "false", n_ok, json_array_size(reqs));
    static const struct {
        const char *field, *from, *to;
    } medians[] = {{"http_median_s", NULL, "http_s"},
                   {"saved_validated_median_s", NULL, "saved_validated_s"},
                   {"stage_gen_median_s", NULL, "stage_gen_s"}};
    for (size_t k = 0; k < sizeof medians / sizeof *medians; k++) {
        double got = num(cy, medians[k].field), want = median_over(reqs, medians[k].from, medians[k].to);
        if (!same(got, want))
            kiln_strlist_add(p, "%s/%s: %.10g, but the requests' median is %.10g", path, medians[k].field, got, want);
    }
    static const struct {
        const char *field, *from, *to;
    } phases[] = {{"submit_to_queued", NULL, "queued_s"},
                  {"queued_to_running", "queued_s", "running_s"},
                  {"running_to_done", "running_s", "done_s"},
                  {"done_to_http", "done_s", "http_s"},
                  {"http_to_saved_validated", "http_s", "saved_validated_s"}};
    const json_t *life = json_object_get(cy, "lifecycle_medians_s");
    for (size_t k = 0; life && k < sizeof phases / sizeof *phases; k++) {
        double got = num(life, phases[k].field), want = median_over(reqs, phases[k].from, phases[k].to);
        if (!same(got, want))
            kiln_strlist_add(p, "%s/lifecycle_medians_s/%s: %.10g, but the requests' median is %.10g", path,
                             phases[k].field, got, want);
    }
}

void kiln_report_check_variants_kiln(const json_t *root, kiln_strlist *p) {
    const json_t *cfg = json_object_get(root, "config");
    const json_t *rq = json_object_get(cfg, "requests");
    long long want = json_is_integer(rq) ? (long long)json_integer_value(rq) : -1;
    const json_t *res = json_object_get(root, "results");
    for (size_t i = 0; i < json_array_size(res); i++) {
        const json_t *v = json_array_get(res, i), *cycles = json_object_get(v, "http_cycles");
        bool all_kept = json_array_size(cycles) > 0;
        size_t k = 0; /* the next VAE stage record the requests imply */
        const json_t *recs = json_object_get(v, "vae_stage_records");
        for (size_t c = 0; c < json_array_size(cycles); c++) {
            const json_t *cy = json_array_get(cycles, c), *reqs = json_object_get(cy, "requests");
            if (!reqs) {
                all_kept = false;
                continue;
            }
            char path[128];
            snprintf(path, sizeof path, "/results/%zu/http_cycles/%zu", i, c);
            check_cycle(cy, path, want, p);
            for (size_t r = 0; r < json_array_size(reqs); r++) {
                const json_t *q = json_array_get(reqs, r);
                double vs = num(q, "vae_s");
                if (!json_is_true(json_object_get(q, "ok")) || isnan(vs)) continue;
                const json_t *rec = json_array_get(recs, k++);
                if (!rec || !same(num(rec, "vae_s"), vs) ||
                    json_integer_value(json_object_get(rec, "cycle")) != json_integer_value(json_object_get(cy, "cycle")))
                    kiln_strlist_add(p, "/results/%zu/vae_stage_records/%zu: not cycle %lld's request %zu (vae_s %.6g)",
                                     i, k - 1, (long long)json_integer_value(json_object_get(cy, "cycle")), r, vs);
            }
        }
        if (all_kept && k != json_array_size(recs))
            kiln_strlist_add(p, "/results/%zu/vae_stage_records: %zu records, but the requests have %zu Decoding stages",
                             i, json_array_size(recs), k);
    }
}

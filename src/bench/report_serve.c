/* report_serve.c - the serve-load report of `kiln bench serve`: its consistency rules (`kiln bench check`
 * recomputes every figure from the request records) and its table (`kiln bench show`). The definitions are in
 * serve_load.h and docs/bench-report.md. */
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "bench/report.h"
#include "bench/serve_load.h"
#include "bench/stats.h"

double kiln_report_num(const json_t *o, const char *k) {
    const json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* Figures are written at full precision; a hand-rounded report gets a microsecond plus 1e-6 relative. */
bool kiln_report_same(double got, double want) {
    if (isnan(got) || isnan(want)) return isnan(got) && isnan(want);
    return fabs(got - want) <= 1e-6 + 1e-6 * fabs(want);
}
static double num(const json_t *o, const char *k) { return kiln_report_num(o, k); }
static bool same(double got, double want) { return kiln_report_same(got, want); }

static void check_pct(const json_t *pct, const double *x, size_t n, const char *path, kiln_strlist *p) {
    static const struct {
        const char *key;
        double q;
    } qs[] = {{"p50", 50}, {"p90", 90}, {"p99", 99}};
    kiln_reduction r = kiln_reduce(x, n);
    if ((size_t)json_integer_value(json_object_get(pct, "n")) != r.n)
        kiln_strlist_add(p, "%s/n: %lld, but %zu requests have the figure", path,
                         (long long)json_integer_value(json_object_get(pct, "n")), r.n);
    for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
        double want = kiln_percentile(x, n, qs[i].q), got = num(pct, qs[i].key);
        if (!same(got, want)) kiln_strlist_add(p, "%s/%s: %.9g, but the requests give %.9g", path, qs[i].key, got, want);
    }
    if (!same(num(pct, "min"), r.min) || !same(num(pct, "max"), r.max) || !same(num(pct, "mean"), r.mean))
        kiln_strlist_add(p, "%s: min/max/mean disagree with the requests", path);
}

static void check_run(const json_t *run, size_t k, double unit, double scale, json_int_t n_cfg, kiln_strlist *p) {
    const json_t *reqs = json_object_get(run, "requests"), *sum = json_object_get(run, "summary");
    const json_t *slo = json_object_get(sum, "slo");
    size_t n = json_array_size(reqs), ok = 0, met = 0;
    bool open = strcmp(json_string_value(json_object_get(run, "arrival")), "concurrency") != 0;
    if ((json_int_t)n != n_cfg) kiln_strlist_add(p, "/runs/%zu/requests: %zu, but config.requests is %lld", k, n, (long long)n_cfg);
    double *lat = kiln_calloc(n ? n : 1, sizeof *lat), *qw = kiln_calloc(n ? n : 1, sizeof *qw),
           *ex = kiln_calloc(n ? n : 1, sizeof *ex);
    if (!lat || !qw || !ex) goto out;
    double duration = 0, lag = 0, prev_sched = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        const json_t *r = json_array_get(reqs, i);
        double sched = num(r, "scheduled_s"), sent = num(r, "sent_s"), done = num(r, "done_s"), l = num(r, "latency_s");
        double e = num(r, "exec_s"), q = num(r, "queue_wait_s"), dl = num(r, "deadline_s");
        bool good = json_is_true(json_object_get(r, "ok"));
        if (json_integer_value(json_object_get(r, "index")) != (json_int_t)i)
            kiln_strlist_add(p, "/runs/%zu/requests/%zu/index: not %zu", k, i, i);
        if (!same(l, done - sent)) kiln_strlist_add(p, "/runs/%zu/requests/%zu/latency_s: %.9g, not done - sent = %.9g", k, i, l, done - sent);
        if (sent < sched - 1e-6) kiln_strlist_add(p, "/runs/%zu/requests/%zu: sent before its scheduled time", k, i);
        if (open && sched < prev_sched) kiln_strlist_add(p, "/runs/%zu/requests/%zu/scheduled_s: earlier than request %zu's", k, i, i - 1);
        prev_sched = sched;
        if (good != json_is_null(json_object_get(r, "error")))
            kiln_strlist_add(p, "/runs/%zu/requests/%zu: ok and error disagree", k, i);
        double want_q = good && !isnan(e) ? fmax(0.0, l - e) : NAN;
        if (!same(q, want_q)) kiln_strlist_add(p, "/runs/%zu/requests/%zu/queue_wait_s: %.9g, not max(0, latency - exec) = %.9g", k, i, q, want_q);
        double patches = kiln_serve_patches((int)json_integer_value(json_object_get(r, "width")),
                                            (int)json_integer_value(json_object_get(r, "height")),
                                            (int)json_integer_value(json_object_get(r, "steps")));
        if (!same(dl, unit * patches * scale))
            kiln_strlist_add(p, "/runs/%zu/requests/%zu/deadline_s: %.9g, not unit_s x patches x slo_scale = %.9g", k, i, dl, unit * patches * scale);
        bool want_met = good && l <= dl;
        if (json_is_true(json_object_get(r, "slo_met")) != want_met)
            kiln_strlist_add(p, "/runs/%zu/requests/%zu/slo_met: not (ok and latency <= deadline)", k, i);
        met += want_met;
        lat[i] = qw[i] = ex[i] = NAN;
        if (good) {
            ok++;
            lat[i] = l;
            qw[i] = q;
            ex[i] = e;
        }
        if (done > duration) duration = done;
        if (sent - sched > lag) lag = sent - sched;
    }
    if (json_integer_value(json_object_get(sum, "sent")) != (json_int_t)n ||
        json_integer_value(json_object_get(sum, "completed")) != (json_int_t)ok ||
        json_integer_value(json_object_get(sum, "errors")) != (json_int_t)(n - ok))
        kiln_strlist_add(p, "/runs/%zu/summary: sent/completed/errors disagree with the requests (%zu, %zu, %zu)", k, n, ok, n - ok);
    if (!same(num(sum, "duration_s"), duration))
        kiln_strlist_add(p, "/runs/%zu/summary/duration_s: %.9g, not the last done_s %.9g", k, num(sum, "duration_s"), duration);
    double thr = duration > 0 ? (double)ok / duration : NAN;
    if (!same(num(sum, "throughput_rps"), thr))
        kiln_strlist_add(p, "/runs/%zu/summary/throughput_rps: %.9g, not completed / duration_s = %.9g", k, num(sum, "throughput_rps"), thr);
    if (!same(num(sum, "max_send_lag_s"), lag)) kiln_strlist_add(p, "/runs/%zu/summary/max_send_lag_s: disagrees with the requests", k);
    if (!same(num(sum, "offered_rps"), num(run, "rate_rps"))) kiln_strlist_add(p, "/runs/%zu/summary/offered_rps: not the run's rate_rps", k);
    char path[96];
    snprintf(path, sizeof path, "/runs/%zu/summary/latency_s", k);
    check_pct(json_object_get(sum, "latency_s"), lat, n, path, p);
    snprintf(path, sizeof path, "/runs/%zu/summary/queue_wait_s", k);
    check_pct(json_object_get(sum, "queue_wait_s"), qw, n, path, p);
    snprintf(path, sizeof path, "/runs/%zu/summary/exec_s", k);
    check_pct(json_object_get(sum, "exec_s"), ex, n, path, p);
    if (json_integer_value(json_object_get(slo, "met")) != (json_int_t)met ||
        json_integer_value(json_object_get(slo, "total")) != (json_int_t)n ||
        !same(num(slo, "attainment"), n ? (double)met / (double)n : NAN))
        kiln_strlist_add(p, "/runs/%zu/summary/slo: met/total/attainment disagree with the requests (%zu of %zu)", k, met, n);
    if (!same(num(slo, "unit_s"), unit) || !same(num(slo, "scale"), scale))
        kiln_strlist_add(p, "/runs/%zu/summary/slo: unit_s or scale is not the baseline's and the config's", k);
out:
    kiln_free(lat);
    kiln_free(qw);
    kiln_free(ex);
}

void kiln_report_check_serve_load(const json_t *root, kiln_strlist *p) {
    const json_t *cfg = json_object_get(root, "config"), *base = json_object_get(root, "baseline");
    const char *kind = json_string_value(json_object_get(root, "kind"));
    if (strcmp(kind, "serve-load") != 0) kiln_strlist_add(p, "/kind: \"%s\", not serve-load", kind);
    const json_t *warm = json_object_get(base, "requests");
    size_t nw = json_array_size(warm);
    double *u = kiln_calloc(nw ? nw : 1, sizeof *u);
    if (!u) return;
    for (size_t i = 0; i < nw; i++) {
        const json_t *w = json_array_get(warm, i);
        double patches = kiln_serve_patches((int)json_integer_value(json_object_get(w, "width")),
                                            (int)json_integer_value(json_object_get(w, "height")),
                                            (int)json_integer_value(json_object_get(w, "steps")));
        u[i] = json_is_true(json_object_get(w, "ok")) ? num(w, "latency_s") / patches : NAN;
        if (!same(num(w, "unit_s"), u[i])) kiln_strlist_add(p, "/baseline/requests/%zu/unit_s: not latency_s / patches", i);
    }
    double unit = num(base, "unit_s");
    if (!same(unit, kiln_median(u, nw)))
        kiln_strlist_add(p, "/baseline/unit_s: %.9g, but the median of the warm-up units is %.9g", unit, kiln_median(u, nw));
    kiln_free(u);
    if ((json_int_t)nw != json_integer_value(json_object_get(cfg, "warmup")))
        kiln_strlist_add(p, "/baseline/requests: %zu, but config.warmup is %lld", nw,
                         (long long)json_integer_value(json_object_get(cfg, "warmup")));
    const json_t *runs = json_object_get(root, "runs");
    if (json_array_size(runs) != json_array_size(json_object_get(cfg, "loads")))
        kiln_strlist_add(p, "/runs: %zu runs, but config.loads has %zu", json_array_size(runs),
                         json_array_size(json_object_get(cfg, "loads")));
    for (size_t k = 0; k < json_array_size(runs); k++)
        check_run(json_array_get(runs, k), k, unit, num(cfg, "slo_scale"),
                  json_integer_value(json_object_get(cfg, "requests")), p);
}

static const char *fmt(char *b, size_t cap, double v, int decimals) {
    if (isnan(v)) snprintf(b, cap, "-");
    else snprintf(b, cap, "%.*f", decimals, v);
    return b;
}

void kiln_report_show_serve_load(const json_t *root, FILE *out) {
    const json_t *cfg = json_object_get(root, "config"), *tg = json_object_get(root, "target");
    char a[24], b[24], c[24], d[24], e[24], f[24];
    fprintf(out, "serve load against %s (%s), %lld requests a run, at %s\n", json_string_value(json_object_get(tg, "url")),
            json_string_value(json_object_get(tg, "kind")), (long long)json_integer_value(json_object_get(cfg, "requests")),
            json_string_value(json_object_get(root, "at")));
    fprintf(out, "unloaded: %s s per 16x16 patch-step; SLO deadline = %s x the unloaded time\n\n",
            fmt(a, sizeof a, num(json_object_get(root, "baseline"), "unit_s"), 6), fmt(b, sizeof b, num(cfg, "slo_scale"), 2));
    fprintf(out, "%-20s %5s %5s %8s %8s %8s %8s %9s %6s\n", "run", "ok", "err", "req/s", "p50 s", "p90 s", "p99 s",
            "wait p50", "SLO %");
    const json_t *run;
    size_t k;
    json_array_foreach(json_object_get(root, "runs"), k, run) {
        const json_t *s = json_object_get(run, "summary"), *l = json_object_get(s, "latency_s");
        fprintf(out, "%-20s %5lld %5lld %8s %8s %8s %8s %9s %6s\n", json_string_value(json_object_get(run, "label")),
                (long long)json_integer_value(json_object_get(s, "completed")),
                (long long)json_integer_value(json_object_get(s, "errors")), fmt(a, sizeof a, num(s, "throughput_rps"), 3),
                fmt(b, sizeof b, num(l, "p50"), 3), fmt(c, sizeof c, num(l, "p90"), 3), fmt(d, sizeof d, num(l, "p99"), 3),
                fmt(e, sizeof e, num(json_object_get(s, "queue_wait_s"), "p50"), 3),
                fmt(f, sizeof f, 100 * num(json_object_get(s, "slo"), "attainment"), 1));
    }
}

/* serve_summary.c - the figures of one `kiln bench serve` run from its request records (serve_load.h):
 * throughput, latency / queue-wait / execution percentiles, send lag and SLO attainment. */
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "bench/serve_load.h"
#include "bench/stats.h"

double kiln_serve_patches(int width, int height, int steps) {
    double area = (double)width * (double)height / 256.0;
    return (area > 1 ? area : 1) * (steps > 1 ? steps : 1);
}

static json_t *num_or_null(double v) { return isnan(v) ? json_null() : json_real(v); }

/* {n, min, p50, p90, p99, max, mean} over the non-NaN values; every statistic null when n = 0. */
static json_t *percentiles(const double *x, size_t n) {
    kiln_reduction r = kiln_reduce(x, n);
    return json_pack("{s:I,s:o,s:o,s:o,s:o,s:o,s:o}", "n", (json_int_t)r.n, "min", num_or_null(r.min), "p50",
                     num_or_null(kiln_percentile(x, n, 50)), "p90", num_or_null(kiln_percentile(x, n, 90)), "p99",
                     num_or_null(kiln_percentile(x, n, 99)), "max", num_or_null(r.max), "mean", num_or_null(r.mean));
}

static double get(const json_t *o, const char *k) {
    const json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

json_t *kiln_serve_summary(const json_t *requests, double unit_s, double slo_scale, double rate) {
    size_t n = json_array_size(requests);
    double *lat = kiln_calloc(n ? n : 1, sizeof *lat), *qw = kiln_calloc(n ? n : 1, sizeof *qw),
           *ex = kiln_calloc(n ? n : 1, sizeof *ex);
    json_t *msgs = json_array();
    if (!lat || !qw || !ex || !msgs) {
        kiln_free(lat);
        kiln_free(qw);
        kiln_free(ex);
        json_decref(msgs);
        return NULL;
    }
    size_t ok = 0, met = 0;
    double duration = 0, lag = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *r = json_array_get(requests, i);
        bool good = json_is_true(json_object_get(r, "ok"));
        lat[i] = qw[i] = ex[i] = NAN;
        if (good) {
            ok++;
            lat[i] = get(r, "latency_s");
            qw[i] = get(r, "queue_wait_s");
            ex[i] = get(r, "exec_s");
        } else if (json_array_size(msgs) < 5) {
            const char *m = json_string_value(json_object_get(r, "error"));
            bool seen = false;
            for (size_t k = 0; k < json_array_size(msgs); k++)
                seen |= m && !strcmp(m, json_string_value(json_array_get(msgs, k)));
            if (m && !seen) json_array_append_new(msgs, json_string(m));
        }
        if (json_is_true(json_object_get(r, "slo_met"))) met++;
        double done = get(r, "done_s"), d = get(r, "sent_s") - get(r, "scheduled_s");
        if (done > duration) duration = done;
        if (d > lag) lag = d;
    }
    json_t *s = json_pack("{s:I,s:I,s:I,s:o,s:f,s:o,s:o,s:o,s:o,s:o,s:f,s:{s:f,s:o,s:I,s:I,s:o}}", "sent",
                          (json_int_t)n, "completed", (json_int_t)ok, "errors", (json_int_t)(n - ok), "error_messages",
                          msgs, "duration_s", duration, "offered_rps", num_or_null(rate), "throughput_rps",
                          duration > 0 ? json_real((double)ok / duration) : json_null(), "latency_s",
                          percentiles(lat, n), "queue_wait_s", percentiles(qw, n), "exec_s", percentiles(ex, n),
                          "max_send_lag_s", lag, "slo", "scale", slo_scale, "unit_s", num_or_null(unit_s), "met",
                          (json_int_t)met, "total", (json_int_t)n, "attainment",
                          n ? json_real((double)met / (double)n) : json_null());
    kiln_free(lat);
    kiln_free(qw);
    kiln_free(ex);
    return s;
}

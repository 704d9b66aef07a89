/* variants.c - `kiln bench variants` (see variants.h): cycles of requests against each variant's server, the
 * seed-002 report. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "bench/digest.h"
#include "bench/report.h"
#include "bench/stats.h"
#include "bench/target.h"
#include "bench/variants.h"

kiln_variants_cfg kiln_variants_cfg_default(void) {
    kiln_variants_cfg c;
    memset(&c, 0, sizeof c);
    c.cycles = 2;
    c.requests = 5;
    c.warmup = 1;
    c.timeout_s = 600;
    return c;
}

static json_t *num_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

/* The Decoding stage of a submit's stages, in seconds; NaN when the target does not report it. */
static double vae_s(const json_t *stages) {
    for (size_t i = 0; i < json_array_size(stages); i++) {
        const json_t *s = json_array_get(stages, i);
        const char *n = json_string_value(json_object_get(s, "name"));
        if (n && !strcmp(n, "Decoding")) return json_number_value(json_object_get(s, "duration_ms")) / 1000.0;
    }
    return NAN;
}

/* One request's record: times in seconds from its submit (running/done on the server's clock, the rest on ours). */
static json_t *request_record(int index, const kiln_submit_result *r, bool ok, const char *error) {
    double t0 = r->t0;
    return json_pack("{s:i, s:s, s:f, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:b, s:o}", "index", index, "prompt_id",
                     r->prompt_id, "t0", t0, "queued_s", num_or_null(r->queued_t - t0), "running_s",
                     num_or_null(r->running_t - t0), "done_s", num_or_null(r->done_t - t0), "http_s",
                     num_or_null(ok ? r->seen_t - t0 : NAN), "saved_validated_s", num_or_null(ok ? r->t1 - t0 : NAN),
                     "stage_gen_s", num_or_null(r->engine_s), "vae_s", num_or_null(vae_s(r->stages)), "ok", ok,
                     "error", error ? json_string(error) : json_null());
}

/* The median of one field over the records that have it (NaN when none do). */
static double median_of(const json_t *reqs, const char *key) {
    size_t n = json_array_size(reqs), k = 0;
    double *x = kiln_calloc(n ? n : 1, sizeof *x);
    if (!x) return NAN;
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_object_get(json_array_get(reqs, i), key);
        if (json_is_number(v)) x[k++] = json_number_value(v);
    }
    double m = k ? kiln_median(x, k) : NAN;
    kiln_free(x);
    return m;
}
/* The median of b - a over the records that have both. */
static double median_gap(const json_t *reqs, const char *a, const char *b) {
    size_t n = json_array_size(reqs), k = 0;
    double *x = kiln_calloc(n ? n : 1, sizeof *x);
    if (!x) return NAN;
    for (size_t i = 0; i < n; i++) {
        const json_t *r = json_array_get(reqs, i), *va = json_object_get(r, a), *vb = json_object_get(r, b);
        if (json_is_number(va) && json_is_number(vb)) x[k++] = json_number_value(vb) - json_number_value(va);
    }
    double m = k ? kiln_median(x, k) : NAN;
    kiln_free(x);
    return m;
}

/* The cell of one variant in one cycle: warm-up, then the measured requests, one at a time. */
static kiln_status run_cell(const kiln_variants_cfg *c, int v, int cycle, const json_t *graph, const char *case_name,
                            json_t *vae_records, json_t **cell, kiln_err *err) {
    kiln_http_opts o = {.timeout_s = c->timeout_s};
    kiln_target *t;
    KILN_TRY(kiln_target_http_open(c->urls[v], &o, &t, err));
    json_t *warm = json_array(), *reqs = json_array();
    int n_ok = 0;
    for (int i = 0; i < c->warmup + c->requests; i++) {
        kiln_submit_result r;
        memset(&r, 0, sizeof r);
        kiln_err e = {0};
        bool ok = kiln_target_submit(t, graph, &r, &e) == KILN_OK;
        bool measured = i >= c->warmup;
        json_array_append_new(measured ? reqs : warm, request_record(measured ? i - c->warmup : i, &r, ok, ok ? NULL : e.msg));
        if (measured && ok) {
            n_ok++;
            double vs = vae_s(r.stages);
            if (isfinite(vs)) json_array_append_new(vae_records, json_pack("{s:i, s:f}", "cycle", cycle, "vae_s", vs));
        }
        kiln_submit_result_clear(&r);
    }
    kiln_target_close(t);
    if (!n_ok) {
        json_decref(warm);
        json_decref(reqs);
        return KILN_FAIL(err, KILN_E_INVALID, "variant %s, cycle %d: none of the %d requests succeeded (%s)",
                         c->names[v], cycle, c->requests, c->urls[v]);
    }
    /* the medians are over the successful requests (json_pack below takes the arrays) */
    json_t *oks = json_array();
    for (size_t i = 0; i < json_array_size(reqs); i++)
        if (json_is_true(json_object_get(json_array_get(reqs, i), "ok"))) json_array_append(oks, json_array_get(reqs, i));
    json_t *life = json_pack("{s:o, s:o, s:o, s:o, s:o}", "submit_to_queued", num_or_null(median_of(oks, "queued_s")),
                             "queued_to_running", num_or_null(median_gap(oks, "queued_s", "running_s")),
                             "running_to_done", num_or_null(median_gap(oks, "running_s", "done_s")), "done_to_http",
                             num_or_null(median_gap(oks, "done_s", "http_s")), "http_to_saved_validated",
                             num_or_null(median_gap(oks, "http_s", "saved_validated_s")));
    *cell = json_pack("{s:s, s:i, s:s, s:i, s:b, s:f, s:o, s:o, s:o, s:o, s:o}", "variant", c->names[v], "cycle",
                      cycle, "case", case_name, "n", n_ok, "complete_cell", n_ok == c->requests, "http_median_s",
                      median_of(oks, "http_s"), "saved_validated_median_s",
                      num_or_null(median_of(oks, "saved_validated_s")), "stage_gen_median_s",
                      num_or_null(median_of(oks, "stage_gen_s")), "lifecycle_medians_s", life, "requests", reqs,
                      "warmup", warm);
    json_decref(oks);
    if (c->hardware) json_object_set_new(*cell, "hardware", json_string(c->hardware));
    return KILN_OK;
}

static void iso_now(char *buf, size_t cap) {
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

kiln_status kiln_bench_variants(const kiln_variants_cfg *c, json_t **report, kiln_err *err) {
    *report = NULL;
    if (c->n_variants < 1 || c->n_variants > KILN_VARIANTS_MAX || c->cycles < 1 || c->requests < 1 || c->warmup < 0)
        return KILN_FAIL(err, KILN_E_INVALID, "variants: 1..%d variants, cycles and requests >= 1, warmup >= 0",
                         KILN_VARIANTS_MAX);
    json_error_t je;
    json_t *graph = json_load_file(c->graph_path, 0, &je);
    if (!json_is_object(graph)) {
        json_decref(graph);
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: not a ComfyUI API graph (%s, line %d)", c->graph_path, je.text, je.line);
    }
    char gd[65] = "", fd[65] = "";
    kiln_status s = kiln_graph_digest(graph, gd, err);
    if (s == KILN_OK) s = kiln_sha256_file(c->graph_path, fd, err);
    const char *slash = strrchr(c->graph_path, '/');
    const char *case_name = c->case_name ? c->case_name : slash ? slash + 1 : c->graph_path;
    json_t *results = json_array(), *vae[KILN_VARIANTS_MAX], *cycles[KILN_VARIANTS_MAX];
    for (int v = 0; v < c->n_variants; v++) {
        vae[v] = json_array();
        cycles[v] = json_array();
    }
    /* rounds interleave the variants (a drift of the machine spreads over all of them); cycles are numbered
     * across the run, as seed 002 numbers them */
    for (int round = 0, cycle = 0; s == KILN_OK && round < c->cycles; round++)
        for (int v = 0; s == KILN_OK && v < c->n_variants; v++, cycle++) {
            json_t *cell = NULL;
            s = run_cell(c, v, cycle, graph, case_name, vae[v], &cell, err);
            if (s == KILN_OK) json_array_append_new(cycles[v], cell);
        }
    for (int v = 0; v < c->n_variants; v++) {
        if (s != KILN_OK) {
            json_decref(vae[v]);
            json_decref(cycles[v]);
            continue;
        }
        double m = median_of(cycles[v], "http_median_s"), vm = median_of(vae[v], "vae_s");
        json_array_append_new(results, json_pack("{s:s, s:{s:s, s:s}, s:o, s:f, s:o, s:o}", "variant", c->names[v],
                                                 "target", "kind", "comfyui-http", "url", c->urls[v], "http_cycles",
                                                 cycles[v], "http_median_of_lifecycle_medians_s", m, "vae_median_s",
                                                 num_or_null(vm), "vae_stage_records", vae[v]));
    }
    if (s != KILN_OK) {
        json_decref(results);
        json_decref(graph);
        return s;
    }
    char at[32], scope[512];
    iso_now(at, sizeof at);
    snprintf(scope, sizeof scope, "%d variant(s), %d cycle(s) of %d measured request(s) after %d warm-up each, graph "
             "%s, one request at a time", c->n_variants, c->cycles, c->requests, c->warmup, case_name);
    *report = json_pack(
        "{s:s, s:s, s:{s:s, s:s}, s:s, s:s, s:s, s:s, s:{s:s, s:s, s:s, s:i, s:i, s:i, s:f}, s:o}", "schema",
        KILN_REPORT_SCHEMA, "kind", "variants", "tool", "name", "kiln bench", "version", KILN_VERSION, "at", at,
        "scope", c->scope ? c->scope : scope, "execution",
        "each request is sent when the previous one's images are fetched; the variants are interleaved by cycle",
        "aggregation",
        "per cycle the medians over its successful measured requests (warm-up kept, not reduced); per variant "
        "the median of the cycles' HTTP medians and the median of the Decoding stage over every measured request; "
        "times from the submit: queued and http/saved_validated on the client's clock, running and done on the "
        "server's (one clock when both run on one host)",
        "config", "graph", c->graph_path, "graph_digest", gd, "file_digest", fd, "cycles", c->cycles, "requests",
        c->requests, "warmup", c->warmup, "timeout_s", c->timeout_s, "results", results);
    json_decref(graph);
    return *report ? KILN_OK : KILN_FAIL(err, KILN_E_NOMEM, "variants: out of memory");
}

/* compare.c - A/B/B/A comparisons and their Markdown summary (see compare.h). */
#include "bench/compare.h"

#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "bench/digest.h"
#include "bench/manifest.h"
#include "bench/report.h"
#include "bench/stats.h"
#include "bench/workflow.h"

kiln_compare_cfg kiln_compare_cfg_default(void) {
    return (kiln_compare_cfg){.label_a = "a", .label_b = "b", .rounds = 2, .warmup = 1, .seed = 42,
                              .confidence = 0.95};
}

static json_t *num_or_null(double d) { return isnan(d) ? json_null() : json_real(d); }

/* The Denoising stage's seconds from a stage list, NaN when absent. */
static double denoise_s(const json_t *stages) {
    for (size_t i = 0; i < json_array_size(stages); i++) {
        const json_t *s = json_array_get(stages, i);
        const char *n = json_string_value(json_object_get(s, "name"));
        if (n && strstr(n, "Denois")) return json_number_value(json_object_get(s, "duration_ms")) / 1000.0;
    }
    return NAN;
}

/* Flags outlier stages across all rows (seed 001 kept r2-2-b's 371 ms text encoding and named it). */
static void flag_stage_outliers(json_t *rows) {
    size_t n = json_array_size(rows);
    json_t *names = json_object();
    for (size_t i = 0; i < n; i++) {
        const json_t *st = json_object_get(json_array_get(rows, i), "stages");
        for (size_t k = 0; k < json_array_size(st); k++) {
            const char *nm = json_string_value(json_object_get(json_array_get(st, k), "name"));
            if (nm) json_object_set_new(names, nm, json_true());
        }
    }
    double *x = kiln_calloc(n ? n : 1, sizeof *x);
    bool *f = kiln_calloc(n ? n : 1, sizeof *f);
    const char *nm;
    json_t *unused;
    json_object_foreach(names, nm, unused) {
        if (!x || !f) break;
        for (size_t i = 0; i < n; i++) {
            x[i] = NAN;
            const json_t *st = json_object_get(json_array_get(rows, i), "stages");
            for (size_t k = 0; k < json_array_size(st); k++) {
                const json_t *s = json_array_get(st, k);
                if (!strcmp(json_string_value(json_object_get(s, "name")), nm))
                    x[i] = json_number_value(json_object_get(s, "duration_ms"));
            }
        }
        if (!kiln_flag_outliers(x, n, 3.5, f)) continue;
        for (size_t i = 0; i < n; i++) {
            if (!f[i]) continue;
            json_t *row = json_array_get(rows, i);
            json_t *os = json_object_get(row, "outlier_stages");
            if (!os) json_object_set_new(row, "outlier_stages", os = json_array());
            json_array_append_new(os, json_string(nm));
        }
    }
    kiln_free(x);
    kiln_free(f);
    json_decref(names);
}

kiln_status kiln_bench_compare(const kiln_compare_cfg *cfg, kiln_target *a, kiln_target *b, json_t **report,
                               kiln_err *err) {
    *report = NULL;
    if (cfg->rounds < 1 || cfg->rounds > 1000 || cfg->warmup < 0 || !cfg->graph || !cfg->manifest)
        return KILN_FAIL(err, KILN_E_INVALID, "compare: a graph, a prompt bank and 1..1000 rounds are required");
    if (!strcmp(cfg->label_a, cfg->label_b) || !strcmp(cfg->label_a, "reduction_percent") ||
        !strcmp(cfg->label_b, "reduction_percent"))
        return KILN_FAIL(err, KILN_E_INVALID, "compare: the two labels must differ (and not be reduction_percent)");
    kiln_manifest *m;
    KILN_TRY(kiln_manifest_load(cfg->manifest, &m, err));
    const kiln_cell *cell = cfg->cell ? kiln_manifest_find(m, cfg->cell) : &m->cells[0];
    if (!cell) {
        kiln_manifest_free(m);
        return KILN_FAIL(err, KILN_E_NOT_FOUND, "compare: cell \"%s\" is not in the prompt bank", cfg->cell);
    }
    kiln_workflow w;
    kiln_status st = kiln_workflow_load(cfg->graph, &w, err);
    if (st != KILN_OK) {
        kiln_manifest_free(m);
        return st;
    }
    kiln_target *side[2] = {a, b};
    /* Warm-up, excluded: each side once per warmup, in a b order. */
    for (int i = 0; i < cfg->warmup && st == KILN_OK; i++)
        for (int s = 0; s < 2 && st == KILN_OK; s++) {
            char prefix[128];
            snprintf(prefix, sizeof prefix, "kiln-compare/warm-%d-%c", i, "ab"[s]);
            json_t *g = kiln_workflow_instantiate(&w, cell->prompt, cfg->seed, prefix);
            kiln_submit_result r = {0};
            st = g ? kiln_target_submit(side[s], g, &r, err) : KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
            json_decref(g);
            kiln_submit_result_clear(&r);
        }
    json_t *rows = json_array();
    size_t nrows = (size_t)cfg->rounds * 4;
    double *ea = kiln_calloc(nrows, sizeof *ea), *eb = kiln_calloc(nrows, sizeof *eb);
    size_t na = 0, nb = 0;
    if (!ea || !eb) st = KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
    static const int order[4] = {0, 1, 1, 0};
    for (int rd = 1; rd <= cfg->rounds && st == KILN_OK; rd++)
        for (int k = 0; k < 4 && st == KILN_OK; k++) {
            int s = order[k];
            char cellname[64], prefix[128];
            snprintf(cellname, sizeof cellname, "r%d-%d-%c", rd, k + 1, "ab"[s]);
            snprintf(prefix, sizeof prefix, "kiln-compare/%s", cellname);
            json_t *g = kiln_workflow_instantiate(&w, cell->prompt, cfg->seed, prefix);
            kiln_submit_result r = {0};
            st = g ? kiln_target_submit(side[s], g, &r, err) : KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
            json_decref(g);
            if (st == KILN_OK) {
                /* One output digest per row: the decoded pixels of every image, in order. */
                char sha[65] = "";
                if (r.n_images == 1) memcpy(sha, r.images[0].pixel_sha256, sizeof sha);
                else {
                    char all[65 * 64 + 1] = "";
                    for (int i = 0; i < r.n_images && i < 64; i++) strcat(all, r.images[i].pixel_sha256);
                    kiln_sha256_hex(all, strlen(all), sha);
                }
                json_t *row = json_pack("{s:s,s:s,s:s,s:i,s:f,s:o,s:n,s:s,s:s,s:o,s:f}", "cell", cellname,
                                        "source_commit", side[s]->describe, "side", s ? "b" : "a", "round", rd,
                                        "engine_e2e_s", r.exec_seconds, "denoise_s", num_or_null(denoise_s(r.stages)),
                                        "peak_reserved_gib", "output", r.images[0].filename, "output_sha256", sha,
                                        "stages", r.stages ? json_incref(r.stages) : json_array(), "wall_s",
                                        r.wall_seconds);
                json_array_append_new(rows, row);
                if (s) eb[nb++] = r.exec_seconds;
                else ea[na++] = r.exec_seconds;
            }
            kiln_submit_result_clear(&r);
        }
    if (st == KILN_OK) {
        /* Outliers in end-to-end seconds, judged within each side; stage outliers across all rows. */
        bool *fa = kiln_calloc(na ? na : 1, sizeof *fa), *fb = kiln_calloc(nb ? nb : 1, sizeof *fb);
        if (fa && fb) {
            kiln_flag_outliers(ea, na, 3.5, fa);
            kiln_flag_outliers(eb, nb, 3.5, fb);
            size_t ia = 0, ib = 0;
            for (size_t i = 0; i < json_array_size(rows); i++) {
                json_t *row = json_array_get(rows, i);
                bool isb = !strcmp(json_string_value(json_object_get(row, "side")), "b");
                json_object_set_new(row, "outlier", json_boolean(isb ? fb[ib++] : fa[ia++]));
            }
        }
        kiln_free(fa);
        kiln_free(fb);
        flag_stage_outliers(rows);
        kiln_reduction ra = kiln_reduce(ea, na), rb = kiln_reduce(eb, nb);
        json_t *summary = json_object();
        json_t *e2e = json_object();
        json_object_set_new(e2e, cfg->label_a, json_real(ra.mean));
        json_object_set_new(e2e, cfg->label_b, json_real(rb.mean));
        json_object_set_new(e2e, "reduction_percent", json_real(100.0 * (ra.mean - rb.mean) / ra.mean));
        json_object_set_new(summary, "engine_e2e_s", e2e);
        kiln_ratio q;
        kiln_ratio_of_medians(ea, na, eb, nb, cfg->confidence, &q);
        bool identical = true;
        const char *first = json_string_value(json_object_get(json_array_get(rows, 0), "output_sha256"));
        for (size_t i = 1; i < json_array_size(rows); i++)
            identical = identical && first &&
                        !strcmp(first, json_string_value(json_object_get(json_array_get(rows, i), "output_sha256")));
        char scope[512];
        snprintf(scope, sizeof scope, "%s",
                 cfg->scope ? cfg->scope : "A/B/B/A comparison: same graph, prompt and seed on both sides; every "
                                           "sample retained, outliers flagged");
        *report = json_pack(
            "{s:s,s:s,s:{s:s,s:s},s:s,s:{s:s,s:s,s:s,s:I,s:i,s:i},s:s,s:o,s:o,s:{s:{s:s,s:s},s:{s:s,s:s}},"
            "s:{s:o,s:o,s:o,s:o,s:f,s:I,s:I,s:s},s:s}",
            "schema", KILN_REPORT_SCHEMA, "kind", "abba", "tool", "name", "kiln bench compare", "version",
            KILN_VERSION, "scope", scope, "environment", "graph", w.path, "graph_digest", w.graph_digest, "cell",
            cell->id, "seed", (json_int_t)cfg->seed, "rounds", cfg->rounds, "warmup_per_side", cfg->warmup,
            "timing_definition",
            "engine_e2e_s: the target's own execution time (ComfyUI API: execution_start to execution_success "
            "stamps); output_sha256: sha256 of the decoded RGB8 pixels (of all images of a submit, in order)",
            "summary", summary, "rows", rows, "sides", "a", "label", cfg->label_a, "target", a->describe, "b", "label",
            cfg->label_b, "target", b->describe, "ratio_of_medians", "ratio", num_or_null(q.ratio), "lo",
            num_or_null(q.lo), "hi", num_or_null(q.hi), "confidence", json_real(q.conf_achieved), "requested",
            cfg->confidence, "n_a", (json_int_t)q.n_a, "n_b", (json_int_t)q.n_b, "method",
            "median(b)/median(a); each median's order-statistic interval at sqrt(requested), bounds combined",
            "identical_outputs", identical ? "yes" : "no");
        rows = NULL;
    }
    json_decref(rows);
    kiln_free(ea);
    kiln_free(eb);
    kiln_workflow_free(&w);
    kiln_manifest_free(m);
    if (st == KILN_OK && !*report) st = KILN_FAIL(err, KILN_E_NOMEM, "compare: out of memory");
    return st;
}

void kiln_compare_markdown(const json_t *rep, FILE *out) {
    const json_t *sides = json_object_get(rep, "sides");
    const char *la = json_string_value(json_object_get(json_object_get(sides, "a"), "label"));
    const char *lb = json_string_value(json_object_get(json_object_get(sides, "b"), "label"));
    fprintf(out, "# A/B/B/A: %s (a) vs %s (b)\n\n%s\n\n", la ? la : "a", lb ? lb : "b",
            json_string_value(json_object_get(rep, "scope")) ? json_string_value(json_object_get(rep, "scope")) : "");
    fprintf(out, "| cell | side | engine e2e s | output sha256 (decoded pixels) | note |\n|---|---|---:|---|---|\n");
    const json_t *rows = json_object_get(rep, "rows");
    for (size_t i = 0; i < json_array_size(rows); i++) {
        const json_t *r = json_array_get(rows, i);
        const char *sha = json_string_value(json_object_get(r, "output_sha256"));
        char note[256] = "";
        if (json_is_true(json_object_get(r, "outlier"))) snprintf(note, sizeof note, "outlier (kept)");
        const json_t *os = json_object_get(r, "outlier_stages");
        for (size_t k = 0; k < json_array_size(os); k++) {
            size_t l = strlen(note);
            snprintf(note + l, sizeof note - l, "%s%s outlier (kept)", l ? "; " : "", json_string_value(json_array_get(os, k)));
        }
        fprintf(out, "| %s | %s | %.4f | `%.16s` | %s |\n", json_string_value(json_object_get(r, "cell")),
                json_string_value(json_object_get(r, "side")), json_number_value(json_object_get(r, "engine_e2e_s")),
                sha ? sha : "", note);
    }
    const json_t *e2e = json_object_get(json_object_get(rep, "summary"), "engine_e2e_s");
    fprintf(out, "\nMean engine end-to-end: %s %.4f s, %s %.4f s (reduction %.2f %%).\n", la ? la : "a",
            json_number_value(json_object_get(e2e, la ? la : "a")), lb ? lb : "b",
            json_number_value(json_object_get(e2e, lb ? lb : "b")),
            json_number_value(json_object_get(e2e, "reduction_percent")));
    const json_t *q = json_object_get(rep, "ratio_of_medians");
    if (json_is_number(json_object_get(q, "ratio")))
        fprintf(out, "Ratio of medians b/a: %.4f, interval [%.4f, %.4f] at %.1f %% confidence (requested %.0f %%; n = %lld + %lld).\n",
                json_number_value(json_object_get(q, "ratio")), json_number_value(json_object_get(q, "lo")),
                json_number_value(json_object_get(q, "hi")), 100 * json_number_value(json_object_get(q, "confidence")),
                100 * json_number_value(json_object_get(q, "requested")),
                (long long)json_integer_value(json_object_get(q, "n_a")),
                (long long)json_integer_value(json_object_get(q, "n_b")));
    fprintf(out, "Identical outputs: %s.\n", json_string_value(json_object_get(rep, "identical_outputs")));
}

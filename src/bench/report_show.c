/* report_show.c - the short human table of a report (`kiln bench show`). */
#include <math.h>
#include <string.h>

#include "bench/report.h"
#include "bench/stats.h"

/* Strings for printing: "" when absent (the schema makes most of them required; never pass NULL to %s). */
static const char *jstr(const json_t *v) {
    const char *s = json_string_value(v);
    return s ? s : "";
}

static double num_or_nan(const json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* "1.234" or "-" for a missing figure. */
static const char *fmt(char *buf, size_t cap, double v, int decimals) {
    if (isnan(v)) snprintf(buf, cap, "-");
    else snprintf(buf, cap, "%.*f", decimals, v);
    return buf;
}

static void show_seconds_per_image(const json_t *root, FILE *out) {
    fprintf(out, "%s\n", jstr(json_object_get(root, "question")));
    const json_t *cap = json_object_get(json_object_get(root, "preflight"), "cap");
    char a[32], b[32], c[32], d[32], e[32], f[32], g[32], h[32];
    const char *field = json_string_value(json_object_get(cap, "field"));
    fprintf(out, "arm %s, cap %s W (%s), at %s\n", jstr(json_object_get(root, "arm")),
            fmt(a, sizeof a, num_or_nan(cap, "w"), 1), field ? field : "no cap read",
            jstr(json_object_get(root, "at")));
    const json_t *tel = json_object_get(root, "telemetry");
    if (tel && !json_is_true(json_object_get(tel, "available")))
        fprintf(out, "telemetry: unavailable (%s)\n", jstr(json_object_get(tel, "why")));
    fprintf(out, "\n%-24s %4s %5s %7s %9s %17s %7s %8s %7s %7s %6s\n", "graph", "card", "batch", "submits",
            "s/image", "(min..max)", "img/min", "cold s", "power W", "sm MHz", "pwrcap");
    const char *gname;
    json_t *gr;
    json_object_foreach(json_object_get(root, "graphs"), gname, gr) {
        const char *cname;
        json_t *card;
        json_object_foreach(json_object_get(gr, "cards"), cname, card) {
            const char *bname;
            json_t *bt;
            json_object_foreach(json_object_get(card, "batches"), bname, bt) {
                const json_t *red = json_object_get(bt, "reduced");
                const json_t *pi = json_object_get(red, "exec_seconds_per_image");
                const json_t *tr = json_object_get(bt, "trace");
                char range[40];
                snprintf(range, sizeof range, "(%s..%s)", fmt(a, sizeof a, num_or_nan(pi, "min"), 3),
                         fmt(b, sizeof b, num_or_nan(pi, "max"), 3));
                fprintf(out, "%-24s %4s %5s %7lld %9s %17s %7s %8s %7s %7s %6s\n", gname, cname, bname,
                        (long long)json_integer_value(json_object_get(red, "submits")),
                        fmt(c, sizeof c, num_or_nan(pi, "median"), 3), range,
                        fmt(d, sizeof d, num_or_nan(red, "images_per_minute_wall"), 2),
                        fmt(e, sizeof e, num_or_nan(bt, "cold_first_submit_exec_seconds"), 2),
                        fmt(f, sizeof f, num_or_nan(json_object_get(tr, "power.draw"), "median"), 1),
                        fmt(g, sizeof g, num_or_nan(json_object_get(tr, "clocks.sm"), "median"), 0),
                        fmt(h, sizeof h, num_or_nan(json_object_get(tr, "throttle"), "sw_power_cap"), 2));
                const char *rk;
                json_t *rv;
                json_object_foreach(json_object_get(bt, "ratio_vs_references"), rk, rv) {
                    fprintf(out, "    vs %s: ratio %s (reference median %s s)\n", rk,
                            fmt(a, sizeof a, num_or_nan(rv, "ratio"), 3),
                            fmt(b, sizeof b, num_or_nan(rv, "reference_median"), 3));
                }
                size_t nw = json_object_size(json_object_get(bt, "references_withheld"));
                if (nw) fprintf(out, "    %zu reference(s) withheld (see references_withheld)\n", nw);
            }
        }
    }
    const json_t *refusals = json_object_get(root, "refusals");
    for (size_t i = 0; i < json_array_size(refusals); i++) {
        const json_t *r = json_array_get(refusals, i);
        if (json_is_string(r)) fprintf(out, "REFUSED: %s\n", json_string_value(r));
        else
            fprintf(out, "REFUSED %s: %s\n", jstr(json_object_get(r, "check")),
                    jstr(json_object_get(r, "verdict")));
    }
    const json_t *cn = json_object_get(root, "cap_name_check");
    fprintf(out, "cap name check: %s\n", jstr(json_object_get(cn, "verdict")));
}

static void show_abba(const json_t *root, FILE *out) {
    fprintf(out, "%s\n\n", jstr(json_object_get(root, "scope")));
    fprintf(out, "%-10s %4s %12s %11s %14s  %s\n", "cell", "side", "engine e2e s", "denoise s", "text enc ms",
            "output sha256");
    const json_t *rows = json_object_get(root, "rows");
    char a[32], b[32], c[32];
    for (size_t i = 0; i < json_array_size(rows); i++) {
        const json_t *r = json_array_get(rows, i);
        double te = NAN;
        const json_t *st = json_object_get(r, "stages");
        for (size_t k = 0; k < json_array_size(st); k++) {
            const char *nm = jstr(json_object_get(json_array_get(st, k), "name"));
            if (strstr(nm, "TextEncoding")) te = num_or_nan(json_array_get(st, k), "duration_ms");
        }
        const char *sha = jstr(json_object_get(r, "output_sha256"));
        fprintf(out, "%-10s %4s %12s %11s %14s  %.16s%s\n", jstr(json_object_get(r, "cell")),
                jstr(json_object_get(r, "side")), fmt(a, sizeof a, num_or_nan(r, "engine_e2e_s"), 4),
                fmt(b, sizeof b, num_or_nan(r, "denoise_s"), 4), fmt(c, sizeof c, te, 2), sha ? sha : "",
                json_is_true(json_object_get(r, "outlier")) ? "  (outlier, kept)" : "");
    }
    const char *metric;
    json_t *m;
    json_object_foreach(json_object_get(root, "summary"), metric, m) {
        fprintf(out, "%s:", metric);
        const char *k;
        json_t *v;
        json_object_foreach(m, k, v) fprintf(out, " %s %s", k, fmt(a, sizeof a, json_number_value(v), 4));
        fputc('\n', out);
    }
    const json_t *q = json_object_get(root, "ratio_of_medians");
    if (q)
        fprintf(out, "ratio of medians b/a %s, interval [%s, %s] at %.1f%% confidence\n",
                fmt(a, sizeof a, num_or_nan(q, "ratio"), 4), fmt(b, sizeof b, num_or_nan(q, "lo"), 4),
                fmt(c, sizeof c, num_or_nan(q, "hi"), 4), 100 * num_or_nan(q, "confidence"));
    const char *ident = json_string_value(json_object_get(root, "identical_outputs"));
    if (ident) fprintf(out, "identical outputs: %s\n", ident);
}

static void show_variants(const json_t *root, FILE *out) {
    fprintf(out, "%s\n\n%-16s %7s %18s %12s\n", jstr(json_object_get(root, "scope")), "variant",
            "cycles", "HTTP median s", "VAE median s");
    const json_t *res = json_object_get(root, "results");
    char a[32], b[32];
    for (size_t i = 0; i < json_array_size(res); i++) {
        const json_t *v = json_array_get(res, i);
        fprintf(out, "%-16s %7zu %18s %12s\n", jstr(json_object_get(v, "variant")),
                json_array_size(json_object_get(v, "http_cycles")),
                fmt(a, sizeof a, num_or_nan(v, "http_median_of_lifecycle_medians_s"), 4),
                fmt(b, sizeof b, num_or_nan(v, "vae_median_s"), 4));
    }
}

void kiln_report_print_table(const kiln_report *r, FILE *out) {
    fprintf(out, "[%s report]\n", kiln_report_kind_name(r->kind));
    if (!r->typed_ok) {
        fprintf(out, "(the report does not follow the schema; `kiln bench check` lists why)\n");
        return; /* the table reads fields by type */
    }
    if (r->problems.n)
        fprintf(out, "(%zu consistency problem(s); `kiln bench check` lists them)\n", r->problems.n);
    switch (r->kind) {
    case KILN_REPORT_SECONDS_PER_IMAGE: show_seconds_per_image(r->root, out); break;
    case KILN_REPORT_ABBA: show_abba(r->root, out); break;
    case KILN_REPORT_VARIANTS: show_variants(r->root, out); break;
    case KILN_REPORT_SERVE_LOAD: kiln_report_show_serve_load(r->root, out); break;
    }
}

/* report.c - loading a report, recognising its kind, and the consistency rules (see report.h). */
#include "bench/report.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "bench/stats.h"

const char *kiln_report_kind_name(kiln_report_kind kind) {
    switch (kind) {
    case KILN_REPORT_SECONDS_PER_IMAGE: return "seconds-per-image";
    case KILN_REPORT_ABBA: return "abba";
    case KILN_REPORT_VARIANTS: return "variants";
    case KILN_REPORT_SERVE_LOAD: return "serve-load";
    }
    return "unknown";
}

static bool detect_kind(const json_t *root, kiln_report_kind *kind) {
    const char *k = json_string_value(json_object_get(root, "kind"));
    if (k) {
        for (int i = 0; i <= KILN_REPORT_SERVE_LOAD; i++)
            if (!strcmp(k, kiln_report_kind_name((kiln_report_kind)i))) {
                *kind = (kiln_report_kind)i;
                return true;
            }
        return false;
    }
    if (json_object_get(root, "graphs")) *kind = KILN_REPORT_SECONDS_PER_IMAGE;
    else if (json_object_get(root, "rows")) *kind = KILN_REPORT_ABBA;
    else if (json_object_get(root, "results")) *kind = KILN_REPORT_VARIANTS;
    else if (json_object_get(root, "runs")) *kind = KILN_REPORT_SERVE_LOAD;
    else return false;
    return true;
}

kiln_status kiln_report_from_json(json_t *root, const char *name, kiln_report **out, kiln_err *err) {
    *out = NULL;
    if (!json_is_object(root)) return KILN_FAIL(err, KILN_E_FORMAT, "%s: a report is a JSON object", name);
    kiln_report_kind kind;
    if (!detect_kind(root, &kind))
        return KILN_FAIL(err, KILN_E_FORMAT,
                         "%s: not a benchmark report (no \"graphs\", \"rows\", \"results\" or \"runs\", or an unknown "
                         "\"kind\")",
                         name);
    kiln_report *r = kiln_calloc(1, sizeof *r);
    if (!r) return KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory", name);
    r->root = json_incref(root);
    r->kind = kind;
    kiln_shape_check(root, kiln_report_shape(kind), "", &r->problems, &r->unknown);
    /* Consistency rules read fields by type; run them only on a document whose types are right. */
    r->typed_ok = r->problems.n == 0;
    if (r->typed_ok) kiln_report_check_consistency(root, kind, &r->problems);
    const char *schema = json_string_value(json_object_get(root, "schema"));
    if (schema && strcmp(schema, KILN_REPORT_SCHEMA) != 0)
        kiln_strlist_add(&r->problems, "/schema: \"%s\" is not %s", schema, KILN_REPORT_SCHEMA);
    *out = r;
    return KILN_OK;
}

kiln_status kiln_report_parse(const char *buf, size_t len, const char *name, kiln_report **out, kiln_err *err) {
    *out = NULL;
    if (len > KILN_REPORT_MAX_BYTES)
        return KILN_FAIL(err, KILN_E_LIMIT, "%s: %zu bytes is over the %u-byte report limit", name, len,
                         KILN_REPORT_MAX_BYTES);
    json_error_t je;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) return KILN_FAIL(err, KILN_E_FORMAT, "%s:%d:%d: %s", name, je.line, je.column, je.text);
    kiln_status st = kiln_report_from_json(root, name, out, err);
    json_decref(root);
    return st;
}

kiln_status kiln_report_load(const char *path, kiln_report **out, kiln_err *err) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return KILN_FAIL(err, errno == ENOENT ? KILN_E_NOT_FOUND : KILN_E_IO, "%s: %s", path, strerror(errno));
    char *buf = NULL;
    size_t len = 0, cap = 0;
    kiln_status st = KILN_OK;
    for (;;) {
        if (len == cap) {
            if (cap > KILN_REPORT_MAX_BYTES) {
                st = KILN_FAIL(err, KILN_E_LIMIT, "%s: over the %u-byte report limit", path, KILN_REPORT_MAX_BYTES);
                break;
            }
            cap = cap ? 2 * cap : 65536;
            char *nb = kiln_realloc(buf, cap);
            if (!nb) {
                st = KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory", path);
                break;
            }
            buf = nb;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0) {
            if (ferror(f)) st = KILN_FAIL(err, KILN_E_IO, "%s: read error", path);
            break;
        }
    }
    fclose(f);
    if (st == KILN_OK) st = kiln_report_parse(buf, len, path, out, err);
    kiln_free(buf);
    return st;
}

void kiln_report_free(kiln_report *r) {
    if (!r) return;
    json_decref(r->root);
    kiln_strlist_free(&r->problems);
    kiln_strlist_free(&r->unknown);
    kiln_free(r);
}

/* ---- consistency rules ----------------------------------------------------------------------------------- */

/* Reports round their figures (3 decimals for seconds, 1 for telemetry), so recomputed values are compared
 * with a slack of a rounding step plus a relative part. */
static bool close_to(double got, double want, double abs_tol, double rel_tol) {
    return fabs(got - want) <= abs_tol + rel_tol * fabs(want);
}

static bool num_of(const json_t *o, const char *key, double *d) {
    json_t *v = json_object_get(o, key);
    if (!json_is_number(v)) return false;
    *d = json_number_value(v);
    return true;
}

static bool is_hex64(const char *s) {
    if (!s || strlen(s) != 64) return false;
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
    return true;
}

/* n/min/median/max/mean: n = 0 <=> every statistic null; otherwise min <= median, mean <= max. */
static void check_reduction(const json_t *red, const char *path, kiln_strlist *p) {
    if (!json_is_object(red)) return;
    json_int_t n = json_integer_value(json_object_get(red, "n"));
    static const char *const keys[] = {"min", "median", "max", "mean"};
    double v[4];
    int present = 0;
    for (int i = 0; i < 4; i++) present += num_of(red, keys[i], &v[i]);
    if (n < 0) {
        kiln_strlist_add(p, "%s/n: %lld is negative", path, (long long)n);
        return;
    }
    if (n == 0) {
        if (present) kiln_strlist_add(p, "%s: n = 0 but statistics are not null (an absent reading is null, never 0)", path);
        return;
    }
    if (present != 4) {
        kiln_strlist_add(p, "%s: n = %lld but a statistic is null", path, (long long)n);
        return;
    }
    double slack = 0.051 + 1e-3 * fabs(v[2]);
    if (v[0] > v[1] + slack || v[1] > v[2] + slack || v[3] < v[0] - slack || v[3] > v[2] + slack)
        kiln_strlist_add(p, "%s: min %.6g, median %.6g, max %.6g, mean %.6g are out of order", path, v[0], v[1],
                         v[2], v[3]);
    if (n == 1 && (fabs(v[0] - v[2]) > slack))
        kiln_strlist_add(p, "%s: n = 1 but min != max", path);
}

/* A reduction written in a report against the values it claims to reduce. */
static void check_reduction_matches(const json_t *red, const double *x, size_t n, const char *path,
                                    kiln_strlist *p) {
    kiln_reduction want = kiln_reduce(x, n);
    json_int_t got_n = json_integer_value(json_object_get(red, "n"));
    if ((size_t)got_n != want.n) {
        kiln_strlist_add(p, "%s/n: %lld, but %zu values were timed", path, (long long)got_n, want.n);
        return;
    }
    if (want.n == 0) return;
    static const char *const keys[] = {"min", "median", "max", "mean"};
    double w[4] = {want.min, want.median, want.max, want.mean};
    for (int i = 0; i < 4; i++) {
        double g;
        if (num_of(red, keys[i], &g) && !close_to(g, w[i], 0.0015, 1e-3))
            kiln_strlist_add(p, "%s/%s: %.6g, but the submits give %.6g", path, keys[i], g, w[i]);
    }
}

static void check_telemetry(const json_t *t, const char *path, kiln_strlist *p) {
    json_int_t samples = json_integer_value(json_object_get(t, "samples"));
    char sub[1024];
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)t, key, v) {
        if (!json_is_object(v) || !json_object_get(v, "n")) continue;
        snprintf(sub, sizeof sub, "%s/%s", path, key);
        check_reduction(v, sub, p);
        if (json_integer_value(json_object_get(v, "n")) > samples)
            kiln_strlist_add(p, "%s/n: more readings than the %lld samples", sub, (long long)samples);
    }
    json_t *thr = json_object_get(t, "throttle");
    json_object_foreach(thr, key, v) {
        if (!json_is_number(v)) continue;
        double f = json_number_value(v);
        if (f < 0 || f > 1) kiln_strlist_add(p, "%s/throttle/%s: %.6g is not a fraction in [0, 1]", path, key, f);
    }
    double e;
    if (num_of(t, "energy_j", &e) && e < 0) kiln_strlist_add(p, "%s/energy_j: negative", path);
}

static bool is_cap_field(const char *s) {
    return s && (!strcmp(s, "power.limit") || !strcmp(s, "enforced.power.limit"));
}

static void check_preflight(const json_t *root, kiln_strlist *p) {
    const json_t *pf = json_object_get(root, "preflight");
    const json_t *cap = json_object_get(pf, "cap");
    const char *field = json_string_value(json_object_get(cap, "field"));
    double w = 0; /* set by num_of when has_w */
    bool has_w = num_of(cap, "w", &w);
    if (has_w && !is_cap_field(field))
        kiln_strlist_add(p, "/preflight/cap/field: a cap is read from power.limit or enforced.power.limit, not %s",
                         field ? field : "null");
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(cap, "per_card_field"), key, v) {
        if (!is_cap_field(json_string_value(v)))
            kiln_strlist_add(p, "/preflight/cap/per_card_field/%s: \"%s\" is not a cap field", key,
                             json_string_value(v));
    }
    if (json_is_true(json_object_get(cap, "agree")) && has_w) {
        json_object_foreach(json_object_get(cap, "per_card_w"), key, v) {
            if (json_is_number(v) && !close_to(json_number_value(v), w, 0.05, 0))
                kiln_strlist_add(p, "/preflight/cap: agree is true but card %s is at %.6g W, not %.6g W", key,
                                 json_number_value(v), w);
        }
    }
    const json_t *ca = json_object_get(pf, "card_available");
    const json_t *gate = json_object_get(ca, "contention_gate");
    const json_t *attempts = json_object_get(gate, "attempts");
    double max_util = 0;
    num_of(gate, "max_util_pct", &max_util);
    size_t na = json_array_size(attempts);
    char sub[256];
    for (size_t i = 0; i < na; i++) {
        const json_t *a = json_array_get(attempts, i);
        snprintf(sub, sizeof sub, "/preflight/card_available/contention_gate/attempts/%zu/utilization_pct", i);
        check_reduction(json_object_get(a, "utilization_pct"), sub, p);
    }
    bool passed = json_is_true(json_object_get(gate, "passed"));
    /* A gate that could not run (no telemetry: a CPU target on a machine without a GPU) refuses nothing. */
    bool applicable = !json_is_false(json_object_get(gate, "applicable"));
    if (!applicable && passed)
        kiln_strlist_add(p, "/preflight/card_available/contention_gate: passed, but the gate did not apply");
    if (passed) {
        const json_t *last = json_array_get(attempts, na ? na - 1 : 0);
        double mean;
        if (!last) kiln_strlist_add(p, "/preflight/card_available/contention_gate: passed with no attempt");
        else if (num_of(json_object_get(last, "utilization_pct"), "mean", &mean) && mean > max_util + 1e-9)
            kiln_strlist_add(p, "/preflight/card_available/contention_gate: passed, but the last attempt's mean "
                                "utilization %.6g%% is over %.6g%%", mean, max_util);
    }
    bool clear = json_is_true(json_object_get(ca, "clear"));
    if (clear && json_array_size(json_object_get(ca, "unexpected")) > 0)
        kiln_strlist_add(p, "/preflight/card_available: clear is true with unexpected GPU processes");
    size_t nref = json_array_size(json_object_get(root, "refusals"));
    if (((applicable && !passed) || !clear) && nref == 0)
        kiln_strlist_add(p, "/refusals: the card was not available (gate or processes) but no refusal is recorded");
    const json_t *ib = json_object_get(pf, "idle_baseline");
    json_object_foreach((json_t *)ib, key, v) {
        snprintf(sub, sizeof sub, "/preflight/idle_baseline/%s", key);
        check_telemetry(v, sub, p);
    }
}

static void check_submits(const json_t *arr, const char *path, json_int_t batch_size, const json_t *cells,
                          kiln_strlist *p) {
    char sub[1024];
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const json_t *s = json_array_get(arr, i);
        snprintf(sub, sizeof sub, "%s/%zu", path, i);
        double ex = 0, wall = 0, per = 0, t0 = 0, t1 = 0;
        num_of(s, "exec_seconds", &ex);
        num_of(s, "wall_seconds", &wall);
        num_of(s, "exec_seconds_per_image", &per);
        num_of(s, "t0", &t0);
        num_of(s, "t1", &t1);
        json_int_t ni = json_integer_value(json_object_get(s, "n_images"));
        if (ex < 0 || wall < 0) kiln_strlist_add(p, "%s: negative seconds", sub);
        if (ni < 1) kiln_strlist_add(p, "%s/n_images: %lld, a submit makes at least one image", sub, (long long)ni);
        else if (!close_to(per, ex / (double)ni, 0.0015, 1e-3))
            kiln_strlist_add(p, "%s/exec_seconds_per_image: %.6g, but %.6g s / %lld images = %.6g", sub, per, ex,
                             (long long)ni, ex / (double)ni);
        if (t1 < t0) kiln_strlist_add(p, "%s: t1 is before t0", sub);
        size_t nimg = json_array_size(json_object_get(s, "images"));
        if (nimg && (json_int_t)nimg != ni)
            kiln_strlist_add(p, "%s/images: %zu files for %lld images", sub, nimg, (long long)ni);
        if (json_integer_value(json_object_get(s, "batch_size")) != batch_size)
            kiln_strlist_add(p, "%s/batch_size: %lld under batch %lld", sub,
                             (long long)json_integer_value(json_object_get(s, "batch_size")), (long long)batch_size);
        const char *cell = json_string_value(json_object_get(s, "cell"));
        bool listed = false;
        for (size_t c = 0; c < json_array_size(cells) && !listed; c++)
            listed = cell && !strcmp(cell, json_string_value(json_array_get(cells, c)));
        if (!listed) kiln_strlist_add(p, "%s/cell: \"%s\" is not one of the graph's prompt_cells", sub, cell);
        const json_t *imgs = json_object_get(s, "images");
        for (size_t k = 0; k < json_array_size(imgs); k++) {
            const char *ps = json_string_value(json_object_get(json_array_get(imgs, k), "pixel_sha256"));
            if (ps && !is_hex64(ps)) kiln_strlist_add(p, "%s/images/%zu/pixel_sha256: not a sha256", sub, k);
        }
    }
}

static void check_batch(const json_t *b, const char *path, json_int_t batch_size, double card_cap,
                        bool have_cap, const char *graph_digest, const json_t *cells, kiln_strlist *p) {
    char sub[1024];
    const json_t *warm = json_object_get(b, "warmup"), *timed = json_object_get(b, "timed");
    snprintf(sub, sizeof sub, "%s/warmup", path);
    check_submits(warm, sub, batch_size, cells, p);
    snprintf(sub, sizeof sub, "%s/timed", path);
    check_submits(timed, sub, batch_size, cells, p);
    double cold;
    if (json_is_true(json_object_get(b, "cold_measured")) && num_of(b, "cold_first_submit_exec_seconds", &cold)) {
        double w0;
        if (!num_of(json_array_get(warm, 0), "exec_seconds", &w0))
            kiln_strlist_add(p, "%s: cold_measured with no warm-up submit", path);
        else if (!close_to(cold, w0, 1e-6, 1e-6))
            kiln_strlist_add(p, "%s/cold_first_submit_exec_seconds: %.6g, but the first warm-up took %.6g s", path,
                             cold, w0);
    }
    size_t nt = json_array_size(timed);
    double *per_submit = kiln_calloc(nt ? nt : 1, sizeof *per_submit);
    double *per_image = kiln_calloc(nt ? nt : 1, sizeof *per_image);
    json_int_t images = 0;
    double first_t0 = 0, last_t1 = 0;
    for (size_t i = 0; i < nt && per_submit && per_image; i++) {
        const json_t *s = json_array_get(timed, i);
        num_of(s, "exec_seconds", &per_submit[i]);
        json_int_t ni = json_integer_value(json_object_get(s, "n_images"));
        per_image[i] = ni > 0 ? per_submit[i] / (double)ni : NAN;
        images += ni;
        double t0 = 0, t1 = 0;
        num_of(s, "t0", &t0);
        num_of(s, "t1", &t1);
        if (i == 0 || t0 < first_t0) first_t0 = t0;
        if (i == 0 || t1 > last_t1) last_t1 = t1;
    }
    const json_t *red = json_object_get(b, "reduced");
    if (per_submit && per_image) {
        if ((size_t)json_integer_value(json_object_get(red, "submits")) != nt)
            kiln_strlist_add(p, "%s/reduced/submits: %lld, but %zu timed submits are listed", path,
                             (long long)json_integer_value(json_object_get(red, "submits")), nt);
        if (json_integer_value(json_object_get(red, "images")) != images)
            kiln_strlist_add(p, "%s/reduced/images: %lld, but the timed submits made %lld", path,
                             (long long)json_integer_value(json_object_get(red, "images")), (long long)images);
        snprintf(sub, sizeof sub, "%s/reduced/exec_seconds_per_submit", path);
        check_reduction(json_object_get(red, "exec_seconds_per_submit"), sub, p);
        check_reduction_matches(json_object_get(red, "exec_seconds_per_submit"), per_submit, nt, sub, p);
        snprintf(sub, sizeof sub, "%s/reduced/exec_seconds_per_image", path);
        check_reduction(json_object_get(red, "exec_seconds_per_image"), sub, p);
        check_reduction_matches(json_object_get(red, "exec_seconds_per_image"), per_image, nt, sub, p);
        double wall, ipm;
        if (nt && num_of(red, "wall_seconds_for_the_run", &wall)) {
            if (!close_to(wall, last_t1 - first_t0, 0.01, 1e-3))
                kiln_strlist_add(p, "%s/reduced/wall_seconds_for_the_run: %.6g, but t0..t1 spans %.6g s", path,
                                 wall, last_t1 - first_t0);
            if (num_of(red, "images_per_minute_wall", &ipm) && wall > 0 &&
                !close_to(ipm, (double)images * 60.0 / wall, 0.01, 1e-3))
                kiln_strlist_add(p, "%s/reduced/images_per_minute_wall: %.6g, but %lld images in %.6g s is %.6g",
                                 path, ipm, (long long)images, wall, (double)images * 60.0 / wall);
        }
    }
    kiln_free(per_submit);
    kiln_free(per_image);
    snprintf(sub, sizeof sub, "%s/trace", path);
    check_telemetry(json_object_get(b, "trace"), sub, p);
    /* A reference is matched only at the same cap, graph digest and batch size. */
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(b, "ratio_vs_references"), key, v) {
        double rc;
        bool ref_has_cap = num_of(v, "cap_w", &rc);
        if (!have_cap || !ref_has_cap || !close_to(rc, card_cap, 0.5, 0))
            kiln_strlist_add(p, "%s/ratio_vs_references/%s: matched across caps (or with no cap)", path, key);
        const char *gd = json_string_value(json_object_get(v, "graph_digest"));
        if (!gd || !graph_digest || strcmp(gd, graph_digest) != 0)
            kiln_strlist_add(p, "%s/ratio_vs_references/%s: matched across graph digests", path, key);
        if (json_integer_value(json_object_get(v, "batch_size")) != batch_size)
            kiln_strlist_add(p, "%s/ratio_vs_references/%s: matched across batch sizes", path, key);
    }
}

static void check_seconds_per_image(const json_t *root, kiln_strlist *p) {
    check_preflight(root, p);
    const char *gname;
    json_t *g;
    char path[1024];
    json_object_foreach(json_object_get(root, "graphs"), gname, g) {
        const char *gd = json_string_value(json_object_get(g, "graph_digest"));
        const char *fd = json_string_value(json_object_get(g, "file_digest"));
        if (!is_hex64(gd)) kiln_strlist_add(p, "/graphs/%s/graph_digest: not a sha256 (64 lowercase hex)", gname);
        if (!is_hex64(fd)) kiln_strlist_add(p, "/graphs/%s/file_digest: not a sha256 (64 lowercase hex)", gname);
        const char *rk;
        json_t *rv;
        json_object_foreach(json_object_get(g, "receipt"), rk, rv) {
            if (!is_hex64(json_string_value(rv))) kiln_strlist_add(p, "/graphs/%s/receipt/%s: not a sha256", gname, rk);
        }
        const json_t *knobs = json_object_get(g, "knobs");
        json_int_t knob_batch = json_integer_value(json_object_get(knobs, "batch_size"));
        const json_t *cells = json_object_get(g, "prompt_cells");
        const char *cname;
        json_t *card;
        json_object_foreach(json_object_get(g, "cards"), cname, card) {
            double cap_w = 0;
            bool have_cap = num_of(card, "cap_w", &cap_w);
            const char *bname;
            json_t *b;
            json_object_foreach(json_object_get(card, "batches"), bname, b) {
                char *end;
                long long bs = strtoll(bname, &end, 10);
                snprintf(path, sizeof path, "/graphs/%s/cards/%s/batches/%s", gname, cname, bname);
                if (*end || end == bname || bs < 1) {
                    kiln_strlist_add(p, "%s: a batch is keyed by its size (a positive integer)", path);
                    continue;
                }
                if (bs != knob_batch)
                    kiln_strlist_add(p, "%s: batch %lld differs from the graph's knob batch_size %lld", path, bs,
                                     (long long)knob_batch);
                check_batch(b, path, bs, cap_w, have_cap, gd, cells, p);
            }
        }
    }
    const json_t *cn = json_object_get(root, "cap_name_check");
    double claimed, measured;
    /* A name that claims a cap passes only when the measured cap is that cap (a name claiming none passes). */
    if (json_is_true(json_object_get(cn, "passed")) && num_of(cn, "cap_claimed_by_name_w", &claimed) &&
        !(num_of(cn, "cap_measured_w", &measured) && close_to(claimed, measured, 0.5, 0)))
        kiln_strlist_add(p, "/cap_name_check: passed, but the claimed and measured caps differ");
}

static void check_abba(const json_t *root, kiln_strlist *p) {
    const json_t *rows = json_object_get(root, "rows");
    size_t n = json_array_size(rows);
    if (n == 0) kiln_strlist_add(p, "/rows: no rows");
    for (size_t i = 0; i < n; i++) {
        const json_t *r = json_array_get(rows, i);
        const char *side = json_string_value(json_object_get(r, "side"));
        if (!side || (strcmp(side, "a") && strcmp(side, "b"))) {
            kiln_strlist_add(p, "/rows/%zu/side: \"%s\" is neither a nor b", i, side ? side : "");
            continue;
        }
        /* Counterbalanced order: each round of four runs a, b, b, a. */
        static const char order[4] = {'a', 'b', 'b', 'a'};
        if (side[0] != order[i % 4])
            kiln_strlist_add(p, "/rows/%zu/side: %s breaks the A/B/B/A order (expected %c)", i, side, order[i % 4]);
        if (!is_hex64(json_string_value(json_object_get(r, "output_sha256"))))
            kiln_strlist_add(p, "/rows/%zu/output_sha256: not a sha256", i);
        double e;
        if (num_of(r, "engine_e2e_s", &e) && e < 0) kiln_strlist_add(p, "/rows/%zu/engine_e2e_s: negative", i);
        const json_t *stages = json_object_get(r, "stages");
        for (size_t k = 0; k < json_array_size(stages); k++)
            if (num_of(json_array_get(stages, k), "duration_ms", &e) && e < 0)
                kiln_strlist_add(p, "/rows/%zu/stages/%zu/duration_ms: negative", i, k);
    }
    if (n % 4) kiln_strlist_add(p, "/rows: %zu rows is not whole A/B/B/A rounds", n);
    /* summary.<metric> = {<label a>: mean of side a, <label b>: mean of side b, reduction_percent}. */
    const char *metric;
    json_t *m;
    json_object_foreach(json_object_get(root, "summary"), metric, m) {
        const char *labels[2] = {0};
        double vals[2] = {0};
        int nl = 0;
        const char *k;
        json_t *v;
        json_object_foreach(m, k, v) {
            if (!strcmp(k, "reduction_percent") || !json_is_number(v)) continue;
            if (nl < 2) {
                labels[nl] = k;
                vals[nl] = json_number_value(v);
            }
            nl++;
        }
        if (nl != 2) {
            kiln_strlist_add(p, "/summary/%s: expected one value per side, found %d", metric, nl);
            continue;
        }
        for (int s = 0; s < 2; s++) {
            double sum = 0;
            int cnt = 0;
            for (size_t i = 0; i < n; i++) {
                const json_t *r = json_array_get(rows, i);
                const char *side = json_string_value(json_object_get(r, "side"));
                double x;
                if (side && side[0] == "ab"[s] && num_of(r, metric, &x)) {
                    sum += x;
                    cnt++;
                }
            }
            if (cnt && !close_to(vals[s], sum / cnt, 1e-9, 1e-9))
                kiln_strlist_add(p, "/summary/%s/%s: %.10g, but the mean of side %c rows is %.10g", metric,
                                 labels[s], vals[s], "ab"[s], sum / cnt);
        }
        double rp;
        if (num_of(m, "reduction_percent", &rp) && vals[0] != 0 &&
            !close_to(rp, 100.0 * (vals[0] - vals[1]) / vals[0], 1e-9, 1e-9))
            kiln_strlist_add(p, "/summary/%s/reduction_percent: %.10g, but (a - b) / a = %.10g %%", metric, rp,
                             100.0 * (vals[0] - vals[1]) / vals[0]);
    }
    const char *ident = json_string_value(json_object_get(root, "identical_outputs"));
    if (ident && n) {
        const char *first = json_string_value(json_object_get(json_array_get(rows, 0), "output_sha256"));
        bool same = true;
        for (size_t i = 1; i < n && first; i++) {
            const char *o = json_string_value(json_object_get(json_array_get(rows, i), "output_sha256"));
            same = same && o && !strcmp(o, first);
        }
        if (strcmp(ident, same ? "yes" : "no") != 0)
            kiln_strlist_add(p, "/identical_outputs: \"%s\", but the output digests say %s", ident, same ? "yes" : "no");
    }
}

static void check_variants(const json_t *root, kiln_strlist *p) {
    const json_t *res = json_object_get(root, "results");
    for (size_t i = 0; i < json_array_size(res); i++) {
        const json_t *v = json_array_get(res, i);
        const json_t *cycles = json_object_get(v, "http_cycles");
        size_t nc = json_array_size(cycles);
        double *x = kiln_calloc(nc ? nc : 1, sizeof *x);
        if (!x) return;
        for (size_t c = 0; c < nc; c++) {
            const json_t *cy = json_array_get(cycles, c);
            num_of(cy, "http_median_s", &x[c]);
            if (json_integer_value(json_object_get(cy, "n")) < 1)
                kiln_strlist_add(p, "/results/%zu/http_cycles/%zu/n: a median needs at least one request", i, c);
        }
        double got;
        if (nc && num_of(v, "http_median_of_lifecycle_medians_s", &got) &&
            !close_to(got, kiln_median(x, nc), 1e-9, 1e-9))
            kiln_strlist_add(p, "/results/%zu/http_median_of_lifecycle_medians_s: %.10g, but the cycles' median is %.10g",
                             i, got, kiln_median(x, nc));
        kiln_free(x);
        const json_t *recs = json_object_get(v, "vae_stage_records");
        size_t nr = json_array_size(recs);
        if (nr && num_of(v, "vae_median_s", &got)) {
            double *y = kiln_calloc(nr, sizeof *y);
            if (!y) return;
            for (size_t r = 0; r < nr; r++) num_of(json_array_get(recs, r), "vae_s", &y[r]);
            if (!close_to(got, kiln_median(y, nr), 1e-9, 1e-9))
                kiln_strlist_add(p, "/results/%zu/vae_median_s: %.10g, but the records' median is %.10g", i, got,
                                 kiln_median(y, nr));
            kiln_free(y);
        }
    }
}

void kiln_report_check_consistency(const json_t *root, kiln_report_kind kind, kiln_strlist *problems) {
    switch (kind) {
    case KILN_REPORT_SECONDS_PER_IMAGE: check_seconds_per_image(root, problems); break;
    case KILN_REPORT_ABBA: check_abba(root, problems); break;
    case KILN_REPORT_VARIANTS:
        check_variants(root, problems);
        kiln_report_check_variants_kiln(root, problems);
        break;
    case KILN_REPORT_SERVE_LOAD: kiln_report_check_serve_load(root, problems); break;
    }
}

/* run.c - the seconds-per-image harness (see run.h). Order of a run: load inputs (fail fast on any bad file),
 * open telemetry (absent is fine), preflight (a failed check is a refusal), then per graph: warm-up submits,
 * telemetry sampler on, timed submits rotating through the cells, sampler off, reductions and references. */
#include "bench/run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "bench/digest.h"
#include "bench/manifest.h"
#include "bench/nvml.h"
#include "bench/report.h"
#include "bench/stats.h"
#include "bench/telemetry.h"
#include "bench/workflow.h"

kiln_run_cfg kiln_run_cfg_default(void) {
    return (kiln_run_cfg){.arm = "kiln-bench", .warmup = 1, .timed = 4, .seed_base = 910100,
                          .sample_period_s = 0.5, .idle_samples = 6, .gate = kiln_gate_cfg_default(),
                          .ups_stop_pct = 80.0};
}

static void iso_now(char *buf, size_t cap) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void iso_of(double unix_s, char *buf, size_t cap) {
    time_t t = (time_t)unix_s;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static json_t *num_or_null(double d) { return isnan(d) ? json_null() : json_real(d); }

/* A graph argument "FILE@cell,cell": the file and (optionally) its cells. */
typedef struct graph_arg {
    char path[1024];
    char **cells;
    size_t n_cells;
} graph_arg;

static void graph_arg_free(graph_arg *g) {
    for (size_t i = 0; i < g->n_cells; i++) kiln_free(g->cells[i]);
    kiln_free(g->cells);
}

static kiln_status parse_graph_arg(const char *arg, const kiln_manifest *m, graph_arg *g, kiln_err *err) {
    memset(g, 0, sizeof *g);
    const char *at = strchr(arg, '@');
    size_t plen = at ? (size_t)(at - arg) : strlen(arg);
    if (plen == 0 || plen >= sizeof g->path) return KILN_FAIL(err, KILN_E_INVALID, "graph argument \"%s\"", arg);
    memcpy(g->path, arg, plen);
    size_t cap = at ? 1 : m->n_cells;
    for (const char *p = at; p && *p; p++) cap += *p == ',';
    g->cells = kiln_calloc(cap, sizeof *g->cells);
    if (!g->cells) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
    if (!at) {
        for (size_t i = 0; i < m->n_cells; i++)
            if (!(g->cells[g->n_cells++] = kiln_strdup(m->cells[i].id))) return KILN_FAIL(err, KILN_E_NOMEM, "oom");
        return KILN_OK;
    }
    const char *p = at + 1;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char *id = kiln_strndup(p, len);
        if (!id) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
        g->cells[g->n_cells++] = id;
        if (!kiln_manifest_find(m, id))
            return KILN_FAIL(err, KILN_E_NOT_FOUND, "graph %s: cell \"%s\" is not in the prompt bank", g->path, id);
        p += len + (e ? 1 : 0);
    }
    if (g->n_cells == 0) return KILN_FAIL(err, KILN_E_INVALID, "graph %s: an empty cell list", g->path);
    return KILN_OK;
}

/* ---- telemetry context ---- */
typedef struct telem {
    kiln_nvml *nv;
    kiln_nvml_dev dev;
    bool ok;
    char why[512];
} telem;

static void telem_open(const kiln_run_cfg *cfg, telem *t) {
    memset(t, 0, sizeof *t);
    kiln_err err = {0};
    if (kiln_nvml_open(cfg->nvml_lib, &t->nv, &err) != KILN_OK) {
        snprintf(t->why, sizeof t->why, "%s", err.msg);
        return;
    }
    unsigned count = 0;
    if (kiln_nvml_count(t->nv, &count, &err) != KILN_OK || (unsigned)cfg->gpu_index >= count ||
        kiln_nvml_device(t->nv, (unsigned)cfg->gpu_index, &t->dev, &err) != KILN_OK) {
        if (!err.msg[0]) snprintf(err.msg, sizeof err.msg, "no GPU %d (%u found)", cfg->gpu_index, count);
        snprintf(t->why, sizeof t->why, "nvml: %s", err.msg);
        kiln_nvml_close(t->nv);
        t->nv = NULL;
        return;
    }
    t->ok = true;
}

static json_t *trace_unavailable(const telem *t) {
    json_t *tr = kiln_telemetry_reduce(NULL, 0, NULL, NULL);
    json_object_set_new(tr, "available", json_false());
    json_object_set_new(tr, "why", json_string(t->why));
    return tr;
}

/* ---- preflight ---- */
static void refuse(json_t *report, const char *check, const char *verdict) {
    json_array_append_new(json_object_get(report, "refusals"), json_pack("{s:s,s:s}", "check", check, "verdict", verdict));
}

static void add_check(json_t *checks, const char *name, const kiln_verdict *v) {
    json_array_append_new(checks, json_pack("{s:s,s:b,s:s}", "name", name, "passed", v->passed, "verdict", v->text));
}

static json_t *preflight(const kiln_run_cfg *cfg, telem *t, json_t *report, double *cap_w) {
    char at[32];
    iso_now(at, sizeof at);
    json_t *checks = json_array();
    json_t *ca = json_pack("{s:s}", "at", at);
    kiln_verdict v;
    /* The competing server's unit, when named. */
    json_t *service = json_null();
    if (cfg->service_unit) {
        service = kiln_service_check(cfg->service_unit, cfg->service_is_target, &v);
        json_object_set_new(service, "read_at", json_string(at));
        add_check(checks, "service", &v);
        if (!v.passed) refuse(report, "service", v.text);
    }
    /* The target's own server process (its unit's MainPID) is disclosed, not unexpected. */
    long main_pid = 0;
    const char *mp = json_string_value(json_object_get(service, "MainPID"));
    if (cfg->service_is_target && mp) main_pid = strtol(mp, NULL, 10);
    json_object_set_new(ca, "service", service);
    json_object_set_new(ca, "service_main_pid", main_pid > 0 ? json_integer(main_pid) : json_null());
    unsigned disclosed[257];
    size_t nd = 0;
    for (size_t i = 0; i < cfg->n_disclosed && nd < 256; i++) disclosed[nd++] = cfg->disclosed_pids[i];
    if (main_pid > 0) disclosed[nd++] = (unsigned)main_pid;
    /* GPU processes. */
    kiln_gpu_process procs[256];
    size_t np = 0;
    kiln_err err = {0};
    if (t->ok && kiln_nvml_processes(&t->dev, procs, 256, &np, &err) != KILN_OK) np = 0;
    json_t *pc = kiln_processes_check(procs, np, disclosed, nd, &v);
    if (!t->ok) snprintf(v.text, sizeof v.text, "no GPU telemetry: GPU processes not listed (%s)", t->why);
    add_check(checks, "gpu_processes", &v);
    if (!v.passed) refuse(report, "gpu_processes", v.text);
    json_object_update(ca, pc);
    json_decref(pc);
    /* Contention gate. */
    kiln_gate_cfg gc = cfg->gate;
    if (t->ok && !gc.history) {
        gc.history = kiln_nvml_util_history;
        gc.history_ctx = &t->dev;
    }
    json_t *gate = kiln_gate_run(t->ok ? kiln_nvml_sample : NULL, t->ok ? &t->dev : NULL, &gc, &v);
    json_object_set_new(ca, "contention_gate", gate);
    add_check(checks, "contention_gate", &v);
    if (t->ok && !v.passed) refuse(report, "contention_gate", v.text);
    char vt[600];
    snprintf(vt, sizeof vt, "%s", t->ok ? v.text : "no GPU telemetry: availability not certified");
    json_object_set_new(ca, "verdict", json_string(vt));
    /* Power cap. */
    json_t *cap = kiln_cap_new();
    iso_now(at, sizeof at);
    json_object_set_new(cap, "at", json_string(at));
    if (t->ok) {
        kiln_power_limits lim;
        kiln_nvml_limits(&t->dev, &lim);
        kiln_cap_add_card(cap, t->dev.uuid[0] ? t->dev.uuid : "gpu0", &lim);
    } else {
        json_object_set_new(cap, "agree", json_false());
        json_object_set_new(cap, "why", json_string("no GPU telemetry: no cap read"));
    }
    *cap_w = kiln_cap_watts(cap);
    /* UPS. */
    double ups = kiln_ups_check(cfg->ups, cfg->ups_stop_pct, &v);
    if (cfg->ups) {
        add_check(checks, "ups", &v);
        if (!v.passed) refuse(report, "ups", v.text);
    }
    /* Idle baseline. */
    json_t *idle = json_object();
    if (t->ok && cfg->idle_samples > 0) {
        kiln_tsample *s;
        size_t n = kiln_sample_window(kiln_nvml_sample, &t->dev, (size_t)cfg->idle_samples, 0.5, &s);
        json_object_set_new(idle, t->dev.uuid[0] ? t->dev.uuid : "gpu0", kiln_telemetry_reduce(s, n, NULL, NULL));
        kiln_free(s);
    }
    json_t *pf = json_pack("{s:o,s:o,s:o,s:f,s:s,s:o,s:o}", "card_available", ca, "cap", cap,
                           "ups_load_pct_at_start", num_or_null(ups), "ups_stop_pct", cfg->ups_stop_pct,
                           "power_posture", "fixed", "idle_baseline", idle, "checks", checks);
    return pf;
}

/* ---- one graph ---- */

static json_t *submit_json(const kiln_submit_result *r, const char *tag, int index, const kiln_cell *cell,
                           long long seed, int batch) {
    char started[32];
    iso_of(r->t0, started, sizeof started);
    json_t *imgs = json_array(), *saved = json_array();
    for (int i = 0; i < r->n_images; i++) {
        const kiln_bench_image *im = &r->images[i];
        json_t *o = json_pack("{s:s,s:s,s:s,s:I}", "filename", im->filename, "subfolder", im->subfolder, "type",
                              im->type, "bytes", (json_int_t)im->bytes);
        if (im->pixel_sha256[0]) {
            json_object_set_new(o, "pixel_sha256", json_string(im->pixel_sha256));
            json_object_set_new(o, "width", json_integer(im->width));
            json_object_set_new(o, "height", json_integer(im->height));
        }
        json_array_append_new(imgs, o);
        if (im->saved[0]) json_array_append_new(saved, json_string(im->saved));
    }
    double ref = NAN;
    for (size_t k = 0; k < cell->n_refs && isnan(ref); k++)
        if (!cell->refs[k].cold) ref = cell->refs[k].seconds;
    if (isnan(ref) && cell->n_refs) ref = cell->refs[0].seconds;
    json_t *s = json_pack("{s:s,s:f,s:f,s:i,s:f,s:o,s:s,s:s,s:i,s:s,s:o,s:I,s:i,s:o,s:f,s:f,s:o}", "prompt_id",
                          r->prompt_id, "exec_seconds", r->exec_seconds, "wall_seconds", r->wall_seconds, "n_images",
                          r->n_images, "exec_seconds_per_image", r->exec_seconds / (r->n_images ? r->n_images : 1),
                          "images", imgs, "started_at", started, "tag", tag, "index", index, "cell", cell->id,
                          "cell_workflow", cell->workflow ? json_string(cell->workflow) : json_null(), "seed",
                          (json_int_t)seed, "batch_size", batch, "cell_reference_seconds", num_or_null(ref), "t0",
                          r->t0, "t1", r->t1, "saved", saved);
    if (s && r->stages) json_object_set(s, "stages", r->stages);
    return s;
}

/* Submits w with the cell's prompt and the seed; its outputs are prefixed kiln-bench/TAG-INDEX. */
static kiln_status submit_one(kiln_target *target, const kiln_workflow *w, const kiln_cell *cell, long long seed,
                              const char *tag, int index, kiln_submit_result *r, kiln_err *err) {
    char prefix[300];
    snprintf(prefix, sizeof prefix, "kiln-bench/%s-%d", tag, index);
    json_t *g = kiln_workflow_instantiate(w, cell->prompt, seed, prefix);
    kiln_status st = g ? kiln_target_submit(target, g, r, err) : KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
    json_decref(g);
    return st;
}

static kiln_status run_graph(const kiln_run_cfg *cfg, kiln_target *target, const kiln_workflow *w,
                             const graph_arg *ga, const kiln_manifest *m, telem *t, double cap_w, json_t *card,
                             kiln_err *err) {
    int batch = w->batch_size;
    char bkey[16];
    snprintf(bkey, sizeof bkey, "%d", batch);
    json_t *b = json_pack("{s:[],s:[]}", "warmup", "timed");
    json_object_set_new(json_object_get(card, "batches"), bkey, b);
    char tag[256];
    kiln_status st = KILN_OK;
    size_t ci = 0;
    /* Warm-up: reported, excluded from reductions; the first one is the cold submit. */
    snprintf(tag, sizeof tag, "%s-%s-b%d-warm", cfg->arm, w->name, batch);
    for (int i = 0; i < cfg->warmup && st == KILN_OK; i++, ci++) {
        const kiln_cell *cell = kiln_manifest_find(m, ga->cells[ci % ga->n_cells]);
        long long seed = cfg->seed_base + i;
        kiln_submit_result r = {0};
        st = submit_one(target, w, cell, seed, tag, i, &r, err);
        if (st == KILN_OK) json_array_append_new(json_object_get(b, "warmup"), submit_json(&r, tag, i, cell, seed, batch));
        kiln_submit_result_clear(&r);
    }
    json_t *w0 = json_object_get(json_array_get(json_object_get(b, "warmup"), 0), "exec_seconds");
    json_object_set_new(b, "cold_first_submit_exec_seconds", w0 ? json_incref(w0) : json_null());
    json_object_set_new(b, "cold_measured", json_boolean(w0 != NULL));
    /* On a failed warm-up the timed loop does not run, but the batch is still completed (empty reductions), so
     * the partial report stays valid and says what happened. */
    /* Timed window: counters and the sampler bracket exactly the timed submits. */
    kiln_tcounters c0, c1;
    kiln_sampler *sampler = NULL;
    if (t->ok) {
        kiln_nvml_counters(&t->dev, &c0);
        sampler = kiln_sampler_start(kiln_nvml_sample, &t->dev, cfg->sample_period_s, err);
    }
    snprintf(tag, sizeof tag, "%s-%s-b%d-timed", cfg->arm, w->name, batch);
    double *per_submit = kiln_calloc((size_t)cfg->timed, sizeof *per_submit);
    double *per_image = kiln_calloc((size_t)cfg->timed, sizeof *per_image);
    if ((!per_submit || !per_image) && st == KILN_OK) st = KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
    int done = 0, images = 0;
    double first_t0 = NAN, last_t1 = NAN;
    ci = 0; /* timed submits rotate through the cells from the first, as warm-up did */
    for (int i = 0; i < cfg->timed && st == KILN_OK; i++, ci++) {
        const kiln_cell *cell = kiln_manifest_find(m, ga->cells[ci % ga->n_cells]);
        long long seed = cfg->seed_base + 1000 + (long long)i * batch;
        kiln_submit_result r = {0};
        st = submit_one(target, w, cell, seed, tag, i, &r, err);
        if (st == KILN_OK) {
            json_array_append_new(json_object_get(b, "timed"), submit_json(&r, tag, i, cell, seed, batch));
            per_submit[done] = r.exec_seconds;
            per_image[done] = r.exec_seconds / (r.n_images ? r.n_images : 1);
            images += r.n_images;
            if (done == 0) first_t0 = r.t0;
            last_t1 = r.t1;
            done++;
        }
        kiln_submit_result_clear(&r);
    }
    kiln_tsample *samples = NULL;
    size_t ns = kiln_sampler_stop(sampler, &samples);
    json_t *trace;
    if (t->ok) {
        kiln_nvml_counters(&t->dev, &c1);
        trace = kiln_telemetry_reduce(samples, ns, &c0, &c1);
        json_object_set_new(trace, "available", json_true());
        json_object_set_new(trace, "series", kiln_telemetry_series(samples, ns, c0.t));
    } else {
        trace = trace_unavailable(t);
    }
    kiln_free(samples);
    json_object_set_new(b, "trace", trace);
    /* Outliers are flagged and kept. */
    if (done > 0) {
        bool *flags = kiln_calloc((size_t)done, sizeof *flags);
        if (flags && kiln_flag_outliers(per_image, (size_t)done, 3.5, flags))
            for (int i = 0; i < done; i++)
                json_object_set_new(json_array_get(json_object_get(b, "timed"), (size_t)i), "outlier",
                                    json_boolean(flags[i]));
        kiln_free(flags);
    }
    double wall = done ? last_t1 - first_t0 : NAN;
    json_t *red = json_pack("{s:i,s:i,s:o,s:o,s:o,s:o}", "submits", done, "images", images,
                            "exec_seconds_per_submit", kiln_reduction_json(per_submit, (size_t)done),
                            "exec_seconds_per_image", kiln_reduction_json(per_image, (size_t)done),
                            "wall_seconds_for_the_run", num_or_null(wall), "images_per_minute_wall",
                            num_or_null(done && wall > 0 ? images * 60.0 / wall : NAN));
    double lo, hi, ach;
    kiln_median_ci(per_image, (size_t)done, 0.95, &lo, &hi, &ach);
    json_object_set_new(red, "exec_seconds_per_image_ci",
                        json_pack("{s:o,s:o,s:f,s:s}", "lo", num_or_null(lo), "hi", num_or_null(hi), "confidence", ach,
                                  "method", "order statistics of the median (binomial), distribution-free"));
    json_object_set_new(b, "reduced", red);
    /* References: only at the same cap, graph digest and batch size. */
    json_t *ratios = json_object(), *withheld = json_object();
    kiln_match_references(m, (const char *const *)ga->cells, ga->n_cells, cap_w, w->graph_digest, batch,
                          kiln_median(per_image, (size_t)done), ratios, withheld);
    json_object_set_new(b, "ratio_vs_references", ratios);
    json_object_set_new(b, "references_withheld", withheld);
    kiln_free(per_submit);
    kiln_free(per_image);
    return st;
}

static json_t *graph_reference(const kiln_manifest *m, const graph_arg *ga) {
    /* The same-graph reference of seed 000: warm references of this graph's cells, cold ones listed apart. */
    double *warm = kiln_calloc(ga->n_cells * 8 + 1, sizeof *warm);
    json_t *cold = json_array();
    size_t nw = 0;
    const char *wf = NULL;
    for (size_t i = 0; i < ga->n_cells && warm; i++) {
        const kiln_cell *c = kiln_manifest_find(m, ga->cells[i]);
        if (c && c->workflow && !wf) wf = c->workflow;
        for (size_t k = 0; c && k < c->n_refs; k++) {
            if (c->refs[k].cold) json_array_append_new(cold, json_real(c->refs[k].seconds));
            else if (nw < ga->n_cells * 8) warm[nw++] = c->refs[k].seconds;
        }
    }
    json_t *ref;
    if (nw == 0) {
        ref = json_pack("{s:n,s:s}", "same_graph_reference", "why", "the prompt bank holds no warm reference for these cells");
        json_decref(cold);
    } else {
        kiln_reduction r = kiln_reduce(warm, nw);
        ref = json_pack("{s:I,s:f,s:f,s:f,s:o,s:o}", "n", (json_int_t)r.n, "median", r.median, "min", r.min, "max",
                        r.max, "cold_excluded", cold, "same_graph_reference", wf ? json_string(wf) : json_null());
    }
    kiln_free(warm);
    return ref;
}

kiln_status kiln_bench_run(const kiln_run_cfg *cfg, kiln_target *target, json_t **report, kiln_err *err) {
    *report = NULL;
    if (cfg->timed < 1 || cfg->warmup < 0 || cfg->n_graphs == 0 || !cfg->manifest || !cfg->arm)
        return KILN_FAIL(err, KILN_E_INVALID, "bench run: graphs, a prompt bank, an arm name and >= 1 timed submit");
    double t_start = kiln_clock_s();
    kiln_manifest *m;
    KILN_TRY(kiln_manifest_load(cfg->manifest, &m, err));
    char bank_digest[65] = "";
    kiln_sha256_file(cfg->manifest, bank_digest, NULL);
    kiln_status st = KILN_OK;
    graph_arg *ga = kiln_calloc(cfg->n_graphs, sizeof *ga);
    kiln_workflow *wf = kiln_calloc(cfg->n_graphs, sizeof *wf);
    if (!ga || !wf) st = KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
    for (size_t i = 0; i < cfg->n_graphs && st == KILN_OK; i++) {
        st = parse_graph_arg(cfg->graphs[i], m, &ga[i], err);
        if (st == KILN_OK) st = kiln_workflow_load(ga[i].path, &wf[i], err);
    }
    /* Model digests first: a missing model file is an input error, found before anything is timed. */
    json_t *models = json_object();
    if (st == KILN_OK && cfg->n_models) {
        kiln_digest_cache *dc = kiln_digest_cache_open(cfg->digest_cache, err);
        for (size_t i = 0; i < cfg->n_models && st == KILN_OK && dc; i++) {
            char hex[65];
            bool hit = false;
            st = kiln_digest_cache_file(dc, cfg->models[i], hex, &hit, err);
            if (st == KILN_OK)
                json_object_set_new(models, cfg->models[i], json_pack("{s:s,s:b}", "sha256", hex, "from_cache", hit));
        }
        kiln_digest_cache_close(dc);
    } else if (st == KILN_OK) {
        json_object_set_new(models, "unmeasured", json_string("no model files given (--model FILE)"));
    }
    if (st != KILN_OK) {
        json_decref(models);
        goto out;
    }
    telem t;
    telem_open(cfg, &t);
    char at[32];
    iso_now(at, sizeof at);
    char question[512];
    snprintf(question, sizeof question, "%s",
             cfg->question ? cfg->question : "seconds per image on one device, per graph, through the target");
    json_t *r = json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:s,s:s},s:{s:b,s:o,s:o,s:o,s:f},s:s,s:s,s:s,s:i,s:i,s:[],s:{}}",
                          "schema", KILN_REPORT_SCHEMA, "kind", "seconds-per-image", "tool", "name", "kiln bench",
                          "version", KILN_VERSION, "target", "kind", target->kind, "url", target->describe,
                          "telemetry", "available", t.ok, "why", t.ok ? json_null() : json_string(t.why), "library",
                          t.nv ? json_string(kiln_nvml_library(t.nv)) : json_null(), "driver",
                          t.nv ? json_string(kiln_nvml_driver(t.nv)) : json_null(), "period_s", cfg->sample_period_s,
                          "question", question, "prompt_bank", cfg->manifest, "prompt_bank_digest", bank_digest,
                          "warmup_images", 0, "timed_images", 0, "refusals", "graphs");
    double cap_w = NAN;
    json_object_set_new(r, "preflight", preflight(cfg, &t, r, &cap_w));
    kiln_verdict v;
    json_t *cn = kiln_cap_name_check(cfg->arm, cap_w, &v);
    iso_now(at, sizeof at);
    json_object_set_new(cn, "at", json_string(at));
    json_object_set_new(r, "cap_name_check", cn);
    json_array_append_new(json_object_get(json_object_get(r, "preflight"), "checks"),
                          json_pack("{s:s,s:b,s:s}", "name", "cap_name", "passed", v.passed, "verdict", v.text));
    if (!v.passed) refuse(r, "cap_name", v.text);
    bool refused = json_array_size(json_object_get(r, "refusals")) > 0;
    int warm_images = 0, timed_images = 0;
    json_t *stats = kiln_target_system_stats(target);
    for (size_t i = 0; i < cfg->n_graphs && st == KILN_OK && (!refused || cfg->force); i++) {
        json_t *cells = json_array();
        for (size_t c = 0; c < ga[i].n_cells; c++) json_array_append_new(cells, json_string(ga[i].cells[c]));
        json_t *card = json_pack("{s:i,s:o,s:o,s:o,s:o,s:{}}", "index", t.ok ? cfg->gpu_index : 0, "uuid",
                                 t.ok ? json_string(t.dev.uuid) : json_null(), "board",
                                 t.ok ? json_string(t.dev.name) : json_string("no GPU telemetry"), "cap_w",
                                 num_or_null(cap_w), "system_stats", stats ? json_incref(stats) : json_array(), "batches");
        json_t *g = json_pack("{s:s,s:s,s:s,s:{s:s,s:s},s:O,s:o,s:o,s:{s:o},s:b}", "file", wf[i].path, "graph_digest",
                              wf[i].graph_digest, "file_digest", wf[i].file_digest, "receipt", "graph",
                              wf[i].graph_digest, "file", wf[i].file_digest, "knobs", wf[i].knobs, "prompt_cells",
                              cells, "reference", graph_reference(m, &ga[i]), "cards", t.ok ? "0" : "cpu", card,
                              "partial", 0);
        const kiln_workflow *all[64];
        size_t nall = 0;
        for (size_t k = 0; k < cfg->n_graphs && nall < 64; k++) all[nall++] = &wf[k];
        kiln_workflow_receipts(&wf[i], all, nall, json_object_get(g, "receipt"));
        json_object_set_new(json_object_get(r, "graphs"), wf[i].name, g);
        /* The harness does not start the target process (seed 000's did): its start time is not ours to know. */
        json_object_set_new(card, "process_start_seconds_wall", json_null());
        if (t.ok && t.dev.bus_id[0]) json_object_set_new(card, "bus_id", json_string(t.dev.bus_id));
        const char *colon = strrchr(target->describe, ':');
        if (!strcmp(target->kind, "comfyui-http") && colon && colon[1] >= '0' && colon[1] <= '9')
            json_object_set_new(card, "port", json_integer(atoi(colon + 1)));
        st = run_graph(cfg, target, &wf[i], &ga[i], m, &t, cap_w, card, err);
        if (st != KILN_OK) {
            json_object_set_new(g, "partial", json_true());
            kiln_err_prefix(err, "graph %s", wf[i].name);
        }
        warm_images += cfg->warmup * wf[i].batch_size;
        timed_images += cfg->timed * wf[i].batch_size;
    }
    json_decref(stats);
    /* Reference seats at this cap, over all graphs: usable where some batch matched, else withheld. */
    json_t *seats = json_pack("{s:[],s:{}}", "usable", "withheld");
    const char *gk, *ck, *bk, *sk;
    json_t *gv, *cv, *bv, *sv;
    json_object_foreach(json_object_get(r, "graphs"), gk, gv) {
        json_object_foreach(json_object_get(gv, "cards"), ck, cv) {
            json_object_foreach(json_object_get(cv, "batches"), bk, bv) {
                json_object_foreach(json_object_get(bv, "ratio_vs_references"), sk, sv) {
                    bool listed = false;
                    json_t *u = json_object_get(seats, "usable");
                    for (size_t k = 0; k < json_array_size(u) && !listed; k++)
                        listed = !strcmp(json_string_value(json_array_get(u, k)), sk);
                    if (!listed) json_array_append_new(u, json_string(sk));
                    json_object_del(json_object_get(seats, "withheld"), sk);
                }
                json_object_foreach(json_object_get(bv, "references_withheld"), sk, sv) {
                    if (!json_object_get(bv, "ratio_vs_references") ||
                        !json_object_get(json_object_get(bv, "ratio_vs_references"), sk))
                        json_object_set(json_object_get(seats, "withheld"), sk, sv);
                }
            }
        }
    }
    json_object_set_new(r, "reference_seats_at_this_cap", seats);
    json_object_set_new(r, "warmup_images", json_integer(warm_images));
    json_object_set_new(r, "timed_images", json_integer(timed_images));
    json_object_set_new(r, "model_digests", models);
    json_object_set_new(r, "arm", json_string(cfg->arm));
    iso_now(at, sizeof at);
    json_object_set_new(r, "at", json_string(at));
    json_object_set_new(r, "run_seconds_wall", json_real(kiln_clock_s() - t_start));
    kiln_nvml_close(t.nv);
    *report = r;
out:
    for (size_t i = 0; ga && wf && i < cfg->n_graphs; i++) {
        graph_arg_free(&ga[i]);
        kiln_workflow_free(&wf[i]);
    }
    kiln_free(ga);
    kiln_free(wf);
    kiln_manifest_free(m);
    return st;
}

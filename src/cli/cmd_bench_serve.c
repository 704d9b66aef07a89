/* cmd_bench_serve.c - `kiln bench serve`: the options of the load generator (src/bench/serve_load.h). One table
 * gives both the parsing and the help text, so the two cannot drift apart. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "bench/plot.h"
#include "bench/serve_load.h"
#include "cli/commands.h"

typedef struct serve_args {
    kiln_serve_cfg cfg;
    const char *out, *plot;
    long long seed;
} serve_args;

typedef enum okind { O_STR, O_INT, O_NUM, O_SEED, O_API, O_ARRIVAL, O_RATES, O_CONC, O_SIZES, O_STEPS } okind;

typedef struct opt {
    const char *name, *arg, *help;
    okind kind;
    size_t off;      /* into serve_args (O_STR, O_INT, O_NUM) */
    double lo, hi;   /* O_INT, O_NUM bounds */
} opt;

#define OFF(f) offsetof(serve_args, f)
static const opt opts[] = {
    {"--url", "URL", "the server: http://host:port", O_STR, OFF(cfg.url), 0, 0},
    {"--api", "comfy|openai", "POST /prompt + /history (ComfyUI API), or POST /v1/images/generations (default comfy)", O_API, 0, 0, 0},
    {"--graph", "FILE", "comfy: the template graph (size, steps, prompt and seed patched per request)", O_STR, OFF(cfg.graph), 0, 0},
    {"--model", "NAME", "openai: the \"model\" sent (default: none)", O_STR, OFF(cfg.model), 0, 0},
    {"--requests", "N", "requests per run (default 32)", O_INT, OFF(cfg.requests), 1, KILN_SERVE_MAX_REQUESTS},
    {"--rate", "R[,R...]", "open loop: requests/s, one run per rate", O_RATES, 0, 0, 0},
    {"--arrival", "poisson|constant", "open-loop gaps: exponential (seeded) or 1/rate (default poisson)", O_ARRIVAL, 0, 0, 0},
    {"--concurrency", "C[,C...]", "closed loop instead: C clients, each sending when its last answer came", O_CONC, 0, 0, 0},
    {"--sizes", "WxH[,WxH...]", "the size mix (default: the graph's; openai 1024x1024)", O_SIZES, 0, 0, 0},
    {"--steps", "N[,N...]", "the steps mix (default: the graph's; openai: not sent)", O_STEPS, 0, 0, 0},
    {"--prompts", "FILE", "prompts, one a line, drawn per request (default: one built-in prompt)", O_STR, OFF(cfg.prompts_file), 0, 0},
    {"--seed", "N", "the mix, the Poisson gaps and the image seeds (default 1)", O_SEED, 0, 0, 0},
    {"--warmup", "N", "unloaded requests, one at a time, before the runs: the SLO baseline (default 3)", O_INT, OFF(cfg.warmup), 1, 1000},
    {"--slo-scale", "X", "deadline = X times the request's unloaded time (default 3, as vLLM-Omni)", O_NUM, OFF(cfg.slo_scale), 1e-6, 1e6},
    {"--timeout", "S", "one request (default 600)", O_NUM, OFF(cfg.timeout_s), 1e-3, 1e6},
    {"--max-in-flight", "N", "open loop: most requests in flight; a send held back shows as send lag (default 512)", O_INT, OFF(cfg.max_in_flight), 1, 65536},
    {"-o", "REPORT", "write the serve-load report here (default: stdout)", O_STR, OFF(out), 0, 0},
    {"--plot", "FILE.png", "also draw latency and queue wait by send time", O_STR, OFF(plot), 0, 0},
};

void kiln_bench_serve_usage(FILE *f) {
    fprintf(f, "       kiln bench serve --url URL (--rate R[,R...] | --concurrency C[,C...]) [options]\n");
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
        char head[64];
        snprintf(head, sizeof head, "%s %s", opts[i].name, opts[i].arg);
        fprintf(f, "         %-32s %s\n", head, opts[i].help);
    }
}

/* "a,b,c" -> up to KILN_SERVE_MAX_LIST items through one item parser. */
static bool parse_list(const char *v, size_t *n, bool (*item)(const char *s, size_t i, void *ctx), void *ctx) {
    char buf[1024];
    if (strlen(v) >= sizeof buf) return false;
    snprintf(buf, sizeof buf, "%s", v);
    *n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (*n == KILN_SERVE_MAX_LIST || !item(t, *n, ctx)) return false;
        (*n)++;
    }
    return *n > 0;
}

static bool whole(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi) return false;
    *out = v;
    return true;
}

static bool rate_item(const char *s, size_t i, void *ctx) {
    char *end;
    double v = strtod(s, &end);
    ((kiln_serve_cfg *)ctx)->rates[i] = v;
    return *s && !*end && v > 0 && v <= 1e6;
}
static bool conc_item(const char *s, size_t i, void *ctx) {
    long v;
    if (!whole(s, 1, 1024, &v)) return false;
    ((kiln_serve_cfg *)ctx)->concurrency[i] = (int)v;
    return true;
}
static bool size_item(const char *s, size_t i, void *ctx) {
    kiln_serve_cfg *c = ctx;
    int w, h, used = 0;
    if (sscanf(s, "%dx%d%n", &w, &h, &used) != 2 || s[used] || w < 16 || h < 16 || w > 16384 || h > 16384) return false;
    c->widths[i] = w;
    c->heights[i] = h;
    return true;
}
static bool steps_item(const char *s, size_t i, void *ctx) {
    long v;
    if (!whole(s, 1, 10000, &v)) return false;
    ((kiln_serve_cfg *)ctx)->steps[i] = (int)v;
    return true;
}

static bool apply(const opt *o, const char *v, serve_args *a, bool *have_rate, bool *have_conc) {
    char *base = (char *)a;
    long n;
    char *end;
    switch (o->kind) {
    case O_STR: *(const char **)(base + o->off) = v; return true;
    case O_INT:
        if (!whole(v, (long)o->lo, (long)o->hi, &n)) return false;
        *(int *)(base + o->off) = (int)n;
        return true;
    case O_NUM: {
        double d = strtod(v, &end);
        if (!*v || *end || !(d >= o->lo && d <= o->hi)) return false;
        *(double *)(base + o->off) = d;
        return true;
    }
    case O_SEED:
        if (!whole(v, 0, 1L << 48, &n)) return false;
        a->cfg.seed = (uint64_t)n;
        return true;
    case O_API:
        if (!strcmp(v, "comfy")) a->cfg.api = KILN_SERVE_API_COMFY;
        else if (!strcmp(v, "openai")) a->cfg.api = KILN_SERVE_API_OPENAI;
        else return false;
        return true;
    case O_ARRIVAL:
        if (*have_conc) return false;
        if (!strcmp(v, "poisson")) a->cfg.arrival = KILN_ARRIVAL_POISSON;
        else if (!strcmp(v, "constant")) a->cfg.arrival = KILN_ARRIVAL_CONSTANT;
        else return false;
        return true;
    case O_RATES: *have_rate = true; return !*have_conc && parse_list(v, &a->cfg.n_runs, rate_item, &a->cfg);
    case O_CONC:
        *have_conc = true;
        a->cfg.arrival = KILN_ARRIVAL_CONCURRENCY;
        return !*have_rate && parse_list(v, &a->cfg.n_runs, conc_item, &a->cfg);
    case O_SIZES: return parse_list(v, &a->cfg.n_sizes, size_item, &a->cfg);
    case O_STEPS: return parse_list(v, &a->cfg.n_steps, steps_item, &a->cfg);
    }
    return false;
}

int kiln_cmd_bench_serve(int argc, char **argv) {
    serve_args a = {.cfg = kiln_serve_cfg_default()};
    bool have_rate = false, have_conc = false;
    for (int i = 1; i < argc; i += 2) {
        const opt *o = NULL;
        for (size_t k = 0; k < sizeof opts / sizeof opts[0]; k++)
            if (!strcmp(argv[i], opts[k].name)) o = &opts[k];
        if (!o) {
            fprintf(stderr, "kiln bench serve: unknown option %s (kiln bench --help)\n", argv[i]);
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "kiln bench serve: %s needs a value (%s)\n", o->name, o->arg);
            return 2;
        }
        if (!apply(o, argv[i + 1], &a, &have_rate, &have_conc)) {
            fprintf(stderr, "kiln bench serve: bad value for %s: \"%s\" (%s%s)\n", o->name, argv[i + 1], o->arg,
                    (o->kind == O_RATES || o->kind == O_CONC || o->kind == O_ARRIVAL) && have_rate && have_conc
                        ? "; --rate/--arrival and --concurrency exclude each other"
                        : "");
            return 2;
        }
    }
    json_t *rep = NULL;
    kiln_err err = {0};
    kiln_status st = kiln_bench_serve(&a.cfg, &rep, &err);
    int rc = 0;
    if (rep) {
        int flags = JSON_INDENT(1) | JSON_REAL_PRECISION(17);
        if (a.out) {
            /* write to a temporary name, then rename: a reader never sees half a report */
            char tmp[4200];
            snprintf(tmp, sizeof tmp, "%s.tmp", a.out);
            if (json_dump_file(rep, tmp, flags) != 0 || rename(tmp, a.out) != 0) {
                fprintf(stderr, "kiln bench serve: cannot write %s\n", a.out);
                remove(tmp);
                rc = 5;
            }
        } else if (json_dumpf(rep, stdout, flags) != 0 || putchar('\n') == EOF) {
            rc = 5;
        }
        if (a.plot && kiln_bench_plot_serve(rep, a.plot, &err) != KILN_OK) {
            fprintf(stderr, "kiln bench serve: %s\n", err.msg);
            rc = kiln_status_exit_code(err.code);
        }
        const json_t *run;
        size_t k;
        json_array_foreach(json_object_get(rep, "runs"), k, run) {
            const json_t *s = json_object_get(run, "summary"), *l = json_object_get(s, "latency_s");
            fprintf(stderr, "kiln bench serve: %s: %lld ok, %lld errors, %.3f req/s, p50 %.3f s, p99 %.3f s, SLO %.1f%%\n",
                    json_string_value(json_object_get(run, "label")),
                    (long long)json_integer_value(json_object_get(s, "completed")),
                    (long long)json_integer_value(json_object_get(s, "errors")),
                    json_number_value(json_object_get(s, "throughput_rps")), json_number_value(json_object_get(l, "p50")),
                    json_number_value(json_object_get(l, "p99")),
                    100 * json_number_value(json_object_get(json_object_get(s, "slo"), "attainment")));
        }
    }
    if (st != KILN_OK) {
        fprintf(stderr, "kiln bench serve: %s\n", err.msg);
        rc = kiln_status_exit_code(st);
    }
    json_decref(rep);
    return rc;
}

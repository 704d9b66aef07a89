/* cmd_bench_serve.c - `kiln bench serve`: the options of the load generator (src/bench/serve_load.h), as one
 * table (cli/options.h) that gives both the parsing and the help text. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "bench/plot.h"
#include "bench/serve_load.h"
#include "cli/commands.h"
#include "cli/options.h"

typedef struct serve_args {
    kiln_serve_cfg cfg;
    const char *out, *plot;
    bool have_rate, have_conc;
} serve_args;

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

/* The option callbacks (cli/options.h): ctx is the serve_args. */
static bool opt_api(void *ctx, const char *v, char *why, size_t cap) {
    serve_args *a = ctx;
    if (!strcmp(v, "comfy")) a->cfg.api = KILN_SERVE_API_COMFY;
    else if (!strcmp(v, "openai")) a->cfg.api = KILN_SERVE_API_OPENAI;
    else return snprintf(why, cap, "takes comfy or openai"), false;
    return true;
}
static bool opt_arrival(void *ctx, const char *v, char *why, size_t cap) {
    serve_args *a = ctx;
    if (a->have_conc) return snprintf(why, cap, "and --concurrency exclude each other"), false;
    if (!strcmp(v, "poisson")) a->cfg.arrival = KILN_ARRIVAL_POISSON;
    else if (!strcmp(v, "constant")) a->cfg.arrival = KILN_ARRIVAL_CONSTANT;
    else return snprintf(why, cap, "takes poisson or constant"), false;
    return true;
}
static bool opt_rates(void *ctx, const char *v, char *why, size_t cap) {
    serve_args *a = ctx;
    a->have_rate = true;
    if (a->have_conc) return snprintf(why, cap, "and --concurrency exclude each other"), false;
    if (!parse_list(v, &a->cfg.n_runs, rate_item, &a->cfg))
        return snprintf(why, cap, "needs up to %d rates in (0, 1e6] requests/s", KILN_SERVE_MAX_LIST), false;
    return true;
}
static bool opt_conc(void *ctx, const char *v, char *why, size_t cap) {
    serve_args *a = ctx;
    a->have_conc = true;
    a->cfg.arrival = KILN_ARRIVAL_CONCURRENCY;
    if (a->have_rate) return snprintf(why, cap, "and --rate/--arrival exclude each other"), false;
    if (!parse_list(v, &a->cfg.n_runs, conc_item, &a->cfg))
        return snprintf(why, cap, "needs up to %d client counts in 1..1024", KILN_SERVE_MAX_LIST), false;
    return true;
}
static bool opt_sizes(void *ctx, const char *v, char *why, size_t cap) {
    serve_args *a = ctx;
    if (parse_list(v, &a->cfg.n_sizes, size_item, &a->cfg)) return true;
    return snprintf(why, cap, "needs up to %d sizes WxH, sides 16..16384", KILN_SERVE_MAX_LIST), false;
}
static bool opt_steps(void *ctx, const char *v, char *why, size_t cap) {
    serve_args *a = ctx;
    if (parse_list(v, &a->cfg.n_steps, steps_item, &a->cfg)) return true;
    return snprintf(why, cap, "needs up to %d step counts in 1..10000", KILN_SERVE_MAX_LIST), false;
}

/* One table: the parser and kiln bench --help's lines for `bench serve`. */
static size_t serve_opts(serve_args *a, kiln_opt *o) {
    const kiln_opt t[] = {
        KILN_OPT_STR("--url", NULL, "URL", "the server: http://host:port", &a->cfg.url),
        KILN_OPT_CALL("--api", NULL, "comfy|openai",
                      "POST /prompt + /history (ComfyUI API), or POST /v1/images/generations (default comfy)", opt_api, a),
        KILN_OPT_STR("--graph", NULL, "FILE", "comfy: the template graph (size, steps, prompt and seed patched per request)",
                     &a->cfg.graph),
        KILN_OPT_STR("--model", NULL, "NAME", "openai: the \"model\" sent (default: none)", &a->cfg.model),
        KILN_OPT_INT("--requests", NULL, "N", "requests per run (default 32)", &a->cfg.requests, 1,
                     KILN_SERVE_MAX_REQUESTS),
        KILN_OPT_CALL("--rate", NULL, "R[,R...]", "open loop: requests/s, one run per rate", opt_rates, a),
        KILN_OPT_CALL("--arrival", NULL, "poisson|constant",
                      "open-loop gaps: exponential (seeded) or 1/rate (default poisson)", opt_arrival, a),
        KILN_OPT_CALL("--concurrency", NULL, "C[,C...]",
                      "closed loop instead: C clients, each sending when its last answer came", opt_conc, a),
        KILN_OPT_CALL("--sizes", NULL, "WxH[,WxH...]", "the size mix (default: the graph's; openai 1024x1024)", opt_sizes,
                      a),
        KILN_OPT_CALL("--steps", NULL, "N[,N...]", "the steps mix (default: the graph's; openai: not sent)", opt_steps, a),
        KILN_OPT_STR("--prompts", NULL, "FILE", "prompts, one a line, drawn per request (default: one built-in prompt)",
                     &a->cfg.prompts_file),
        KILN_OPT_U64("--seed", NULL, "N", "the mix, the Poisson gaps and the image seeds (default 1)", &a->cfg.seed, 0,
                     (double)(1LL << 48)),
        KILN_OPT_INT("--warmup", NULL, "N", "unloaded requests, one at a time, before the runs: the SLO baseline (default 3)",
                     &a->cfg.warmup, 1, 1000),
        KILN_OPT_DOUBLE("--slo-scale", NULL, "X", "deadline = X times the request's unloaded time (default 3, as vLLM-Omni)",
                        &a->cfg.slo_scale, 1e-6, 1e6),
        KILN_OPT_DOUBLE("--timeout", NULL, "S", "one request (default 600)", &a->cfg.timeout_s, 1e-3, 1e6),
        KILN_OPT_INT("--max-in-flight", NULL, "N",
                     "open loop: most requests in flight; a send held back shows as send lag (default 512)",
                     &a->cfg.max_in_flight, 1, 65536),
        KILN_OPT_STR("--output", "-o", "REPORT", "write the serve-load report here (default: stdout)", &a->out),
        KILN_OPT_STR("--plot", NULL, "FILE.png", "also draw latency and queue wait by send time", &a->plot),
    };
    memcpy(o, t, sizeof t);
    return KILN_N(t);
}

#define SERVE_SYNOPSIS "       kiln bench serve --url URL (--rate R[,R...] | --concurrency C[,C...]) [options]\n"

void kiln_bench_serve_usage(FILE *f) {
    serve_args a = {.cfg = kiln_serve_cfg_default()};
    kiln_opt o[32];
    const kiln_opts spec = {.cmd = "kiln bench serve", .synopsis = SERVE_SYNOPSIS, .opts = o, .n = serve_opts(&a, o)};
    kiln_opts_usage(&spec, f);
}

int kiln_bench_write_report(const json_t *rep, const char *path, const char *cmd) {
    int flags = JSON_INDENT(1) | JSON_REAL_PRECISION(17);
    if (!path) return json_dumpf(rep, stdout, flags) != 0 || putchar('\n') == EOF ? 5 : 0;
    /* write to a temporary name, then rename: a reader never sees half a report */
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (json_dump_file(rep, tmp, flags) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "%s: cannot write %s\n", cmd, path);
        remove(tmp);
        return 5;
    }
    return 0;
}

int kiln_cmd_bench_serve(int argc, char **argv) {
    serve_args a = {.cfg = kiln_serve_cfg_default()};
    kiln_opt o[32];
    const kiln_opts spec = {.cmd = "kiln bench serve", .synopsis = SERVE_SYNOPSIS, .opts = o, .n = serve_opts(&a, o)};
    int prc = kiln_opts_parse(&spec, argc, argv, NULL, NULL);
    if (prc != KILN_OPTS_CONTINUE) return prc;
    json_t *rep = NULL;
    kiln_err err = {0};
    kiln_status st = kiln_bench_serve(&a.cfg, &rep, &err);
    int rc = 0;
    if (rep) {
        rc = kiln_bench_write_report(rep, a.out, "kiln bench serve");
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

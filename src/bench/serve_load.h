/* serve_load.h - `kiln bench serve`: an open-loop load generator against an image-generation server, and the
 * figures serving benchmarks report (SGLang's bench_serving, vLLM-Omni's diffusion_benchmark_serving).
 *
 * Targets (api):
 *   comfy   any ComfyUI-API server (kiln serve, ComfyUI): a template graph with the request's size, steps, prompt
 *           and seed patched in; POST /prompt, poll GET /history/{id}, GET /view (target_http.c)
 *   openai  any OpenAI-images server: POST /v1/images/generations {prompt, size, n: 1, response_format:
 *           b64_json, model and num_inference_steps when given}
 *
 * A run sends `requests` requests. Arrivals are open loop - request i leaves at its scheduled time whatever
 * the earlier ones are doing (one thread per request in flight) - with Poisson (exponential gaps, seeded) or
 * constant gaps at a rate; or closed loop at a fixed concurrency (C clients, each sending when its last answer
 * came). Each rate (or concurrency) given is one run, on the same request mix (sizes, steps, prompts drawn
 * with the seed), so runs differ only in load.
 *
 * Before the runs, `warmup` requests are sent one at a time (nothing else in flight): the unloaded latency.
 * SLO (vLLM-Omni's definition): unit = median over the warm-up requests of latency / (max(W x H / 256, 1) x
 * steps) - the time of one 16 x 16 patch-step; a request's deadline = unit x max(W x H / 256, 1) x steps x
 * slo_scale; it meets its SLO when it succeeded within its deadline; attainment = met / sent (a failed request
 * misses). The report (kind "serve-load", docs/bench-report.md) keeps every request, so every figure can be
 * recomputed (`kiln bench check` does).
 */
#ifndef KILN_BENCH_SERVE_LOAD_H
#define KILN_BENCH_SERVE_LOAD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef enum kiln_arrival { KILN_ARRIVAL_POISSON, KILN_ARRIVAL_CONSTANT, KILN_ARRIVAL_CONCURRENCY } kiln_arrival;
typedef enum kiln_serve_api { KILN_SERVE_API_COMFY, KILN_SERVE_API_OPENAI } kiln_serve_api;

#define KILN_SERVE_MAX_LIST 64      /* rates, concurrencies, sizes, steps */
#define KILN_SERVE_MAX_REQUESTS 100000
#define KILN_SERVE_MAX_PROMPTS 100000

typedef struct kiln_serve_cfg {
    const char *url;
    kiln_serve_api api;
    const char *graph;        /* comfy: the template graph file (required) */
    const char *model;        /* openai: "model" (NULL: not sent) */
    const char *prompts_file; /* one prompt a line (blank lines skipped); NULL: one built-in prompt */
    int requests;             /* per run */
    kiln_arrival arrival;
    double rates[KILN_SERVE_MAX_LIST]; /* requests/s, one run each (poisson, constant) */
    int concurrency[KILN_SERVE_MAX_LIST]; /* one run each (closed loop) */
    size_t n_runs;
    int widths[KILN_SERVE_MAX_LIST], heights[KILN_SERVE_MAX_LIST];
    size_t n_sizes;           /* 0: the graph's size (comfy), 1024x1024 (openai) */
    int steps[KILN_SERVE_MAX_LIST];
    size_t n_steps;           /* 0: the graph's steps (comfy), not sent (openai; counted as 1 for the SLO) */
    uint64_t seed;
    int warmup;               /* unloaded requests before the runs (>= 1: the SLO needs them) */
    double slo_scale;         /* deadline multiple of the unloaded time (vLLM-Omni's default: 3) */
    double timeout_s;         /* one request */
    int max_in_flight;        /* open loop: a cap on threads in flight (a late send is counted, never hidden) */
} kiln_serve_cfg;

kiln_serve_cfg kiln_serve_cfg_default(void);

/* Runs the warm-up and every run; *report is the serve-load report (also on a partial failure when it could be
 * built). KILN_E_INVALID on a bad configuration, KILN_E_IO when every warm-up request failed (no baseline). */
kiln_status kiln_bench_serve(const kiln_serve_cfg *cfg, json_t **report, kiln_err *err);

/* ---- internals shared by serve_load.c and serve_client.c ---- */

typedef struct kiln_serve_req {
    int width, height, steps; /* steps 0: not sent (openai) / the graph's (comfy: resolved before) */
    const char *prompt;
    long long seed;
    int index;
    const char *tag;          /* "warmup" or the run label, for output names */
} kiln_serve_req;

typedef struct kiln_serve_res {
    bool ok;
    char error[200];
    double exec_s; /* the server's own execution time, NaN when it reports none */
    char id[64];
} kiln_serve_res;

typedef struct kiln_serve_client kiln_serve_client;
/* graph: the parsed template (comfy) or NULL. One client per thread. */
kiln_status kiln_serve_client_open(const kiln_serve_cfg *cfg, const json_t *graph, kiln_serve_client **out,
                                   kiln_err *err);
void kiln_serve_client_send(kiln_serve_client *c, const kiln_serve_req *rq, kiln_serve_res *res);
void kiln_serve_client_close(kiln_serve_client *c);

/* The report's figures from its requests (serve_summary.c; `kiln bench check` recomputes with the same rules). */
double kiln_serve_patches(int width, int height, int steps); /* max(W H / 256, 1) x max(steps, 1) */
json_t *kiln_serve_summary(const json_t *requests, double unit_s, double slo_scale, double rate);

#endif

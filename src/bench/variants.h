/* variants.h - `kiln bench variants`: the seed-002 report (docs/bench-report.md "variants"): the same graph sent
 * to several servers (variants: e.g. a one-rank kiln serve and an `mpirun -np 2 kiln serve --sp 2`), in rounds
 * (cycles) that interleave the variants, each cycle warm-up requests (kept, not reduced) then `requests`
 * measured ones, one at a time. Per request the HTTP lifecycle: submit -> queued (POST /prompt answered) ->
 * running (the server's execution_start) -> done (execution_success) -> seen (the client's poll) -> saved and
 * validated (every image fetched and decoded); the engine's time and its Decoding stage (kiln serve's history
 * extension). Per cycle the medians; per variant the median of the cycles' HTTP medians, the VAE stage records
 * and their median - every figure recomputable from the requests the report keeps (`kiln bench check`).
 *
 *     kiln_variants_cfg c = kiln_variants_cfg_default();
 *     c.names[0] = "one-rank"; c.urls[0] = "http://127.0.0.1:8188"; c.n_variants = 1; c.graph_path = "g.json";
 *     json_t *report;
 *     kiln_bench_variants(&c, &report, &err);   // report: caller's (json_decref); NULL on failure
 */
#ifndef KILN_BENCH_VARIANTS_H
#define KILN_BENCH_VARIANTS_H

#include <jansson.h>

#include "base/status.h"

#define KILN_VARIANTS_MAX 8

typedef struct kiln_variants_cfg {
    const char *names[KILN_VARIANTS_MAX], *urls[KILN_VARIANTS_MAX];
    int n_variants;
    const char *graph_path;  /* a ComfyUI API-format graph */
    const char *case_name;   /* the cells' "case"; NULL: the graph file's name */
    const char *hardware;    /* the cells' "hardware"; NULL: omitted */
    const char *scope;       /* NULL: a sentence made from the configuration */
    int cycles;              /* rounds; each runs every variant once (default 2) */
    int requests;            /* measured requests per cycle (default 5, as seed 002) */
    int warmup;              /* warm-up requests per cycle (default 1) */
    double timeout_s;        /* one request (default 600) */
} kiln_variants_cfg;

kiln_variants_cfg kiln_variants_cfg_default(void);

/* Runs it. A request that fails is kept (ok false, its error) and makes its cell incomplete; a cycle with no
 * successful request ends the run (KILN_E_INVALID: no median to report). */
kiln_status kiln_bench_variants(const kiln_variants_cfg *cfg, json_t **report, kiln_err *err);

#endif

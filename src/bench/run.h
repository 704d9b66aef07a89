/* run.h - `kiln bench run`: preflight, then per graph warm-up submits and timed submits rotating through the
 * prompt cells with recorded seeds, a telemetry trace over the timed window, reductions, references; the result
 * is one seconds-per-image report (docs/bench-report.md) that `kiln bench check` accepts.
 *
 *     kiln_run_cfg cfg = kiln_run_cfg_default();
 *     cfg.arm = "r1-cpu"; cfg.graphs = paths; cfg.n_graphs = 3; cfg.manifest = "prompt-bank.json";
 *     json_t *report;
 *     kiln_bench_run(&cfg, target, &report, &err);   // a refused preflight still returns a report (refusals)
 */
#ifndef KILN_BENCH_RUN_H
#define KILN_BENCH_RUN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/status.h"
#include "bench/preflight.h"
#include "bench/target.h"

typedef struct kiln_run_cfg {
    const char *arm;          /* run name; a "<N>w" token in it claims a cap that is checked */
    const char *question;     /* the report's question line; NULL = a default */
    const char *const *graphs; /* graph files; "FILE@cell,cell" restricts a graph to some cells */
    size_t n_graphs;
    const char *manifest;     /* prompt bank */
    int warmup;               /* warm-up submits per graph (>= 0; the first is the cold submit) */
    int timed;                /* timed submits per graph (>= 1) */
    long long seed_base;      /* warm-up i: seed_base + i; timed i: seed_base + 1000 + i * batch */
    double sample_period_s;   /* telemetry period over the timed window */
    int idle_samples;         /* idle baseline readings (0.5 s apart) */
    kiln_gate_cfg gate;
    int gpu_index;            /* NVML device index */
    const char *nvml_lib;     /* NULL: $KILN_NVML_LIB or libnvidia-ml.so.1 */
    const unsigned *disclosed_pids; /* GPU processes that belong to the target */
    size_t n_disclosed;
    const char *service_unit; /* a competing server's systemd unit to check (NULL: none) */
    bool service_is_target;   /* that unit is the target itself (disclosed) */
    const char *ups;          /* NUT UPS name (NULL: none) */
    double ups_stop_pct;
    const char *const *models; /* model files to digest (cached) */
    size_t n_models;
    const char *digest_cache; /* NULL: no cache file */
    bool force;               /* time even when preflight refuses (the refusals stay in the report) */
} kiln_run_cfg;

kiln_run_cfg kiln_run_cfg_default(void);

/* Runs the benchmark against target. *report is set whenever the run got as far as a report (also on a refused
 * preflight, with the refusals); the status is not OK when a submit or input failed. */
kiln_status kiln_bench_run(const kiln_run_cfg *cfg, kiln_target *target, json_t **report, kiln_err *err);

#endif

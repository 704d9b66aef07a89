/* compare.h - `kiln bench compare`: an A/B/B/A comparison of two targets (two builds, two settings, two
 * servers) on one graph, one prompt and one seed, in counterbalanced rounds (a b b a, then again), so drift in
 * the machine (heat, clocks, caches) falls on both sides equally. The report has seed 001's shape: one row per
 * submit with side, engine seconds, per-stage timings when the target reports them, the output and the sha256
 * of its decoded pixels; a summary of means per side with the reduction; the ratio of medians B/A with an
 * order-statistic interval; "identical outputs: yes/no"; outliers flagged and kept.
 *
 *     kiln_compare_cfg c = kiln_compare_cfg_default();
 *     c.graph = "klein-4b-8st.json"; c.manifest = "prompt-bank.json"; c.cell = "ember-harbor-1__dwelling";
 *     json_t *rep;
 *     kiln_bench_compare(&c, target_a, target_b, &rep, &err);
 *     kiln_compare_markdown(rep, stdout);
 */
#ifndef KILN_BENCH_COMPARE_H
#define KILN_BENCH_COMPARE_H

#include <jansson.h>
#include <stdio.h>

#include "base/status.h"
#include "bench/target.h"

typedef struct kiln_compare_cfg {
    const char *graph, *manifest, *cell; /* cell NULL: the bank's first cell */
    const char *label_a, *label_b;       /* summary keys, e.g. "eager" and "bcg" (default "a", "b") */
    const char *scope;                   /* the report's scope sentence; NULL = generated */
    int rounds;                          /* A/B/B/A rounds (>= 1) */
    int warmup;                          /* warm-up submits per side before the rounds (excluded) */
    long long seed;
    double confidence;                   /* for the ratio's interval (default 0.95) */
} kiln_compare_cfg;

kiln_compare_cfg kiln_compare_cfg_default(void);

kiln_status kiln_bench_compare(const kiln_compare_cfg *cfg, kiln_target *a, kiln_target *b, json_t **report,
                               kiln_err *err);

/* The human summary: rows table, means, ratio with its interval, identical outputs, outliers. */
void kiln_compare_markdown(const json_t *report, FILE *out);

#endif

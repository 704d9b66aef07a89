/* report.h - reading and checking benchmark reports (kiln's own and the three seed shapes).
 *
 * A report is JSON of one of three kinds, recognised by its fields (docs/bench-report.md):
 *   seconds-per-image  "graphs" -> cards -> batches -> warm-up/timed submits, reductions, telemetry (seed 000;
 *                      what `kiln bench run` writes)
 *   abba               "rows" of an A/B/B/A comparison with per-stage timings and output digests (seed 001;
 *                      what `kiln bench compare` writes)
 *   variants           "results" per variant with HTTP lifecycle medians per cycle (seed 002)
 *   serve-load         "runs" of `kiln bench serve`: every request of every load level, the unloaded baseline,
 *                      throughput, latency percentiles and SLO attainment
 *
 *     kiln_report *r;
 *     if (kiln_report_load("report.json", &r, &err) != KILN_OK) ... // unreadable, not JSON, or no known kind
 *     for (size_t i = 0; i < r->problems.n; i++) puts(r->problems.items[i]);  // schema + consistency
 *     for (size_t i = 0; i < r->unknown.n; i++) puts(r->unknown.items[i]);    // fields kept but not understood
 *     kiln_report_print_table(r, stdout);
 *     kiln_report_free(r);
 *
 * Loading never fails because of problems: a report with problems still loads (so `show` can display it) and
 * `check` fails on problems. Every field of the document is preserved in r->root, unknown ones included.
 * Input limits: KILN_REPORT_MAX_BYTES, duplicate keys rejected, nesting depth as jansson allows.
 */
#ifndef KILN_BENCH_REPORT_H
#define KILN_BENCH_REPORT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "base/status.h"
#include "bench/schema.h"

#define KILN_REPORT_MAX_BYTES (256u << 20)
#define KILN_REPORT_SCHEMA "kiln-bench-report/1"

typedef enum kiln_report_kind {
    KILN_REPORT_SECONDS_PER_IMAGE = 0,
    KILN_REPORT_ABBA,
    KILN_REPORT_VARIANTS,
    KILN_REPORT_SERVE_LOAD, /* `kiln bench serve`: "runs" of a load generator against a server */
} kiln_report_kind;

typedef struct kiln_report {
    json_t *root;           /* the whole document; owned */
    kiln_report_kind kind;
    bool typed_ok;          /* every field has its schema type (the table can be printed) */
    kiln_strlist problems;  /* empty = the report passes `kiln bench check` */
    kiln_strlist unknown;   /* paths of fields no schema table names (kept in root) */
} kiln_report;

const char *kiln_report_kind_name(kiln_report_kind kind);
/* The schema table of a kind (report_shapes.c). */
const kiln_shape *kiln_report_shape(kiln_report_kind kind);

/* Parses len bytes (need not be NUL-terminated). name labels messages. Fails (KILN_E_FORMAT) only when the
 * bytes are not a JSON object or match no kind; KILN_E_LIMIT over KILN_REPORT_MAX_BYTES. */
kiln_status kiln_report_parse(const char *buf, size_t len, const char *name, kiln_report **out, kiln_err *err);
kiln_status kiln_report_load(const char *path, kiln_report **out, kiln_err *err);
/* Builds a report from a document already in memory (takes a reference of root). */
kiln_status kiln_report_from_json(json_t *root, const char *name, kiln_report **out, kiln_err *err);
void kiln_report_free(kiln_report *r); /* NULL allowed */

/* The consistency rules beyond types (reductions agree with their submits, n = 0 means null, fractions in
 * [0, 1], cap fields named, A/B/B/A order, ...). Called by parse; exposed for the tests. */
void kiln_report_check_consistency(const json_t *root, kiln_report_kind kind, kiln_strlist *problems);
/* The serve-load rules (report_serve.c). */
void kiln_report_check_serve_load(const json_t *root, kiln_strlist *problems);
void kiln_report_show_serve_load(const json_t *root, FILE *out);
/* A number field (NaN when absent or not a number), and the tolerance kiln's recomputing rules compare at: 1 us +
 * 1e-6 relative, NaN equal to NaN (report_serve.c). */
double kiln_report_num(const json_t *o, const char *k);
bool kiln_report_same(double got, double want);
/* The variants rules of kiln's own reports, whose cycles keep their requests (report_variants.c). */
void kiln_report_check_variants_kiln(const json_t *root, kiln_strlist *problems);

/* The short human table: one line per graph x card x batch (or per row / variant). */
void kiln_report_print_table(const kiln_report *r, FILE *out);

#endif

/* preflight.h - the checks made before anything is timed (spec bench-harness.md 3). Each check is a function
 * that returns a verdict (passed + a sentence) and writes its report fields; a failed check becomes a refusal
 * in the report, never a silent skip. Checks that read the machine (systemd, upsc) are split into a reader and
 * a parser so the parsers are tested on fixed text.
 *
 *     kiln_gate_cfg g = kiln_gate_cfg_default();           // mean utilization <= 5 % over 10 s of 20 samples, 3 tries
 *     kiln_verdict v;
 *     json_t *gate = kiln_gate_run(kiln_nvml_sample, &dev, &g, &v);
 *     if (!v.passed) refuse("contention_gate", v.text);
 */
#ifndef KILN_BENCH_PREFLIGHT_H
#define KILN_BENCH_PREFLIGHT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench/nvml.h"
#include "bench/telemetry.h"

typedef struct kiln_verdict {
    bool passed;
    char text[512];
} kiln_verdict;

/* ---- contention gate ---- */
typedef struct kiln_gate_cfg {
    double max_util_pct; /* threshold on the mean utilization of an attempt */
    double window_s;     /* one attempt samples over this window */
    int samples;         /* readings per attempt */
    int attempts;        /* tries before the gate refuses */
    double retry_wait_s; /* pause between attempts */
    /* Optional: the driver's buffered utilization samples since a Unix-microsecond time (kiln_nvml_util_history).
     * When it returns samples for an attempt's window, the attempt is judged on them (they do not alias with
     * the poll period); otherwise on the polled readings. */
    size_t (*history)(void *ctx, uint64_t since_us, double *out, size_t cap);
    void *history_ctx;
} kiln_gate_cfg;

kiln_gate_cfg kiln_gate_cfg_default(void); /* 5 %, 10 s, 20 samples, 3 attempts, 30 s apart */

/* Verdict of one attempt from its utilization readings (NaN = none). quiet: mean <= threshold. With no
 * readings at all (utilization is NOT_SUPPORTED on MIG) the attempt is "blind" and not quiet: the gate cannot
 * certify what it cannot see. Writes "quiet: mean 0.0% <= 5.0%" style text. */
bool kiln_gate_judge(const double *util, size_t n, double max_util_pct, char *text, size_t cap);

/* Runs attempts until one is quiet; returns the report's contention_gate object (seed 000 shape) and the
 * verdict. fn NULL (no telemetry): {"applicable": false, "passed": false} with a verdict that says why. */
json_t *kiln_gate_run(kiln_sample_fn fn, void *ctx, const kiln_gate_cfg *cfg, kiln_verdict *v);

/* ---- GPU processes: disclosed (the target's own, listed by the caller) vs unexpected ---- */
json_t *kiln_processes_check(const kiln_gpu_process *procs, size_t n, const unsigned *disclosed_pids,
                             size_t n_disclosed, kiln_verdict *v);

/* ---- power cap: power.limit when the board answers it, else enforced.power.limit; recorded, never inferred */
/* Adds one card to the report's cap object (create it with kiln_cap_new) and recomputes w/field/agree. */
json_t *kiln_cap_new(void);
void kiln_cap_add_card(json_t *cap, const char *uuid, const kiln_power_limits *lim);
/* The cap of the run (NaN when none was read) as recorded in cap. */
double kiln_cap_watts(const json_t *cap);

/* ---- the arm's name must claim the cap that was measured ("r1-r1-95w" claims 95 W) ---- */
/* Parses the last "<digits>w" token (case-insensitive, delimited by non-alphanumerics) of name; NaN if none. */
double kiln_cap_claimed_by_name(const char *name);
json_t *kiln_cap_name_check(const char *arm, double measured_w, kiln_verdict *v);

/* ---- systemd unit of a competing server: `systemctl show UNIT -p ...` ---- */
/* Parses KEY=VALUE lines into the report's service object; the unit is "busy" when ActiveState is active,
 * activating or reloading. disclosed: the target is this unit's server (so it may run). */
json_t *kiln_service_parse(const char *unit, const char *text, bool disclosed, kiln_verdict *v);
json_t *kiln_service_check(const char *unit, bool disclosed, kiln_verdict *v); /* runs systemctl */

/* ---- UPS load through NUT: `upsc UPS ups.load` prints a percentage ---- */
/* NaN when text is not a number. */
double kiln_ups_parse(const char *text);
/* Reads the load (NaN when upsc fails); passed when load < stop_pct (or no UPS was asked for). */
double kiln_ups_check(const char *ups, double stop_pct, kiln_verdict *v);

#endif

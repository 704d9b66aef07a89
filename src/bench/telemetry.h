/* telemetry.h - GPU telemetry samples, the sampler thread over a timed window, and its reduction into a report's
 * "trace" block (seed 000 shape: one n/min/median/max/mean per field, throttle fractions, energy).
 *
 * Samples come from a source function (NVML in nvml.h; a scripted fake in the tests), so the reduction and
 * throttle logic is tested without a GPU:
 *
 *     kiln_sampler *s = kiln_sampler_start(kiln_nvml_sample, &dev, 0.5, &err);  // one sample now, then every 0.5 s
 *     ... timed submits ...
 *     kiln_tsample *v; size_t n = kiln_sampler_stop(s, &v);                     // joins; v is the caller's
 *     json_t *trace = kiln_telemetry_reduce(v, n, &c0, &c1);                   // counters read before/after
 *     kiln_free(v);
 *
 * A field the device does not report is NaN in every sample and reduces to n = 0 with null statistics - never 0.
 */
#ifndef KILN_BENCH_TELEMETRY_H
#define KILN_BENCH_TELEMETRY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* Fields in report units (W, MiB, degrees C, %, MHz, lanes, PCIe generation). */
typedef enum kiln_tfield {
    KILN_TF_POWER_W = 0,      /* power.draw */
    KILN_TF_MEM_USED_MIB,     /* memory.used */
    KILN_TF_TEMP_C,           /* temperature.gpu */
    KILN_TF_FAN_PCT,          /* fan.speed */
    KILN_TF_SM_MHZ,           /* clocks.sm */
    KILN_TF_MEM_MHZ,          /* clocks.mem */
    KILN_TF_PCIE_WIDTH,       /* pcie.link.width.current */
    KILN_TF_PCIE_GEN,         /* pcie.link.gen.current */
    KILN_TF_POWER_LIMIT_W,    /* power.limit */
    KILN_TF_ENFORCED_LIMIT_W, /* enforced.power.limit */
    KILN_TF_UTIL_GPU,         /* utilization.gpu */
    KILN_TF_COUNT
} kiln_tfield;

/* The report's name of a field ("power.draw", ...). */
const char *kiln_tfield_name(kiln_tfield f);

/* Clocks-event ("throttle") reasons kiln reports, with their NVML mask bits (nvml.md 1.4). */
typedef enum kiln_treason {
    KILN_TR_SW_POWER_CAP = 0, /* 0x004, counter field 74 */
    KILN_TR_HW_SLOWDOWN,      /* 0x008, no counter: sampled only */
    KILN_TR_SW_THERMAL,       /* 0x020, counter field 269 */
    KILN_TR_HW_THERMAL,       /* 0x040, counter field 270 */
    KILN_TR_HW_POWER_BRAKE,   /* 0x080, counter field 271 */
    KILN_TR_SYNC_BOOST,       /* 0x010, counter field 76 */
    KILN_TR_COUNT
} kiln_treason;

const char *kiln_treason_name(kiln_treason r); /* "sw_power_cap", "hw_slowdown", ... (seed 000 keys) */
uint64_t kiln_treason_bit(kiln_treason r);

typedef struct kiln_tsample {
    double t;                 /* kiln_clock_s() when read */
    double v[KILN_TF_COUNT];  /* NaN = no reading */
    bool mask_ok;             /* the clocks-event mask was read */
    uint64_t mask;
} kiln_tsample;

/* Cumulative counters read at the edges of a window. NaN = not available. */
typedef struct kiln_tcounters {
    double t;                       /* kiln_clock_s() when read */
    double energy_mj;               /* total energy since driver load, millijoules */
    double reason_ns[KILN_TR_COUNT]; /* time spent with each reason active, nanoseconds */
} kiln_tcounters;

/* Marks every reading of s (and c) missing. */
void kiln_tsample_clear(kiln_tsample *s);
void kiln_tcounters_clear(kiln_tcounters *c);

/* A sample source: fills *out (start from kiln_tsample_clear; leave missing fields NaN). Returns false when the
 * device could not be read at all (the sample is then dropped, not counted). Called from the sampler thread. */
typedef bool (*kiln_sample_fn)(void *ctx, kiln_tsample *out);

typedef struct kiln_sampler kiln_sampler;

/* Starts a thread that samples immediately and then every period_s (> 0) until stopped. NULL on failure. */
kiln_sampler *kiln_sampler_start(kiln_sample_fn fn, void *ctx, double period_s, kiln_err *err);
/* Stops and joins the thread; *samples receives the samples in time order (kiln_free it; NULL if none).
 * Returns their count. NULL sampler: returns 0. */
size_t kiln_sampler_stop(kiln_sampler *s, kiln_tsample **samples);

/* Takes count samples spaced period_s apart on the calling thread (for preflight windows and the idle
 * baseline). Returns how many were read; *samples as for kiln_sampler_stop. */
size_t kiln_sample_window(kiln_sample_fn fn, void *ctx, size_t count, double period_s, kiln_tsample **samples);

/* The report's telemetry block over samples[0..n):
 *   {"samples": n, "<field>": {n, min, median, max, mean} for every field, "throttle": {<reason>: fraction |
 *    null, "source": {<reason>: "counter" | "sampled" | "unsupported"}}, "energy_j": J | null,
 *    "window_s": seconds | null}
 * Throttle fraction of a reason: from the counters when c0 and c1 both have it (delta ns / delta wall ns,
 * clamped to [0, 1]); else the fraction of samples with a readable mask in which the reason's bit is set; else
 * null. energy_j = (c1.energy_mj - c0.energy_mj) / 1000 when both are present and the delta is >= 0.
 * c0/c1 may be NULL. NULL only when out of memory. */
json_t *kiln_telemetry_reduce(const kiln_tsample *samples, size_t n, const kiln_tcounters *c0,
                              const kiln_tcounters *c1);

/* The raw trace for plots: {"t": [seconds since t_origin], "<field>": [value | null] for power.draw, clocks.sm,
 * temperature.gpu, utilization.gpu}. NULL when out of memory. */
json_t *kiln_telemetry_series(const kiln_tsample *samples, size_t n, double t_origin);

/* A reduction as the report writes it: {"n", "min", "median", "max", "mean"} with null for NaN. */
json_t *kiln_reduction_json(const double *x, size_t count);

#endif

/* nvml.h - NVIDIA telemetry through NVML, loaded with dlopen at run time (no link-time dependency; see
 * shared/spec/nvml.md). A machine without a GPU or driver gets KILN_E_DEVICE from kiln_nvml_open with the reason
 * ("nvml: unavailable (libnvidia-ml.so.1: cannot open shared object file)") and the harness runs on without
 * telemetry. Every symbol is resolved on its own: a missing one disables its field, never the whole library.
 *
 *     kiln_nvml *nv;
 *     if (kiln_nvml_open(NULL, &nv, &err) != KILN_OK) { report "telemetry unavailable: err.msg"; }
 *     kiln_nvml_dev dev;
 *     kiln_nvml_device(nv, 0, &dev, &err);
 *     kiln_tsample s; kiln_nvml_sample(&dev, &s);           // a kiln_sample_fn: use it with the sampler
 *     kiln_nvml_close(nv);
 *
 * Library path: the argument, else $KILN_NVML_LIB, else "libnvidia-ml.so.1" (the tests load a scripted double
 * from tests/nvml/ through this same path). Thread-safety: NVML is thread-safe; a kiln_nvml may be used by the
 * sampler thread and the caller at once.
 */
#ifndef KILN_BENCH_NVML_H
#define KILN_BENCH_NVML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "bench/telemetry.h"

typedef struct kiln_nvml kiln_nvml;

typedef struct kiln_nvml_dev {
    kiln_nvml *nv;
    void *handle; /* nvmlDevice_t */
    unsigned index;
    char uuid[96], name[96], bus_id[32];
} kiln_nvml_dev;

/* Power limits in W; NaN where the board does not answer (NOT_SUPPORTED) or the symbol is missing. */
typedef struct kiln_power_limits {
    double limit, enforced, default_limit, min_limit, max_limit;
} kiln_power_limits;

typedef struct kiln_gpu_process {
    unsigned pid;
    double used_mib; /* NaN when the driver does not say */
} kiln_gpu_process;

kiln_status kiln_nvml_open(const char *lib_path, kiln_nvml **out, kiln_err *err);
void kiln_nvml_close(kiln_nvml *nv); /* NULL allowed; calls nvmlShutdown */

/* "575.57.08" or "" when unknown; which library file was opened. */
const char *kiln_nvml_driver(const kiln_nvml *nv);
const char *kiln_nvml_library(const kiln_nvml *nv);
/* Symbols that were not found (comma-separated, "" if none), for the report's telemetry note. */
const char *kiln_nvml_missing(const kiln_nvml *nv);

kiln_status kiln_nvml_count(kiln_nvml *nv, unsigned *count, kiln_err *err);
/* Opens device index and reads its identity (uuid, name, PCI bus id; "" where unreadable). */
kiln_status kiln_nvml_device(kiln_nvml *nv, unsigned index, kiln_nvml_dev *dev, kiln_err *err);

/* A kiln_sample_fn over a kiln_nvml_dev (ctx). False only when not a single field could be read. */
bool kiln_nvml_sample(void *ctx, kiln_tsample *out);
/* The driver's own buffered GPU-utilization samples (nvmlDeviceGetSamples, type GPU_UTIL) taken after since_us
 * (Unix microseconds), in %: they do not alias with the poll period the way point reads do (nvml.md 1.6).
 * ctx is a kiln_nvml_dev. Returns how many were written to out (0 when unsupported or none). */
size_t kiln_nvml_util_history(void *ctx, uint64_t since_us, double *out, size_t cap);

/* Energy and throttle-time counters (field values 74/76/269/270/271 where the driver has them, else
 * nvmlDeviceGetViolationStatus for power and thermal). */
void kiln_nvml_counters(const kiln_nvml_dev *dev, kiln_tcounters *out);
void kiln_nvml_limits(const kiln_nvml_dev *dev, kiln_power_limits *out);
/* Compute processes on the device (_v3, else _v2). *n = how many were written (at most cap). */
kiln_status kiln_nvml_processes(const kiln_nvml_dev *dev, kiln_gpu_process *procs, size_t cap, size_t *n,
                                kiln_err *err);

#endif

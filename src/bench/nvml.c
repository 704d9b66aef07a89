/* nvml.c - NVML through dlopen (see nvml.h). The types below are kiln's own declarations of the few NVML ABI
 * facts it needs (shared/spec/nvml.md 1.9); nvml.h from NVIDIA is deliberately not used (licence, and build
 * machines without the driver do not have it). */
#include "bench/nvml.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"

/* ---- self-declared NVML ABI (x86-64) --------------------------------------------------------------------- */

enum {
    NV_SUCCESS = 0,
    NV_ERROR_NOT_SUPPORTED = 3,
    NV_ERROR_INSUFFICIENT_SIZE = 7,
};
typedef void *nv_device;
typedef struct nv_utilization {
    unsigned gpu, memory;
} nv_utilization;
typedef struct nv_memory_v1 {
    unsigned long long total, free, used;
} nv_memory_v1;
typedef struct nv_memory_v2 {
    unsigned version;
    unsigned long long total, reserved, free, used;
} nv_memory_v2;
typedef struct nv_temperature_v1 {
    unsigned version;
    int sensor_type;
    int temperature;
} nv_temperature_v1;
typedef struct nv_process_info {
    unsigned pid;
    unsigned long long used_gpu_memory;
    unsigned gpu_instance_id, compute_instance_id;
} nv_process_info;
typedef union nv_value { /* nvmlValue_t: which member holds it is an NV_VALUE_* type beside it */
    double d;
    unsigned ui;
    unsigned long ul;
    unsigned long long ull;
    long long sll;
    int si;
    unsigned short us;
} nv_value;
typedef struct nv_field_value {
    unsigned field_id, scope_id;
    long long timestamp, latency_usec;
    int value_type, nvml_return;
    nv_value value;
} nv_field_value;
typedef struct nv_sample {
    unsigned long long timestamp;
    nv_value value;
} nv_sample;
typedef struct nv_violation_time {
    unsigned long long reference_time, violation_time;
} nv_violation_time;

_Static_assert(sizeof(nv_utilization) == 8, "nvmlUtilization_t");
_Static_assert(sizeof(nv_memory_v1) == 24, "nvmlMemory_t");
_Static_assert(sizeof(nv_memory_v2) == 40, "nvmlMemory_v2_t");
_Static_assert(sizeof(nv_temperature_v1) == 12, "nvmlTemperature_v1_t");
_Static_assert(sizeof(nv_process_info) == 24, "nvmlProcessInfo_v2_t");
_Static_assert(sizeof(nv_field_value) == 40, "nvmlFieldValue_t");
_Static_assert(sizeof(nv_violation_time) == 16, "nvmlViolationTime_t");
_Static_assert(sizeof(nv_sample) == 16, "nvmlSample_t");

#define NV_MEMORY_V2_VERSION 0x02000028u
#define NV_TEMPERATURE_V1_VERSION 0x0100000Cu
#define NV_CLOCK_SM 1
#define NV_CLOCK_MEM 2
#define NV_TEMPERATURE_GPU 0
#define NV_VALUE_DOUBLE 0
#define NV_VALUE_UINT 1
#define NV_VALUE_ULONG 2
#define NV_VALUE_ULLONG 3
#define NV_VALUE_SLLONG 4
#define NV_VALUE_SINT 5
#define NV_VALUE_USHORT 6
#define NV_GPU_UTILIZATION_SAMPLES 1
#define NV_PERF_POLICY_POWER 0
#define NV_PERF_POLICY_THERMAL 1

/* The function table: one pointer per symbol, NULL when the library lacks it. */
typedef struct nv_fns {
    int (*init)(void);
    int (*shutdown)(void);
    const char *(*error_string)(int);
    int (*get_count)(unsigned *);
    int (*handle_by_index)(unsigned, nv_device *);
    int (*uuid)(nv_device, char *, unsigned);
    int (*name)(nv_device, char *, unsigned);
    int (*driver_version)(char *, unsigned);
    int (*pci_info)(nv_device, void *);
    int (*power_usage)(nv_device, unsigned *);
    int (*memory_v2)(nv_device, nv_memory_v2 *);
    int (*memory_v1)(nv_device, nv_memory_v1 *);
    int (*temperature_v)(nv_device, nv_temperature_v1 *);
    int (*temperature)(nv_device, int, unsigned *);
    int (*fan_speed)(nv_device, unsigned *);
    int (*clock_info)(nv_device, int, unsigned *);
    int (*pcie_width)(nv_device, unsigned *);
    int (*pcie_gen)(nv_device, unsigned *);
    int (*power_limit)(nv_device, unsigned *);
    int (*enforced_limit)(nv_device, unsigned *);
    int (*default_limit)(nv_device, unsigned *);
    int (*limit_constraints)(nv_device, unsigned *, unsigned *);
    int (*utilization)(nv_device, nv_utilization *);
    int (*event_reasons)(nv_device, unsigned long long *);
    int (*field_values)(nv_device, int, nv_field_value *);
    int (*violation_status)(nv_device, int, nv_violation_time *);
    int (*energy)(nv_device, unsigned long long *);
    int (*processes)(nv_device, unsigned *, nv_process_info *);
    int (*samples)(nv_device, int, unsigned long long, int *, unsigned *, nv_sample *);
} nv_fns;

struct kiln_nvml {
    void *lib;
    nv_fns f;
    char library[256];
    char driver[96];
    char missing[1024];
};

/* Resolves the first of the names that the library has. Records the group as missing when none is found. */
static void *resolve(kiln_nvml *nv, const char *const *names) {
    for (const char *const *n = names; *n; n++) {
        void *p = dlsym(nv->lib, *n);
        if (p) return p;
    }
    size_t len = strlen(nv->missing);
    snprintf(nv->missing + len, sizeof nv->missing - len, "%s%s", len ? "," : "", names[0]);
    return NULL;
}

#define RESOLVE(field, ...)                                                                                   \
    do {                                                                                                      \
        static const char *const names_[] = {__VA_ARGS__, NULL};                                              \
        void *p_ = resolve(nv, names_);                                                                       \
        memcpy(&nv->f.field, &p_, sizeof p_); /* object pointer to function pointer, as POSIX dlsym allows */ \
    } while (0)

static const char *nv_err(const kiln_nvml *nv, int rc) {
    const char *s = nv->f.error_string ? nv->f.error_string(rc) : NULL;
    return s ? s : "unknown NVML error";
}

kiln_status kiln_nvml_open(const char *lib_path, kiln_nvml **out, kiln_err *err) {
    *out = NULL;
    if (!lib_path) lib_path = getenv("KILN_NVML_LIB");
    if (!lib_path || !*lib_path) lib_path = "libnvidia-ml.so.1";
    kiln_nvml *nv = kiln_calloc(1, sizeof *nv);
    if (!nv) return KILN_FAIL(err, KILN_E_NOMEM, "nvml: out of memory");
    snprintf(nv->library, sizeof nv->library, "%s", lib_path);
    nv->lib = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
    if (!nv->lib) {
        const char *why = dlerror();
        kiln_free(nv);
        return KILN_FAIL(err, KILN_E_DEVICE, "nvml: unavailable (%s)", why ? why : lib_path);
    }
    RESOLVE(init, "nvmlInit_v2", "nvmlInit");
    RESOLVE(shutdown, "nvmlShutdown");
    RESOLVE(error_string, "nvmlErrorString");
    RESOLVE(get_count, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
    RESOLVE(handle_by_index, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
    RESOLVE(uuid, "nvmlDeviceGetUUID");
    RESOLVE(name, "nvmlDeviceGetName");
    RESOLVE(driver_version, "nvmlSystemGetDriverVersion");
    RESOLVE(pci_info, "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2");
    RESOLVE(power_usage, "nvmlDeviceGetPowerUsage");
    RESOLVE(memory_v2, "nvmlDeviceGetMemoryInfo_v2");
    RESOLVE(memory_v1, "nvmlDeviceGetMemoryInfo");
    RESOLVE(temperature_v, "nvmlDeviceGetTemperatureV");
    RESOLVE(temperature, "nvmlDeviceGetTemperature");
    RESOLVE(fan_speed, "nvmlDeviceGetFanSpeed");
    RESOLVE(clock_info, "nvmlDeviceGetClockInfo");
    RESOLVE(pcie_width, "nvmlDeviceGetCurrPcieLinkWidth");
    RESOLVE(pcie_gen, "nvmlDeviceGetCurrPcieLinkGeneration");
    RESOLVE(power_limit, "nvmlDeviceGetPowerManagementLimit");
    RESOLVE(enforced_limit, "nvmlDeviceGetEnforcedPowerLimit");
    RESOLVE(default_limit, "nvmlDeviceGetPowerManagementDefaultLimit");
    RESOLVE(limit_constraints, "nvmlDeviceGetPowerManagementLimitConstraints");
    RESOLVE(utilization, "nvmlDeviceGetUtilizationRates");
    RESOLVE(event_reasons, "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons");
    RESOLVE(field_values, "nvmlDeviceGetFieldValues");
    RESOLVE(violation_status, "nvmlDeviceGetViolationStatus");
    RESOLVE(energy, "nvmlDeviceGetTotalEnergyConsumption");
    RESOLVE(processes, "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2");
    RESOLVE(samples, "nvmlDeviceGetSamples");
    if (!nv->f.init || !nv->f.get_count || !nv->f.handle_by_index) {
        kiln_status st = KILN_FAIL(err, KILN_E_DEVICE, "nvml: unavailable (%s lacks nvmlInit/DeviceGetCount/"
                                                        "GetHandleByIndex)", lib_path);
        dlclose(nv->lib);
        kiln_free(nv);
        return st;
    }
    int rc = nv->f.init();
    if (rc != NV_SUCCESS) {
        kiln_status st = KILN_FAIL(err, KILN_E_DEVICE, "nvml: unavailable (nvmlInit: %s, code %d)", nv_err(nv, rc), rc);
        dlclose(nv->lib);
        kiln_free(nv);
        return st;
    }
    if (nv->f.driver_version && nv->f.driver_version(nv->driver, sizeof nv->driver) != NV_SUCCESS) nv->driver[0] = 0;
    nv->driver[sizeof nv->driver - 1] = 0;
    *out = nv;
    return KILN_OK;
}

void kiln_nvml_close(kiln_nvml *nv) {
    if (!nv) return;
    if (nv->f.shutdown) nv->f.shutdown();
    dlclose(nv->lib);
    kiln_free(nv);
}

const char *kiln_nvml_driver(const kiln_nvml *nv) { return nv ? nv->driver : ""; }
const char *kiln_nvml_library(const kiln_nvml *nv) { return nv ? nv->library : ""; }
const char *kiln_nvml_missing(const kiln_nvml *nv) { return nv ? nv->missing : ""; }

kiln_status kiln_nvml_count(kiln_nvml *nv, unsigned *count, kiln_err *err) {
    *count = 0;
    int rc = nv->f.get_count(count);
    if (rc != NV_SUCCESS) return KILN_FAIL(err, KILN_E_DEVICE, "nvml: device count: %s", nv_err(nv, rc));
    return KILN_OK;
}

kiln_status kiln_nvml_device(kiln_nvml *nv, unsigned index, kiln_nvml_dev *dev, kiln_err *err) {
    memset(dev, 0, sizeof *dev);
    dev->nv = nv;
    dev->index = index;
    int rc = nv->f.handle_by_index(index, &dev->handle);
    if (rc != NV_SUCCESS) return KILN_FAIL(err, KILN_E_DEVICE, "nvml: device %u: %s", index, nv_err(nv, rc));
    if (nv->f.uuid && nv->f.uuid(dev->handle, dev->uuid, sizeof dev->uuid) != NV_SUCCESS) dev->uuid[0] = 0;
    if (nv->f.name && nv->f.name(dev->handle, dev->name, sizeof dev->name) != NV_SUCCESS) dev->name[0] = 0;
    dev->uuid[sizeof dev->uuid - 1] = dev->name[sizeof dev->name - 1] = 0;
    /* nvmlPciInfo_t (68 bytes): busIdLegacy[16], domain, bus, device, pciDeviceId, pciSubSystemId, busId[32]. */
    unsigned char pci[68] = {0};
    if (nv->f.pci_info && nv->f.pci_info(dev->handle, pci) == NV_SUCCESS) {
        memcpy(dev->bus_id, pci + 36, sizeof dev->bus_id);
        dev->bus_id[sizeof dev->bus_id - 1] = 0;
    }
    return KILN_OK;
}

/* Reads one unsigned through fn; NaN unless SUCCESS (NOT_SUPPORTED and every error read as "no reading"). */
static double read_u(int (*fn)(nv_device, unsigned *), nv_device h, double scale) {
    unsigned v = 0;
    if (!fn || fn(h, &v) != NV_SUCCESS) return NAN;
    return (double)v * scale;
}

bool kiln_nvml_sample(void *ctx, kiln_tsample *out) {
    const kiln_nvml_dev *dev = ctx;
    const nv_fns *f = &dev->nv->f;
    nv_device h = dev->handle;
    kiln_tsample_clear(out);
    out->v[KILN_TF_POWER_W] = read_u(f->power_usage, h, 1e-3);
    nv_memory_v2 m2 = {.version = NV_MEMORY_V2_VERSION};
    nv_memory_v1 m1;
    if (f->memory_v2 && f->memory_v2(h, &m2) == NV_SUCCESS) out->v[KILN_TF_MEM_USED_MIB] = (double)m2.used / 1048576.0;
    else if (f->memory_v1 && f->memory_v1(h, &m1) == NV_SUCCESS)
        out->v[KILN_TF_MEM_USED_MIB] = (double)m1.used / 1048576.0;
    nv_temperature_v1 tv = {.version = NV_TEMPERATURE_V1_VERSION, .sensor_type = NV_TEMPERATURE_GPU};
    unsigned t = 0;
    if (f->temperature_v && f->temperature_v(h, &tv) == NV_SUCCESS) out->v[KILN_TF_TEMP_C] = tv.temperature;
    else if (f->temperature && f->temperature(h, NV_TEMPERATURE_GPU, &t) == NV_SUCCESS) out->v[KILN_TF_TEMP_C] = t;
    out->v[KILN_TF_FAN_PCT] = read_u(f->fan_speed, h, 1);
    unsigned mhz = 0;
    if (f->clock_info && f->clock_info(h, NV_CLOCK_SM, &mhz) == NV_SUCCESS) out->v[KILN_TF_SM_MHZ] = mhz;
    if (f->clock_info && f->clock_info(h, NV_CLOCK_MEM, &mhz) == NV_SUCCESS) out->v[KILN_TF_MEM_MHZ] = mhz;
    out->v[KILN_TF_PCIE_WIDTH] = read_u(f->pcie_width, h, 1);
    out->v[KILN_TF_PCIE_GEN] = read_u(f->pcie_gen, h, 1);
    out->v[KILN_TF_POWER_LIMIT_W] = read_u(f->power_limit, h, 1e-3);
    out->v[KILN_TF_ENFORCED_LIMIT_W] = read_u(f->enforced_limit, h, 1e-3);
    nv_utilization u;
    if (f->utilization && f->utilization(h, &u) == NV_SUCCESS) out->v[KILN_TF_UTIL_GPU] = u.gpu;
    unsigned long long mask = 0;
    if (f->event_reasons && f->event_reasons(h, &mask) == NV_SUCCESS) {
        out->mask_ok = true;
        out->mask = mask;
    }
    for (int i = 0; i < KILN_TF_COUNT; i++)
        if (!isnan(out->v[i])) return true;
    return out->mask_ok;
}

/* An NVML value of NV_VALUE_* type `type` as a double; NaN for a type kiln does not know. */
static double value_as_double(int type, const nv_value *v) {
    switch (type) {
    case NV_VALUE_DOUBLE: return v->d;
    case NV_VALUE_UINT: return (double)v->ui;
    case NV_VALUE_ULONG: return (double)v->ul;
    case NV_VALUE_ULLONG: return (double)v->ull;
    case NV_VALUE_SLLONG: return (double)v->sll;
    case NV_VALUE_SINT: return (double)v->si;
    case NV_VALUE_USHORT: return (double)v->us;
    }
    return NAN;
}

size_t kiln_nvml_util_history(void *ctx, uint64_t since_us, double *out, size_t cap) {
    const kiln_nvml_dev *dev = ctx;
    const nv_fns *f = &dev->nv->f;
    if (!f->samples || cap == 0) return 0;
    int type = 0;
    unsigned count = 0;
    /* Sized call first (NULL buffer), then the read; the driver keeps a bounded ring, cap what we take. */
    if (f->samples(dev->handle, NV_GPU_UTILIZATION_SAMPLES, since_us, &type, &count, NULL) != NV_SUCCESS || count == 0)
        return 0;
    if (count > 4096) count = 4096;
    nv_sample *buf = kiln_calloc(count, sizeof *buf);
    if (!buf) return 0;
    size_t n = 0;
    if (f->samples(dev->handle, NV_GPU_UTILIZATION_SAMPLES, since_us, &type, &count, buf) == NV_SUCCESS) {
        for (unsigned i = 0; i < count && n < cap; i++) {
            double v = value_as_double(type, &buf[i].value);
            if (!isnan(v) && buf[i].timestamp > since_us) out[n++] = v;
        }
    }
    kiln_free(buf);
    return n;
}

static double field_as_double(const nv_field_value *v) {
    return v->nvml_return == NV_SUCCESS ? value_as_double(v->value_type, &v->value) : NAN;
}

void kiln_nvml_counters(const kiln_nvml_dev *dev, kiln_tcounters *out) {
    const nv_fns *f = &dev->nv->f;
    nv_device h = dev->handle;
    kiln_tcounters_clear(out);
    out->t = kiln_clock_s();
    unsigned long long mj = 0;
    if (f->energy && f->energy(h, &mj) == NV_SUCCESS) out->energy_mj = (double)mj;
    static const struct {
        kiln_treason reason;
        unsigned field;
    } ids[] = {{KILN_TR_SW_POWER_CAP, 74}, {KILN_TR_SYNC_BOOST, 76}, {KILN_TR_SW_THERMAL, 269},
               {KILN_TR_HW_THERMAL, 270}, {KILN_TR_HW_POWER_BRAKE, 271}};
    enum { N_IDS = sizeof ids / sizeof ids[0] };
    if (f->field_values) {
        nv_field_value fv[N_IDS];
        memset(fv, 0, sizeof fv);
        for (int i = 0; i < N_IDS; i++) fv[i].field_id = ids[i].field;
        if (f->field_values(h, N_IDS, fv) == NV_SUCCESS)
            for (int i = 0; i < N_IDS; i++) out->reason_ns[ids[i].reason] = field_as_double(&fv[i]);
    }
    /* Older drivers: violation time (ns) for the power and thermal policies. */
    nv_violation_time vt;
    if (f->violation_status && isnan(out->reason_ns[KILN_TR_SW_POWER_CAP]) &&
        f->violation_status(h, NV_PERF_POLICY_POWER, &vt) == NV_SUCCESS)
        out->reason_ns[KILN_TR_SW_POWER_CAP] = (double)vt.violation_time;
    if (f->violation_status && isnan(out->reason_ns[KILN_TR_SW_THERMAL]) &&
        f->violation_status(h, NV_PERF_POLICY_THERMAL, &vt) == NV_SUCCESS)
        out->reason_ns[KILN_TR_SW_THERMAL] = (double)vt.violation_time;
}

void kiln_nvml_limits(const kiln_nvml_dev *dev, kiln_power_limits *out) {
    const nv_fns *f = &dev->nv->f;
    nv_device h = dev->handle;
    out->limit = read_u(f->power_limit, h, 1e-3);
    out->enforced = read_u(f->enforced_limit, h, 1e-3);
    out->default_limit = read_u(f->default_limit, h, 1e-3);
    out->min_limit = out->max_limit = NAN;
    unsigned lo = 0, hi = 0;
    if (f->limit_constraints && f->limit_constraints(h, &lo, &hi) == NV_SUCCESS) {
        out->min_limit = lo * 1e-3;
        out->max_limit = hi * 1e-3;
    }
}

kiln_status kiln_nvml_processes(const kiln_nvml_dev *dev, kiln_gpu_process *procs, size_t cap, size_t *n,
                                kiln_err *err) {
    *n = 0;
    const kiln_nvml *nv = dev->nv;
    if (!nv->f.processes) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "nvml: no process query in this driver");
    /* The list is racy: ask for the count, over-allocate, ask again. */
    unsigned count = 0;
    int rc = nv->f.processes(dev->handle, &count, NULL);
    if (rc == NV_SUCCESS) return KILN_OK; /* none */
    if (rc != NV_ERROR_INSUFFICIENT_SIZE)
        return KILN_FAIL(err, KILN_E_DEVICE, "nvml: compute processes: %s", nv_err(nv, rc));
    if (count > 4096) count = 4096;
    unsigned room = count + 8;
    nv_process_info *buf = kiln_calloc(room, sizeof *buf);
    if (!buf) return KILN_FAIL(err, KILN_E_NOMEM, "nvml: out of memory");
    rc = nv->f.processes(dev->handle, &room, buf);
    if (rc != NV_SUCCESS) {
        kiln_free(buf);
        return KILN_FAIL(err, KILN_E_DEVICE, "nvml: compute processes: %s", nv_err(nv, rc));
    }
    for (unsigned i = 0; i < room && *n < cap; i++) {
        procs[*n].pid = buf[i].pid;
        /* NVML_VALUE_NOT_AVAILABLE is all ones: the driver cannot say (e.g. Windows WDDM, some containers). */
        procs[*n].used_mib = buf[i].used_gpu_memory == ~0ULL ? NAN : (double)buf[i].used_gpu_memory / 1048576.0;
        (*n)++;
    }
    kiln_free(buf);
    return KILN_OK;
}

/* fake_nvml.c - a scripted stand-in for libnvidia-ml.so.1, built as a shared library and loaded by the bench
 * tests through kiln's own dlopen path (kiln_nvml_open(path)). It exports the NVML symbols kiln uses, with
 * values a test sets through fake_nvml_set() (looked up with dlsym on the same library handle, so the test and
 * kiln share these globals). Built twice:
 *   kiln_fake_nvml          every symbol, field-value counters, _v2/_v3 variants;
 *   kiln_fake_nvml_minimal  (FAKE_NVML_MINIMAL) an old driver: no field values, no EventReasons (only the old
 *                           ThrottleReasons name), no MemoryInfo_v2, no energy counter, no fan symbol, processes
 *                           only as _v2 - so the fallbacks and the "missing symbol disables a field" rule run.
 * The values are NVML's units (mW, bytes, MHz, ns, mJ). A value set to FAKE_NOT_SUPPORTED answers
 * NVML_ERROR_NOT_SUPPORTED (3); "init_rc" makes nvmlInit fail with that code. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define FAKE_NOT_SUPPORTED (-1LL)
#define EXPORT __attribute__((visibility("default")))

typedef struct { const char *key; long long value; } slot;
static slot slots[] = {
    {"init_rc", 0}, {"count", 1}, {"power_mw", 250000}, {"mem_used", 16355LL << 20}, {"mem_total", 24LL << 30},
    {"temp", 47}, {"fan", FAKE_NOT_SUPPORTED}, {"sm_mhz", 1545}, {"mem_mhz", 14001}, {"pcie_width", 16},
    {"pcie_gen", 4}, {"limit_mw", FAKE_NOT_SUPPORTED}, {"enforced_mw", 95000}, {"default_mw", 175000},
    {"min_mw", 80000}, {"max_mw", 175000}, {"util", 0}, {"reasons", 0x4}, {"energy_mj", 1000000},
    {"ctr_74", 0}, {"ctr_76", 0}, {"ctr_269", 0}, {"ctr_270", 0}, {"ctr_271", FAKE_NOT_SUPPORTED},
    {"viol_power", 0}, {"viol_thermal", 0}, {"nproc", 0}, {"proc_pid0", 4242}, {"proc_mem0", 512LL << 20},
    {"calls_power", 0}, {"util_hist", -2}, /* -2: the driver's samples follow "util"; -1: NOT_SUPPORTED */
};
#define NSLOTS (sizeof slots / sizeof slots[0])
static int saved;
static slot defaults[NSLOTS];

#include <stdlib.h>

/* Environment overrides, read once: FAKE_NVML_<key>=<integer> (so a test driving the kiln binary can script
 * the double too, e.g. FAKE_NVML_util=50 for a busy card). */
static int env_read;
static void read_env(void) {
    env_read = 1;
    for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "FAKE_NVML_%s", slots[i].key);
        const char *v = getenv(name);
        if (v) slots[i].value = strtoll(v, NULL, 0);
    }
}

static long long *find(const char *key) {
    if (!env_read) read_env();
    for (size_t i = 0; i < NSLOTS; i++)
        if (!strcmp(slots[i].key, key)) return &slots[i].value;
    return NULL;
}
static long long get(const char *key) { long long *p = find(key); return p ? *p : FAKE_NOT_SUPPORTED; }

EXPORT int fake_nvml_set(const char *key, long long value);
EXPORT void fake_nvml_reset(void);
EXPORT long long fake_nvml_get(const char *key);

int fake_nvml_set(const char *key, long long value) {
    if (!saved) { memcpy(defaults, slots, sizeof slots); saved = 1; }
    long long *p = find(key);
    if (!p) return -1;
    *p = value;
    return 0;
}
void fake_nvml_reset(void) {
    if (saved) memcpy(slots, defaults, sizeof slots);
}
long long fake_nvml_get(const char *key) { return get(key); }

/* ---- the NVML surface ---- */
typedef void *dev_t_;
static int the_device;

static int answer_u(const char *key, unsigned *out) {
    long long v = get(key);
    if (v == FAKE_NOT_SUPPORTED) return 3;
    *out = (unsigned)v;
    return 0;
}

EXPORT int nvmlInit_v2(void);
EXPORT int nvmlShutdown(void);
EXPORT const char *nvmlErrorString(int rc);
EXPORT int nvmlDeviceGetCount_v2(unsigned *n);
EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned i, dev_t_ *d);
EXPORT int nvmlDeviceGetUUID(dev_t_ d, char *buf, unsigned len);
EXPORT int nvmlDeviceGetName(dev_t_ d, char *buf, unsigned len);
EXPORT int nvmlSystemGetDriverVersion(char *buf, unsigned len);
EXPORT int nvmlDeviceGetPciInfo_v3(dev_t_ d, void *pci);
EXPORT int nvmlDeviceGetPowerUsage(dev_t_ d, unsigned *mw);
EXPORT int nvmlDeviceGetMemoryInfo(dev_t_ d, void *m);
EXPORT int nvmlDeviceGetTemperature(dev_t_ d, int sensor, unsigned *t);
EXPORT int nvmlDeviceGetClockInfo(dev_t_ d, int type, unsigned *mhz);
EXPORT int nvmlDeviceGetCurrPcieLinkWidth(dev_t_ d, unsigned *w);
EXPORT int nvmlDeviceGetCurrPcieLinkGeneration(dev_t_ d, unsigned *g);
EXPORT int nvmlDeviceGetPowerManagementLimit(dev_t_ d, unsigned *mw);
EXPORT int nvmlDeviceGetEnforcedPowerLimit(dev_t_ d, unsigned *mw);
EXPORT int nvmlDeviceGetPowerManagementDefaultLimit(dev_t_ d, unsigned *mw);
EXPORT int nvmlDeviceGetPowerManagementLimitConstraints(dev_t_ d, unsigned *lo, unsigned *hi);
EXPORT int nvmlDeviceGetUtilizationRates(dev_t_ d, unsigned *u);
EXPORT int nvmlDeviceGetCurrentClocksThrottleReasons(dev_t_ d, unsigned long long *m);
EXPORT int nvmlDeviceGetViolationStatus(dev_t_ d, int policy, unsigned long long *v);
EXPORT int nvmlDeviceGetComputeRunningProcesses_v2(dev_t_ d, unsigned *count, void *infos);

int nvmlInit_v2(void) { return (int)get("init_rc"); }
int nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(int rc) {
    switch (rc) {
    case 3: return "Not Supported";
    case 7: return "Insufficient Size";
    case 9: return "Driver Not Loaded";
    case 18: return "RM has detected an NVML/RM version mismatch";
    default: return "Unknown Error";
    }
}
int nvmlDeviceGetCount_v2(unsigned *n) { *n = (unsigned)get("count"); return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, dev_t_ *d) {
    if (i >= (unsigned)get("count")) return 2;
    *d = &the_device;
    return 0;
}
int nvmlDeviceGetUUID(dev_t_ d, char *buf, unsigned len) {
    strncpy(buf, "GPU-00000000-fake-4000-8000-000000000001", len);
    return 0;
}
int nvmlDeviceGetName(dev_t_ d, char *buf, unsigned len) { strncpy(buf, "Fake GPU 24 GB", len); return 0; }
int nvmlSystemGetDriverVersion(char *buf, unsigned len) { strncpy(buf, "999.1.2", len); return 0; }
int nvmlDeviceGetPciInfo_v3(dev_t_ d, void *pci) {
    memset(pci, 0, 68);
    memcpy((char *)pci + 36, "00000000:01:00.0", 17); /* busId[32] after busIdLegacy[16] and five unsigneds */
    return 0;
}
int nvmlDeviceGetPowerUsage(dev_t_ d, unsigned *mw) {
    fake_nvml_set("calls_power", get("calls_power") + 1);
    return answer_u("power_mw", mw);
}
int nvmlDeviceGetMemoryInfo(dev_t_ d, void *m) {
    unsigned long long v[3] = {(unsigned long long)get("mem_total"), 0, (unsigned long long)get("mem_used")};
    v[1] = v[0] - v[2];
    memcpy(m, v, sizeof v); /* {total, free, used} */
    return 0;
}
int nvmlDeviceGetTemperature(dev_t_ d, int sensor, unsigned *t) { return sensor == 0 ? answer_u("temp", t) : 2; }
int nvmlDeviceGetClockInfo(dev_t_ d, int type, unsigned *mhz) {
    return type == 1 ? answer_u("sm_mhz", mhz) : type == 2 ? answer_u("mem_mhz", mhz) : 3;
}
int nvmlDeviceGetCurrPcieLinkWidth(dev_t_ d, unsigned *w) { return answer_u("pcie_width", w); }
int nvmlDeviceGetCurrPcieLinkGeneration(dev_t_ d, unsigned *g) { return answer_u("pcie_gen", g); }
int nvmlDeviceGetPowerManagementLimit(dev_t_ d, unsigned *mw) { return answer_u("limit_mw", mw); }
int nvmlDeviceGetEnforcedPowerLimit(dev_t_ d, unsigned *mw) { return answer_u("enforced_mw", mw); }
int nvmlDeviceGetPowerManagementDefaultLimit(dev_t_ d, unsigned *mw) { return answer_u("default_mw", mw); }
int nvmlDeviceGetPowerManagementLimitConstraints(dev_t_ d, unsigned *lo, unsigned *hi) {
    int rc = answer_u("min_mw", lo);
    return rc ? rc : answer_u("max_mw", hi);
}
int nvmlDeviceGetUtilizationRates(dev_t_ d, unsigned *u) {
    int rc = answer_u("util", &u[0]);
    u[1] = 0;
    return rc;
}
int nvmlDeviceGetCurrentClocksThrottleReasons(dev_t_ d, unsigned long long *m) {
    long long v = get("reasons");
    if (v == FAKE_NOT_SUPPORTED) return 3;
    *m = (unsigned long long)v;
    return 0;
}
int nvmlDeviceGetViolationStatus(dev_t_ d, int policy, unsigned long long *v) {
    long long x = get(policy == 0 ? "viol_power" : "viol_thermal");
    if (x == FAKE_NOT_SUPPORTED) return 3;
    v[0] = 0;
    v[1] = (unsigned long long)x;
    return 0;
}
static int processes(unsigned *count, void *infos) {
    unsigned n = (unsigned)get("nproc");
    if (!infos || *count < n) {
        *count = n;
        return n == 0 ? 0 : 7; /* NVML: SUCCESS when there is nothing to list, else INSUFFICIENT_SIZE */
    }
    unsigned char *p = infos;
    for (unsigned i = 0; i < n; i++) {
        unsigned pid = (unsigned)(get("proc_pid0") + i);
        unsigned long long mem = (unsigned long long)get("proc_mem0");
        memset(p + 24 * i, 0, 24);
        memcpy(p + 24 * i, &pid, 4);
        memcpy(p + 24 * i + 8, &mem, 8);
    }
    *count = n;
    return 0;
}
int nvmlDeviceGetComputeRunningProcesses_v2(dev_t_ d, unsigned *count, void *infos) { return processes(count, infos); }

#ifndef FAKE_NVML_MINIMAL
EXPORT int nvmlDeviceGetSamples(dev_t_ d, int type, unsigned long long last, int *vtype, unsigned *count, void *out);
/* Ten buffered utilization samples after lastSeen, 100 ms apart (an nvmlSample_t is {u64 timestamp, 8-byte value}). */
int nvmlDeviceGetSamples(dev_t_ d, int type, unsigned long long last, int *vtype, unsigned *count, void *out) {
    long long h = get("util_hist");
    if (h == -1 || type != 1) return 3;
    if (h == -2) h = get("util");
    *vtype = 1; /* UINT */
    if (!out) {
        *count = 10;
        return 0;
    }
    unsigned n = *count < 10 ? *count : 10;
    for (unsigned i = 0; i < n; i++) {
        unsigned long long ts = last + 100000ULL * (i + 1);
        unsigned v = (unsigned)h;
        memcpy((char *)out + 16 * i, &ts, 8);
        memset((char *)out + 16 * i + 8, 0, 8);
        memcpy((char *)out + 16 * i + 8, &v, 4);
    }
    *count = n;
    return 0;
}

EXPORT int nvmlDeviceGetMemoryInfo_v2(dev_t_ d, void *m);
EXPORT int nvmlDeviceGetFanSpeed(dev_t_ d, unsigned *pct);
EXPORT int nvmlDeviceGetCurrentClocksEventReasons(dev_t_ d, unsigned long long *m);
EXPORT int nvmlDeviceGetFieldValues(dev_t_ d, int count, void *values);
EXPORT int nvmlDeviceGetTotalEnergyConsumption(dev_t_ d, unsigned long long *mj);
EXPORT int nvmlDeviceGetComputeRunningProcesses_v3(dev_t_ d, unsigned *count, void *infos);

int nvmlDeviceGetMemoryInfo_v2(dev_t_ d, void *m) {
    unsigned version;
    memcpy(&version, m, 4);
    if (version != 0x02000028u) return 25; /* ARGUMENT_VERSION_MISMATCH: kiln must set the version word */
    unsigned long long v[4] = {(unsigned long long)get("mem_total"), 0, 0, (unsigned long long)get("mem_used")};
    v[2] = v[0] - v[3];
    memcpy((char *)m + 8, v, sizeof v); /* {total, reserved, free, used} after the padded version word */
    return 0;
}
int nvmlDeviceGetFanSpeed(dev_t_ d, unsigned *pct) { return answer_u("fan", pct); }
int nvmlDeviceGetCurrentClocksEventReasons(dev_t_ d, unsigned long long *m) {
    return nvmlDeviceGetCurrentClocksThrottleReasons(d, m);
}
int nvmlDeviceGetFieldValues(dev_t_ d, int count, void *values) {
    unsigned char *p = values;
    for (int i = 0; i < count; i++) {
        unsigned id;
        memcpy(&id, p + 40 * i, 4);
        char key[16];
        key[0] = 0;
        if (id == 74 || id == 76 || id == 269 || id == 270 || id == 271) {
            strcpy(key, "ctr_");
            unsigned k = id, pos = 4;
            char digits[8];
            int nd = 0;
            while (k) { digits[nd++] = (char)('0' + k % 10); k /= 10; }
            while (nd) key[pos++] = digits[--nd];
            key[pos] = 0;
        }
        long long v = key[0] ? get(key) : FAKE_NOT_SUPPORTED;
        int rc = v == FAKE_NOT_SUPPORTED ? 3 : 0, type = 3; /* ULLONG */
        memcpy(p + 40 * i + 24, &type, 4);
        memcpy(p + 40 * i + 28, &rc, 4);
        unsigned long long uv = rc ? 0 : (unsigned long long)v;
        memcpy(p + 40 * i + 32, &uv, 8);
    }
    return 0;
}
int nvmlDeviceGetTotalEnergyConsumption(dev_t_ d, unsigned long long *mj) {
    long long v = get("energy_mj");
    if (v == FAKE_NOT_SUPPORTED) return 3;
    *mj = (unsigned long long)v;
    return 0;
}
int nvmlDeviceGetComputeRunningProcesses_v3(dev_t_ d, unsigned *count, void *infos) { return processes(count, infos); }
#endif

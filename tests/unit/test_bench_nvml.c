/* test_bench_nvml.c - NVML through kiln's dlopen path, without a GPU: a scripted test double
 * (tests/nvml/fake_nvml.c, built as kiln_fake_nvml and kiln_fake_nvml_minimal) answers the NVML calls with
 * values set here, including NOT_SUPPORTED, init errors and missing symbols. Also the sampler thread and the
 * trace reduction over a fake sample source, against hand-computed values. */
#include <dlfcn.h>
#include <math.h>
#include <time.h>

#include "base/alloc.h"
#include "bench/nvml.h"
#include "bench/telemetry.h"
#include "test.h"

#ifndef FAKE_NVML_LIB
#error "FAKE_NVML_LIB (path of the test double) is set by CMakeLists.txt"
#endif

typedef int (*set_fn)(const char *, long long);
typedef void (*reset_fn)(void);
static set_fn fake_set;
static reset_fn fake_reset;
static void *fake_lib;

/* Loads the double's controls; the same path dlopen'ed by kiln yields the same library (one set of values). */
static bool use_fake(const char *path) {
    if (fake_lib) dlclose(fake_lib);
    fake_lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    CHECK_MSG(fake_lib != NULL, "%s", dlerror());
    if (!fake_lib) return false;
    void *s = dlsym(fake_lib, "fake_nvml_set"), *r = dlsym(fake_lib, "fake_nvml_reset");
    memcpy(&fake_set, &s, sizeof s);
    memcpy(&fake_reset, &r, sizeof r);
    fake_reset();
    return fake_set && fake_reset;
}

static double field_n(const json_t *trace, const char *field) {
    return (double)json_integer_value(json_object_get(json_object_get(trace, field), "n"));
}
static double field_stat(const json_t *trace, const char *field, const char *stat) {
    json_t *v = json_object_get(json_object_get(trace, field), stat);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static void test_no_library_means_unavailable(void) {
    kiln_nvml *nv = (kiln_nvml *)1;
    kiln_err err = {0};
    CHECK_EQ_INT(kiln_nvml_open("/nonexistent/libnvidia-ml.so.1", &nv, &err), KILN_E_DEVICE);
    CHECK(nv == NULL);
    CHECK_ERR_CONTAINS(&err, "nvml: unavailable (");
    /* The real default name on this machine (no driver in CI): either absent, or present and working. */
    kiln_status st = kiln_nvml_open(NULL, &nv, &err);
    CHECK(st == KILN_OK || (st == KILN_E_DEVICE && strstr(err.msg, "nvml: unavailable")));
    kiln_nvml_close(nv);
}

static void test_init_error_is_reported(void) {
    if (!use_fake(FAKE_NVML_LIB)) return;
    fake_set("init_rc", 9);
    kiln_nvml *nv;
    kiln_err err = {0};
    CHECK_EQ_INT(kiln_nvml_open(FAKE_NVML_LIB, &nv, &err), KILN_E_DEVICE);
    CHECK_ERR_CONTAINS(&err, "Driver Not Loaded");
    fake_reset();
}

static void test_full_driver_sample_limits_processes(void) {
    if (!use_fake(FAKE_NVML_LIB)) return;
    kiln_nvml *nv;
    kiln_err err = {0};
    CHECK_EQ_INT(kiln_nvml_open(FAKE_NVML_LIB, &nv, &err), KILN_OK);
    if (!nv) return;
    CHECK_EQ_STR(kiln_nvml_driver(nv), "999.1.2");
    CHECK(strstr(kiln_nvml_missing(nv), "nvmlDeviceGetTemperatureV") != NULL); /* fell back to GetTemperature */
    CHECK(strstr(kiln_nvml_missing(nv), "FieldValues") == NULL);
    unsigned count;
    CHECK_EQ_INT(kiln_nvml_count(nv, &count, &err), KILN_OK);
    CHECK_EQ_INT(count, 1);
    kiln_nvml_dev dev;
    CHECK_EQ_INT(kiln_nvml_device(nv, 0, &dev, &err), KILN_OK);
    CHECK_EQ_STR(dev.uuid, "GPU-00000000-fake-4000-8000-000000000001");
    CHECK_EQ_STR(dev.bus_id, "00000000:01:00.0");
    CHECK_EQ_INT(kiln_nvml_device(nv, 1, &dev, &err), KILN_E_DEVICE);
    CHECK_EQ_INT(kiln_nvml_device(nv, 0, &dev, &err), KILN_OK);
    kiln_tsample s;
    CHECK(kiln_nvml_sample(&dev, &s));
    CHECK_NEAR(s.v[KILN_TF_POWER_W], 250.0, 1e-9);        /* 250000 mW */
    CHECK_NEAR(s.v[KILN_TF_MEM_USED_MIB], 16355.0, 1e-9);  /* via MemoryInfo_v2 with its version word */
    CHECK_NEAR(s.v[KILN_TF_TEMP_C], 47, 0);
    CHECK(isnan(s.v[KILN_TF_FAN_PCT]));                    /* NOT_SUPPORTED: no reading, not 0 */
    CHECK_NEAR(s.v[KILN_TF_SM_MHZ], 1545, 0);
    CHECK_NEAR(s.v[KILN_TF_MEM_MHZ], 14001, 0);
    CHECK_NEAR(s.v[KILN_TF_PCIE_WIDTH], 16, 0);
    CHECK(isnan(s.v[KILN_TF_POWER_LIMIT_W]));              /* a board that answers only enforced */
    CHECK_NEAR(s.v[KILN_TF_ENFORCED_LIMIT_W], 95.0, 1e-9);
    CHECK(s.mask_ok && s.mask == 0x4);
    double hist[16];
    CHECK_EQ_INT(kiln_nvml_util_history(&dev, 1000, hist, 16), 10); /* the double's ring: ten samples */
    CHECK_NEAR(hist[0], 0, 0);
    fake_set("util_hist", 30);
    CHECK_EQ_INT(kiln_nvml_util_history(&dev, 1000, hist, 4), 4); /* capped at the caller's room */
    CHECK_NEAR(hist[3], 30, 0);
    fake_set("util_hist", -1); /* NOT_SUPPORTED (MIG): no samples, not zeros */
    CHECK_EQ_INT(kiln_nvml_util_history(&dev, 1000, hist, 16), 0);
    kiln_power_limits lim;
    kiln_nvml_limits(&dev, &lim);
    CHECK(isnan(lim.limit));
    CHECK_NEAR(lim.enforced, 95, 1e-9);
    CHECK_NEAR(lim.default_limit, 175, 1e-9);
    CHECK_NEAR(lim.min_limit, 80, 1e-9);
    CHECK_NEAR(lim.max_limit, 175, 1e-9);
    kiln_gpu_process procs[8];
    size_t np;
    CHECK_EQ_INT(kiln_nvml_processes(&dev, procs, 8, &np, &err), KILN_OK);
    CHECK_EQ_INT(np, 0);
    fake_set("nproc", 2);
    CHECK_EQ_INT(kiln_nvml_processes(&dev, procs, 8, &np, &err), KILN_OK);
    CHECK_EQ_INT(np, 2);
    CHECK_EQ_INT(procs[0].pid, 4242);
    CHECK_EQ_INT(procs[1].pid, 4243);
    CHECK_NEAR(procs[1].used_mib, 512, 1e-9);
    /* Counters over a window: 0.5 s of SW power cap in 1 s, 250 J. */
    kiln_tcounters c0, c1;
    kiln_nvml_counters(&dev, &c0);
    CHECK_NEAR(c0.energy_mj, 1000000, 0);
    CHECK_NEAR(c0.reason_ns[KILN_TR_SW_POWER_CAP], 0, 0);
    CHECK(isnan(c0.reason_ns[KILN_TR_HW_POWER_BRAKE])); /* field 271 NOT_SUPPORTED */
    CHECK(isnan(c0.reason_ns[KILN_TR_HW_SLOWDOWN]));    /* no counter exists for it */
    fake_set("ctr_74", 500000000);
    fake_set("energy_mj", 1250000);
    kiln_nvml_counters(&dev, &c1);
    c1.t = c0.t + 1.0;
    kiln_tsample v[4];
    for (int i = 0; i < 4; i++) {
        kiln_nvml_sample(&dev, &v[i]);
        v[i].t = c0.t + 0.25 * i;
    }
    v[1].mask = 0x4 | 0x8; /* one of four samples saw HW slowdown */
    json_t *trace = kiln_telemetry_reduce(v, 4, &c0, &c1);
    const json_t *thr = json_object_get(trace, "throttle"), *src = json_object_get(thr, "source");
    CHECK_NEAR(json_real_value(json_object_get(thr, "sw_power_cap")), 0.5, 1e-12);
    CHECK_EQ_STR(json_string_value(json_object_get(src, "sw_power_cap")), "counter");
    CHECK_NEAR(json_real_value(json_object_get(thr, "hw_slowdown")), 0.25, 1e-12);
    CHECK_EQ_STR(json_string_value(json_object_get(src, "hw_slowdown")), "sampled");
    CHECK_NEAR(json_real_value(json_object_get(thr, "hw_power_brake_slowdown")), 0.0, 0);
    CHECK_EQ_STR(json_string_value(json_object_get(src, "hw_power_brake_slowdown")), "sampled");
    CHECK_NEAR(json_real_value(json_object_get(trace, "energy_j")), 250.0, 1e-9);
    CHECK_NEAR(json_real_value(json_object_get(trace, "window_s")), 1.0, 1e-12);
    CHECK_EQ_INT(field_n(trace, "fan.speed"), 0);
    CHECK(json_is_null(json_object_get(json_object_get(trace, "fan.speed"), "median")));
    CHECK_EQ_INT(field_n(trace, "power.limit"), 0);
    CHECK_EQ_INT(field_n(trace, "enforced.power.limit"), 4);
    json_decref(trace);
    kiln_nvml_close(nv);
}

static void test_minimal_driver_falls_back(void) {
    if (!use_fake(FAKE_NVML_MINIMAL_LIB)) return;
    kiln_nvml *nv;
    kiln_err err = {0};
    CHECK_EQ_INT(kiln_nvml_open(FAKE_NVML_MINIMAL_LIB, &nv, &err), KILN_OK);
    if (!nv) return;
    const char *missing = kiln_nvml_missing(nv);
    CHECK(strstr(missing, "nvmlDeviceGetFieldValues") != NULL);
    CHECK(strstr(missing, "nvmlDeviceGetTotalEnergyConsumption") != NULL);
    CHECK(strstr(missing, "nvmlDeviceGetFanSpeed") != NULL);
    CHECK(strstr(missing, "nvmlDeviceGetCurrentClocksEventReasons") == NULL); /* the old name was found */
    CHECK(strstr(missing, "nvmlDeviceGetSamples") != NULL);
    kiln_nvml_dev dev;
    CHECK_EQ_INT(kiln_nvml_device(nv, 0, &dev, &err), KILN_OK);
    double hist[4];
    CHECK_EQ_INT(kiln_nvml_util_history(&dev, 0, hist, 4), 0); /* no GetSamples symbol */
    fake_set("fan", 40); /* the value exists, but the symbol does not: still no reading */
    fake_set("reasons", 0x20);
    kiln_tsample s;
    CHECK(kiln_nvml_sample(&dev, &s));
    CHECK(isnan(s.v[KILN_TF_FAN_PCT]));
    CHECK_NEAR(s.v[KILN_TF_MEM_USED_MIB], 16355.0, 1e-9); /* via MemoryInfo (v1) */
    CHECK(s.mask_ok && s.mask == 0x20);                  /* via ...ThrottleReasons */
    kiln_tcounters c0, c1;
    fake_set("viol_power", 1000);
    kiln_nvml_counters(&dev, &c0);
    CHECK(isnan(c0.energy_mj));
    CHECK_NEAR(c0.reason_ns[KILN_TR_SW_POWER_CAP], 1000, 0); /* from the violation status */
    CHECK(isnan(c0.reason_ns[KILN_TR_HW_THERMAL]));
    fake_set("viol_power", 1000 + 250000000);
    fake_set("viol_thermal", 100000000);
    kiln_nvml_counters(&dev, &c1);
    c1.t = c0.t + 2.0;
    json_t *trace = kiln_telemetry_reduce(&s, 1, &c0, &c1);
    const json_t *thr = json_object_get(trace, "throttle");
    CHECK_NEAR(json_real_value(json_object_get(thr, "sw_power_cap")), 0.125, 1e-12); /* 0.25 s of 2 s */
    CHECK_NEAR(json_real_value(json_object_get(thr, "sw_thermal_slowdown")), 0.05, 1e-12);
    CHECK(json_is_null(json_object_get(trace, "energy_j")));
    CHECK_NEAR(json_real_value(json_object_get(thr, "hw_thermal_slowdown")), 0, 0); /* mask 0x20 lacks 0x40 */
    json_decref(trace);
    fake_set("nproc", 1);
    kiln_gpu_process procs[2];
    size_t np;
    CHECK_EQ_INT(kiln_nvml_processes(&dev, procs, 2, &np, &err), KILN_OK); /* via _v2 */
    CHECK_EQ_INT(np, 1);
    kiln_nvml_close(nv);
}

/* ---- the sampler and the reduction over a scripted source ---- */

typedef struct script {
    int calls;
    int fail_every; /* every k-th read fails (0: never) */
} script;

static bool scripted(void *ctx, kiln_tsample *out) {
    script *s = ctx;
    s->calls++;
    if (s->fail_every && s->calls % s->fail_every == 0) return false;
    out->v[KILN_TF_POWER_W] = 90.0 + (s->calls % 3); /* 91, 92, 90, 91, ... */
    out->mask_ok = true;
    out->mask = (s->calls % 2) ? 0x4 : 0;
    return true;
}

static void test_sampler_thread(void) {
    script sc = {0, 0};
    kiln_err err = {0};
    kiln_sampler *s = kiln_sampler_start(scripted, &sc, 0.01, &err);
    CHECK(s != NULL);
    struct timespec ts = {0, 200 * 1000000L};
    nanosleep(&ts, NULL);
    kiln_tsample *v;
    size_t n = kiln_sampler_stop(s, &v);
    /* About 21 at 10 ms in 200 ms; loaded CI machines (sanitizers, shared cores) wake the thread late. */
    CHECK_MSG(n >= 2 && n <= 30, "%zu samples in 200 ms at 10 ms", n);
    for (size_t i = 1; i < n; i++) CHECK(v[i].t >= v[i - 1].t);
    kiln_free(v);
    CHECK(kiln_sampler_start(scripted, &sc, 0, &err) == NULL);
    CHECK_EQ_INT(err.code, KILN_E_INVALID);
    CHECK_EQ_INT(kiln_sampler_stop(NULL, &v), 0);
}

static void test_window_and_reduction_by_hand(void) {
    script sc = {0, 3}; /* reads 3 and 6 fail: 4 of 6 samples kept */
    kiln_tsample *v;
    size_t n = kiln_sample_window(scripted, &sc, 6, 0.001, &v);
    CHECK_EQ_INT(n, 4);
    /* calls 1, 2, 4, 5: power 91, 92, 91, 92; masks 0x4, 0, 0, 0x4 */
    json_t *trace = kiln_telemetry_reduce(v, n, NULL, NULL);
    CHECK_EQ_INT(json_integer_value(json_object_get(trace, "samples")), 4);
    CHECK_EQ_INT(field_n(trace, "power.draw"), 4);
    CHECK_NEAR(field_stat(trace, "power.draw", "min"), 91, 0);
    CHECK_NEAR(field_stat(trace, "power.draw", "median"), 91.5, 1e-12);
    CHECK_NEAR(field_stat(trace, "power.draw", "mean"), 91.5, 1e-12);
    CHECK_EQ_INT(field_n(trace, "clocks.sm"), 0);
    const json_t *thr = json_object_get(trace, "throttle");
    CHECK_NEAR(json_real_value(json_object_get(thr, "sw_power_cap")), 0.5, 1e-12);
    CHECK(json_is_null(json_object_get(trace, "energy_j")));
    json_decref(trace);
    kiln_free(v);
    /* No samples at all: every field n = 0 and null, throttle null with source unsupported. */
    trace = kiln_telemetry_reduce(NULL, 0, NULL, NULL);
    CHECK_EQ_INT(field_n(trace, "power.draw"), 0);
    thr = json_object_get(trace, "throttle");
    CHECK(json_is_null(json_object_get(thr, "sw_power_cap")));
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(thr, "source"), "sw_power_cap")), "unsupported");
    json_decref(trace);
}

int main(void) {
    RUN(test_no_library_means_unavailable);
    RUN(test_init_error_is_reported);
    RUN(test_full_driver_sample_limits_processes);
    RUN(test_minimal_driver_falls_back);
    RUN(test_sampler_thread);
    RUN(test_window_and_reduction_by_hand);
    if (fake_lib) dlclose(fake_lib);
    return test_summary();
}

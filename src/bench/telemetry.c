/* telemetry.c - samples, the sampler thread, window sampling and the trace reduction (see telemetry.h). */
#include "bench/telemetry.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <time.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "bench/stats.h"

static const char *const field_names[KILN_TF_COUNT] = {
    "power.draw", "memory.used", "temperature.gpu", "fan.speed", "clocks.sm", "clocks.mem",
    "pcie.link.width.current", "pcie.link.gen.current", "power.limit", "enforced.power.limit", "utilization.gpu",
};

static const struct {
    const char *name;
    uint64_t bit;
} reasons[KILN_TR_COUNT] = {
    {"sw_power_cap", 0x004}, {"hw_slowdown", 0x008}, {"sw_thermal_slowdown", 0x020},
    {"hw_thermal_slowdown", 0x040}, {"hw_power_brake_slowdown", 0x080}, {"sync_boost", 0x010},
};

const char *kiln_tfield_name(kiln_tfield f) { return (unsigned)f < KILN_TF_COUNT ? field_names[f] : "?"; }
const char *kiln_treason_name(kiln_treason r) { return (unsigned)r < KILN_TR_COUNT ? reasons[r].name : "?"; }
uint64_t kiln_treason_bit(kiln_treason r) { return (unsigned)r < KILN_TR_COUNT ? reasons[r].bit : 0; }

void kiln_tsample_clear(kiln_tsample *s) {
    s->t = 0;
    for (int i = 0; i < KILN_TF_COUNT; i++) s->v[i] = NAN;
    s->mask_ok = false;
    s->mask = 0;
}

void kiln_tcounters_clear(kiln_tcounters *c) {
    c->t = 0;
    c->energy_mj = NAN;
    for (int i = 0; i < KILN_TR_COUNT; i++) c->reason_ns[i] = NAN;
}

/* ---- the sampler thread ---------------------------------------------------------------------------------- */

struct kiln_sampler {
    kiln_sample_fn fn;
    void *ctx;
    double period_s;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* signalled by stop, so the thread does not sleep out its period */
    bool stop;
    kiln_tsample *v;
    size_t n, cap;
};

static void push(kiln_sampler *s, const kiln_tsample *x) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 256;
        kiln_tsample *nv = kiln_realloc(s->v, cap * sizeof *nv);
        if (!nv) return; /* a dropped sample under memory pressure is better than a failed run */
        s->v = nv;
        s->cap = cap;
    }
    s->v[s->n++] = *x;
}

static void *sampler_main(void *arg) {
    kiln_sampler *s = arg;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        pthread_mutex_unlock(&s->mu);
        kiln_tsample x;
        kiln_tsample_clear(&x);
        bool ok = s->fn(s->ctx, &x);
        x.t = kiln_clock_s();
        pthread_mutex_lock(&s->mu);
        if (ok) push(s, &x);
        /* Absolute deadlines: the period does not drift by the time a read takes. */
        long long ns = next.tv_nsec + (long long)(s->period_s * 1e9);
        next.tv_sec += ns / 1000000000LL;
        next.tv_nsec = ns % 1000000000LL;
        while (!s->stop && pthread_cond_timedwait(&s->cv, &s->mu, &next) != ETIMEDOUT) {
        }
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

kiln_sampler *kiln_sampler_start(kiln_sample_fn fn, void *ctx, double period_s, kiln_err *err) {
    if (!fn || !(period_s > 0) || period_s > 3600) {
        KILN_FAIL(err, KILN_E_INVALID, "sampler: a source and a period in (0, 3600] s are required");
        return NULL;
    }
    kiln_sampler *s = kiln_calloc(1, sizeof *s);
    if (!s) {
        KILN_FAIL(err, KILN_E_NOMEM, "sampler: out of memory");
        return NULL;
    }
    s->fn = fn;
    s->ctx = ctx;
    s->period_s = period_s;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&s->mu, NULL);
    if (pthread_create(&s->thread, NULL, sampler_main, s) != 0) {
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
        kiln_free(s);
        KILN_FAIL(err, KILN_E_INTERNAL, "sampler: cannot start a thread");
        return NULL;
    }
    return s;
}

size_t kiln_sampler_stop(kiln_sampler *s, kiln_tsample **samples) {
    *samples = NULL;
    if (!s) return 0;
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    size_t n = s->n;
    *samples = s->v;
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    kiln_free(s);
    return n;
}

size_t kiln_sample_window(kiln_sample_fn fn, void *ctx, size_t count, double period_s, kiln_tsample **samples) {
    *samples = NULL;
    if (!fn || count == 0) return 0;
    kiln_tsample *v = kiln_calloc(count, sizeof *v);
    if (!v) return 0;
    size_t n = 0;
    double start = kiln_clock_s();
    for (size_t i = 0; i < count; i++) {
        double due = start + (double)i * period_s, now = kiln_clock_s();
        if (due > now) {
            struct timespec ts = {(time_t)(due - now), (long)(fmod(due - now, 1.0) * 1e9)};
            nanosleep(&ts, NULL);
        }
        kiln_tsample x;
        kiln_tsample_clear(&x);
        if (fn(ctx, &x)) {
            x.t = kiln_clock_s();
            v[n++] = x;
        }
    }
    if (n == 0) {
        kiln_free(v);
        return 0;
    }
    *samples = v;
    return n;
}

/* ---- reduction ------------------------------------------------------------------------------------------- */

static json_t *num_or_null(double d) { return isnan(d) ? json_null() : json_real(d); }

json_t *kiln_reduction_json(const double *x, size_t count) {
    kiln_reduction r = kiln_reduce(x, count);
    return json_pack("{s:I,s:o,s:o,s:o,s:o}", "n", (json_int_t)r.n, "min", num_or_null(r.min), "median",
                     num_or_null(r.median), "max", num_or_null(r.max), "mean", num_or_null(r.mean));
}

json_t *kiln_telemetry_reduce(const kiln_tsample *samples, size_t n, const kiln_tcounters *c0,
                              const kiln_tcounters *c1) {
    json_t *out = json_object();
    double *x = kiln_calloc(n ? n : 1, sizeof *x);
    if (!out || !x) {
        json_decref(out);
        kiln_free(x);
        return NULL;
    }
    json_object_set_new(out, "samples", json_integer((json_int_t)n));
    for (int f = 0; f < KILN_TF_COUNT; f++) {
        for (size_t i = 0; i < n; i++) x[i] = samples[i].v[f];
        json_object_set_new(out, field_names[f], kiln_reduction_json(x, n));
    }
    kiln_free(x);
    json_t *thr = json_object(), *src = json_object();
    double dt = (c0 && c1) ? c1->t - c0->t : NAN;
    for (int r = 0; r < KILN_TR_COUNT; r++) {
        double frac = NAN;
        const char *how = "unsupported";
        if (c0 && c1 && !isnan(c0->reason_ns[r]) && !isnan(c1->reason_ns[r]) && dt > 0 &&
            c1->reason_ns[r] >= c0->reason_ns[r]) {
            frac = (c1->reason_ns[r] - c0->reason_ns[r]) / (dt * 1e9);
            if (frac > 1) frac = 1;
            how = "counter";
        } else {
            size_t seen = 0, set = 0;
            for (size_t i = 0; i < n; i++) {
                if (!samples[i].mask_ok) continue;
                seen++;
                if (samples[i].mask & reasons[r].bit) set++;
            }
            if (seen) {
                frac = (double)set / (double)seen;
                how = "sampled";
            }
        }
        json_object_set_new(thr, reasons[r].name, num_or_null(frac));
        json_object_set_new(src, reasons[r].name, json_string(how));
    }
    json_object_set_new(thr, "source", src);
    json_object_set_new(out, "throttle", thr);
    double energy = NAN;
    if (c0 && c1 && !isnan(c0->energy_mj) && !isnan(c1->energy_mj) && c1->energy_mj >= c0->energy_mj)
        energy = (c1->energy_mj - c0->energy_mj) / 1000.0;
    json_object_set_new(out, "energy_j", num_or_null(energy));
    double window = NAN;
    if (c0 && c1 && dt >= 0) window = dt;
    else if (n >= 2) window = samples[n - 1].t - samples[0].t;
    json_object_set_new(out, "window_s", num_or_null(window));
    return out;
}

json_t *kiln_telemetry_series(const kiln_tsample *samples, size_t n, double t_origin) {
    static const kiln_tfield fields[] = {KILN_TF_POWER_W, KILN_TF_SM_MHZ, KILN_TF_TEMP_C, KILN_TF_UTIL_GPU};
    json_t *out = json_object(), *t = json_array();
    if (!out || !t) {
        json_decref(out);
        json_decref(t);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) json_array_append_new(t, json_real(samples[i].t - t_origin));
    json_object_set_new(out, "t", t);
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
        json_t *col = json_array();
        for (size_t i = 0; i < n; i++) json_array_append_new(col, num_or_null(samples[i].v[fields[f]]));
        json_object_set_new(out, field_names[fields[f]], col);
    }
    return out;
}

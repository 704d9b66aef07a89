/* metrics.c - GET /metrics in Prometheus' text format (version 0.0.4): the queue from the store (so on a shared
 * store every node reports the cluster's queue), and this node's own work since it started: jobs finished by
 * state, images made, stage latencies as histograms (queue wait = claimed - submitted, run = finished -
 * claimed, engine = the engine's own time for the job's forward), images per second over the last minute, and
 * which model files the engine last used (resident until /free unloads them). */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "server/server_internal.h"

static const double buckets[] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
#define NB (int)(sizeof buckets / sizeof buckets[0])

typedef struct histo {
    long long count[NB + 1]; /* per bucket (not cumulative); the last is +Inf */
    double sum;
    long long n;
} histo;

enum { H_QUEUE, H_RUN, H_ENGINE, H_COUNT };
static const char *const h_names[H_COUNT] = {"kiln_job_queue_wait_seconds", "kiln_job_run_seconds",
                                             "kiln_engine_seconds"};
static const char *const h_help[H_COUNT] = {"time from submission to a worker claiming the job",
                                            "time from claim to the committed finish",
                                            "the engine's time for the job's images (text encoding to decode)"};

struct kiln_metrics {
    pthread_mutex_t mu;
    long long finished[KILN_JOB_STATE_COUNT];
    long long images;
    histo h[H_COUNT];
    long long per_sec[60]; /* images finished in each of the last 60 wall seconds (ring by second) */
    long long sec_of[60];
    char models[3][256];   /* unet, clip, vae of the last successful job; "" after /free */
};

kiln_metrics *kiln_metrics_new(void) {
    kiln_metrics *m = kiln_calloc(1, sizeof *m);
    if (m) pthread_mutex_init(&m->mu, NULL);
    return m;
}

void kiln_metrics_free(kiln_metrics *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    kiln_free(m);
}

static void observe(histo *h, double v) {
    if (v < 0) v = 0;
    int i = 0;
    while (i < NB && v > buckets[i]) i++;
    h->count[i]++;
    h->sum += v;
    h->n++;
}

void kiln_metrics_job(kiln_metrics *m, const kiln_job *job, kiln_job_state final, int images, double engine_ms,
                      json_t *graph) {
    if (!m) return;
    double now_s = kiln_clock_wall_s();
    pthread_mutex_lock(&m->mu);
    if ((unsigned)final < KILN_JOB_STATE_COUNT) m->finished[final]++;
    if (job->started_ms >= job->created_ms && job->created_ms > 0)
        observe(&m->h[H_QUEUE], (double)(job->started_ms - job->created_ms) / 1000.0);
    if (job->started_ms > 0) observe(&m->h[H_RUN], now_s - (double)job->started_ms / 1000.0);
    if (final == KILN_JOB_SUCCEEDED) {
        if (engine_ms > 0) observe(&m->h[H_ENGINE], engine_ms / 1000.0);
        m->images += images;
        long long sec = (long long)now_s;
        int slot = (int)(sec % 60);
        if (m->sec_of[slot] != sec) m->sec_of[slot] = sec, m->per_sec[slot] = 0;
        m->per_sec[slot] += images;
        const char *key;
        json_t *node;
        json_object_foreach(graph, key, node) { /* the loaders name the files the engine now holds */
            const char *cls = json_string_value(json_object_get(node, "class_type"));
            json_t *in = json_object_get(node, "inputs");
            int k = -1;
            const char *f = NULL;
            if (cls && !strcmp(cls, "UNETLoader")) k = 0, f = json_string_value(json_object_get(in, "unet_name"));
            if (cls && !strcmp(cls, "CLIPLoader")) k = 1, f = json_string_value(json_object_get(in, "clip_name"));
            if (cls && !strcmp(cls, "VAELoader")) k = 2, f = json_string_value(json_object_get(in, "vae_name"));
            if (k >= 0 && f) snprintf(m->models[k], sizeof m->models[k], "%s", f);
        }
    }
    pthread_mutex_unlock(&m->mu);
}

void kiln_metrics_unloaded(kiln_metrics *m) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    memset(m->models, 0, sizeof m->models);
    pthread_mutex_unlock(&m->mu);
}

typedef struct out {
    char *buf;
    size_t len, cap;
    bool bad;
} out;

static void put(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out *o, const char *fmt, ...) {
    if (o->bad) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            o->bad = true;
            return;
        }
        if ((size_t)n < o->cap - o->len) {
            o->len += (size_t)n;
            return;
        }
        size_t cap = o->cap * 2 + (size_t)n;
        char *nb = kiln_realloc(o->buf, cap);
        if (!nb) {
            o->bad = true;
            return;
        }
        o->buf = nb;
        o->cap = cap;
    }
}

/* A label value: Prometheus escapes \, " and newline; model names with other bytes are refused at load. */
static void label(out *o, const char *s) {
    for (; *s; s++) put(o, *s == '\\' ? "\\\\" : *s == '"' ? "\\\"" : *s == '\n' ? "\\n" : "%c", *s);
}

static enum MHD_Result get_metrics(kiln_req *r) {
    kiln_server *srv = r->srv;
    kiln_metrics *m = srv->metrics;
    out o = {.buf = kiln_malloc(8192), .cap = 8192};
    if (!o.buf) return MHD_NO;
    o.buf[0] = 0;
    int queued = kiln_store_count(srv->store, KILN_JOB_QUEUED);
    put(&o, "# HELP kiln_queue_depth Jobs waiting in the queue (the whole queue on a shared store).\n"
            "# TYPE kiln_queue_depth gauge\nkiln_queue_depth %d\n", queued);
    put(&o, "# HELP kiln_jobs Jobs in the store by state.\n# TYPE kiln_jobs gauge\n");
    for (int s = 0; s < KILN_JOB_STATE_COUNT; s++)
        put(&o, "kiln_jobs{state=\"%s\"} %d\n", kiln_job_state_name((kiln_job_state)s),
            kiln_store_count(srv->store, (kiln_job_state)s));
    char cur[64];
    put(&o, "# HELP kiln_worker_busy 1 while this node's worker runs a job.\n# TYPE kiln_worker_busy gauge\n"
            "kiln_worker_busy %d\n", kiln_worker_current(srv->worker, cur) ? 1 : 0);
    pthread_mutex_lock(&m->mu);
    put(&o, "# HELP kiln_jobs_finished_total Jobs this node finished since it started, by final state.\n"
            "# TYPE kiln_jobs_finished_total counter\n");
    for (int s = KILN_JOB_SUCCEEDED; s < KILN_JOB_STATE_COUNT; s++)
        if (s != KILN_JOB_CANCELLED)
            put(&o, "kiln_jobs_finished_total{state=\"%s\"} %lld\n", kiln_job_state_name((kiln_job_state)s),
                m->finished[s]);
    put(&o, "# HELP kiln_images_total Images this node made since it started.\n# TYPE kiln_images_total counter\n"
            "kiln_images_total %lld\n", m->images);
    long long now = (long long)kiln_clock_wall_s(), last = 0;
    for (int i = 0; i < 60; i++)
        if (m->sec_of[i] > now - 60 && m->sec_of[i] <= now) last += m->per_sec[i];
    put(&o, "# HELP kiln_images_per_second Images this node made per second over the last 60 s.\n"
            "# TYPE kiln_images_per_second gauge\nkiln_images_per_second %.4f\n", (double)last / 60.0);
    for (int k = 0; k < H_COUNT; k++) {
        const histo *h = &m->h[k];
        put(&o, "# HELP %s Seconds: %s.\n# TYPE %s histogram\n", h_names[k], h_help[k], h_names[k]);
        long long cum = 0;
        for (int i = 0; i < NB; i++) {
            cum += h->count[i];
            put(&o, "%s_bucket{le=\"%g\"} %lld\n", h_names[k], buckets[i], cum);
        }
        cum += h->count[NB];
        put(&o, "%s_bucket{le=\"+Inf\"} %lld\n%s_sum %.6f\n%s_count %lld\n", h_names[k], cum, h_names[k], h->sum,
            h_names[k], h->n);
    }
    static const char *const kinds[3] = {"diffusion_model", "text_encoder", "vae"};
    put(&o, "# HELP kiln_model_resident 1 for each model file the engine holds (the last job's, until /free).\n"
            "# TYPE kiln_model_resident gauge\n");
    for (int k = 0; k < 3; k++) {
        if (!m->models[k][0]) continue;
        put(&o, "kiln_model_resident{kind=\"%s\",file=\"", kinds[k]);
        label(&o, m->models[k]);
        put(&o, "\"} 1\n");
    }
    pthread_mutex_unlock(&m->mu);
    if (o.bad) {
        kiln_free(o.buf);
        return MHD_NO;
    }
    enum MHD_Result res = kiln_reply_text(r, 200, "text/plain; version=0.0.4; charset=utf-8", o.buf);
    kiln_free(o.buf);
    return res;
}

bool kiln_routes_metrics(kiln_req *r, enum MHD_Result *res) {
    if (strcmp(r->url, "/metrics") || strcmp(r->method, "GET")) return false;
    *res = get_metrics(r);
    return true;
}

/* serve_load.c - `kiln bench serve`: the request mix, the arrival schedules, the open-loop and closed-loop
 * senders, the unloaded baseline and the report (see serve_load.h; report format in docs/bench-report.md). */
#include "bench/serve_load.h"

#include <curl/curl.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "bench/stats.h"
#include "bench/workflow.h"

#define MAX_PROMPT_BYTES 4000
#define THREAD_STACK (1u << 20)
static const char default_prompt[] = "a lighthouse on a cliff at dusk, oil painting";

kiln_serve_cfg kiln_serve_cfg_default(void) {
    return (kiln_serve_cfg){.api = KILN_SERVE_API_COMFY, .requests = 32, .arrival = KILN_ARRIVAL_POISSON,
                            .seed = 1, .warmup = 3, .slo_scale = 3.0, .timeout_s = 600, .max_in_flight = 512};
}

/* splitmix64: a small seeded generator, so a seed gives the same mix and schedule on every machine. */
static uint64_t next_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double next_unit(uint64_t *s) { return (double)(next_u64(s) >> 11) * 0x1.0p-53; } /* [0, 1) */

/* ---- prompts -------------------------------------------------------------------------------------------- */

typedef struct prompts {
    char **p;
    size_t n;
} prompts;

static void prompts_free(prompts *ps) {
    for (size_t i = 0; i < ps->n; i++) kiln_free(ps->p[i]);
    kiln_free(ps->p);
}

static kiln_status prompts_load(const char *path, prompts *ps, kiln_err *err) {
    memset(ps, 0, sizeof *ps);
    FILE *f = fopen(path, "r");
    if (!f) return KILN_FAIL(err, errno == ENOENT ? KILN_E_NOT_FOUND : KILN_E_IO, "prompts %s: %s", path, strerror(errno));
    char line[MAX_PROMPT_BYTES + 2];
    size_t cap = 0, lineno = 0;
    kiln_status st = KILN_OK;
    while (st == KILN_OK && fgets(line, sizeof line, f)) {
        lineno++;
        size_t l = strlen(line);
        if (l == sizeof line - 1 && line[l - 1] != '\n' && !feof(f)) {
            st = KILN_FAIL(err, KILN_E_LIMIT, "prompts %s:%zu: a prompt over %d bytes", path, lineno, MAX_PROMPT_BYTES);
            break;
        }
        while (l && (line[l - 1] == '\n' || line[l - 1] == '\r')) line[--l] = 0;
        if (!l) continue;
        if (ps->n == KILN_SERVE_MAX_PROMPTS) {
            st = KILN_FAIL(err, KILN_E_LIMIT, "prompts %s: over %d prompts", path, KILN_SERVE_MAX_PROMPTS);
            break;
        }
        if (ps->n == cap) {
            cap = cap ? 2 * cap : 64;
            char **np = kiln_realloc(ps->p, cap * sizeof *np);
            if (!np) {
                st = KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
                break;
            }
            ps->p = np;
        }
        if (!(ps->p[ps->n] = kiln_strdup(line))) st = KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
        else ps->n++;
    }
    if (st == KILN_OK && ferror(f)) st = KILN_FAIL(err, KILN_E_IO, "prompts %s: read error", path);
    fclose(f);
    if (st == KILN_OK && ps->n == 0) st = KILN_FAIL(err, KILN_E_INVALID, "prompts %s: no prompt in the file", path);
    if (st != KILN_OK) prompts_free(ps);
    return st;
}

/* ---- one request, the senders ---------------------------------------------------------------------------- */

typedef struct runner runner;

typedef struct slot {
    runner *run;
    kiln_serve_req rq;
    int prompt_index;
    double sched, sent, done; /* seconds from the run's origin */
    kiln_serve_res res;
} slot;

struct runner {
    const kiln_serve_cfg *cfg;
    const json_t *graph;
    slot *slots;
    size_t n, next;
    double origin;
    int in_flight;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static void sleep_until(double t) {
    for (;;) {
        double d = t - kiln_clock_s();
        if (d <= 0) return;
        struct timespec ts = {(time_t)d, (long)((d - floor(d)) * 1e9)};
        nanosleep(&ts, NULL);
    }
}

static void send_one(slot *s) {
    kiln_serve_client *c = NULL;
    kiln_err err = {0};
    if (kiln_serve_client_open(s->run->cfg, s->run->graph, &c, &err) != KILN_OK) {
        s->sent = s->done = kiln_clock_s() - s->run->origin;
        memset(&s->res, 0, sizeof s->res);
        s->res.exec_s = NAN;
        snprintf(s->res.error, sizeof s->res.error, "%s", err.msg);
        return;
    }
    s->sent = kiln_clock_s() - s->run->origin;
    kiln_serve_client_send(c, &s->rq, &s->res);
    s->done = kiln_clock_s() - s->run->origin;
    kiln_serve_client_close(c);
}

static void *open_loop_thread(void *p) {
    slot *s = p;
    send_one(s);
    pthread_mutex_lock(&s->run->mu);
    s->run->in_flight--;
    pthread_cond_signal(&s->run->cv);
    pthread_mutex_unlock(&s->run->mu);
    return NULL;
}

/* Open loop: request i leaves at origin + sched[i] whatever the others are doing; only the in-flight cap can
 * hold it back, and then its send lag (sent - sched) says so in the report. */
static void run_open_loop(runner *r) {
    pthread_t *th = kiln_calloc(r->n, sizeof *th);
    bool *started = kiln_calloc(r->n, sizeof *started);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, THREAD_STACK);
    for (size_t i = 0; i < r->n; i++) {
        slot *s = &r->slots[i];
        sleep_until(r->origin + s->sched);
        pthread_mutex_lock(&r->mu);
        while (r->in_flight >= r->cfg->max_in_flight) pthread_cond_wait(&r->cv, &r->mu);
        r->in_flight++;
        pthread_mutex_unlock(&r->mu);
        if (th && started && pthread_create(&th[i], &attr, open_loop_thread, s) == 0) {
            started[i] = true;
        } else { /* no thread: send inline (late for the next ones, and the lag shows it) */
            open_loop_thread(s);
        }
    }
    for (size_t i = 0; i < r->n; i++)
        if (started && started[i]) pthread_join(th[i], NULL);
    pthread_attr_destroy(&attr);
    kiln_free(th);
    kiln_free(started);
}

static void *closed_loop_thread(void *p) {
    runner *r = p;
    for (;;) {
        pthread_mutex_lock(&r->mu);
        size_t i = r->next++;
        pthread_mutex_unlock(&r->mu);
        if (i >= r->n) return NULL;
        r->slots[i].sched = kiln_clock_s() - r->origin; /* closed loop: due when a client is free */
        send_one(&r->slots[i]);
    }
}

static void run_closed_loop(runner *r, int clients) {
    pthread_t th[KILN_SERVE_MAX_LIST * 16];
    int nt = clients < (int)(sizeof th / sizeof th[0]) ? clients : (int)(sizeof th / sizeof th[0]);
    int started = 0;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, THREAD_STACK);
    for (int k = 0; k < nt; k++)
        if (pthread_create(&th[started], &attr, closed_loop_thread, r) == 0) started++;
    if (!started) closed_loop_thread(r);
    for (int k = 0; k < started; k++) pthread_join(th[k], NULL);
    pthread_attr_destroy(&attr);
}

/* ---- the mix and the schedules ---------------------------------------------------------------------------- */

static void draw_mix(const kiln_serve_cfg *cfg, const int *widths, const int *heights, size_t ns,
                     const int *steps, size_t nst, const prompts *ps, slot *slots, size_t n) {
    uint64_t rng = cfg->seed;
    for (size_t i = 0; i < n; i++) {
        size_t si = ns > 1 ? next_u64(&rng) % ns : 0, ti = nst > 1 ? next_u64(&rng) % nst : 0;
        size_t pi = ps->n > 1 ? next_u64(&rng) % ps->n : 0;
        slots[i].rq = (kiln_serve_req){.width = widths[si], .height = heights[si], .steps = nst ? steps[ti] : 0,
                                       .prompt = ps->n ? ps->p[pi] : default_prompt,
                                       .seed = (long long)((cfg->seed + i) & 0xFFFFFFFFFFFFull), .index = (int)i};
        slots[i].prompt_index = ps->n ? (int)pi : 0;
    }
}

/* Poisson: exponential gaps of mean 1/rate, the first request at 0; constant: i / rate. */
static void schedule(kiln_arrival a, double rate, uint64_t seed, slot *slots, size_t n) {
    uint64_t rng = seed;
    double t = 0;
    for (size_t i = 0; i < n; i++) {
        if (a == KILN_ARRIVAL_CONSTANT) t = (double)i / rate;
        else if (i > 0) t += -log1p(-next_unit(&rng)) / rate;
        slots[i].sched = t;
    }
}

/* ---- the report ---------------------------------------------------------------------------------------------- */

static json_t *num_or_null(double v) { return isnan(v) ? json_null() : json_real(v); }

static json_t *request_json(const slot *s, double unit_s, double scale) {
    double lat = s->done - s->sent;
    double deadline = unit_s * kiln_serve_patches(s->rq.width, s->rq.height, s->rq.steps) * scale;
    bool ok = s->res.ok;
    double qw = ok && !isnan(s->res.exec_s) ? fmax(0.0, lat - s->res.exec_s) : NAN;
    return json_pack("{s:i,s:f,s:f,s:f,s:f,s:o,s:o,s:i,s:i,s:i,s:i,s:I,s:b,s:o,s:s,s:o,s:b}", "index", s->rq.index,
                     "scheduled_s", s->sched, "sent_s", s->sent, "done_s", s->done, "latency_s", lat, "exec_s",
                     num_or_null(ok ? s->res.exec_s : NAN), "queue_wait_s", num_or_null(qw), "width", s->rq.width,
                     "height", s->rq.height, "steps", s->rq.steps, "prompt_index", s->prompt_index, "seed",
                     (json_int_t)s->rq.seed, "ok", ok, "error", ok ? json_null() : json_string(s->res.error), "id",
                     s->res.id, "deadline_s", num_or_null(deadline), "slo_met", ok && !isnan(deadline) && lat <= deadline);
}

static void iso_now(char *buf, size_t cap) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static const char *arrival_name(kiln_arrival a) {
    return a == KILN_ARRIVAL_POISSON ? "poisson" : a == KILN_ARRIVAL_CONSTANT ? "constant" : "concurrency";
}

static json_t *config_json(const kiln_serve_cfg *cfg, const int *w, const int *h, size_t ns, const int *st,
                           size_t nst, size_t nprompts) {
    json_t *sizes = json_array(), *steps = json_array(), *loads = json_array();
    for (size_t i = 0; i < ns; i++) {
        char b[32];
        snprintf(b, sizeof b, "%dx%d", w[i], h[i]);
        json_array_append_new(sizes, json_string(b));
    }
    for (size_t i = 0; i < nst; i++) json_array_append_new(steps, json_integer(st[i]));
    for (size_t i = 0; i < cfg->n_runs; i++)
        json_array_append_new(loads, cfg->arrival == KILN_ARRIVAL_CONCURRENCY ? json_integer(cfg->concurrency[i])
                                                                              : json_real(cfg->rates[i]));
    json_t *c = json_object();
    if (!c) return NULL;
    json_object_set_new(c, "api", json_string(cfg->api == KILN_SERVE_API_COMFY ? "comfy" : "openai"));
    json_object_set_new(c, "graph", cfg->graph ? json_string(cfg->graph) : json_null());
    json_object_set_new(c, "model", cfg->model ? json_string(cfg->model) : json_null());
    json_object_set_new(c, "prompts_file", cfg->prompts_file ? json_string(cfg->prompts_file) : json_null());
    json_object_set_new(c, "prompt_count", json_integer((json_int_t)nprompts));
    json_object_set_new(c, "requests", json_integer(cfg->requests));
    json_object_set_new(c, "arrival", json_string(arrival_name(cfg->arrival)));
    json_object_set_new(c, "loads", loads);
    json_object_set_new(c, "sizes", sizes);
    json_object_set_new(c, "steps", steps); /* [] = not sent: the server's default, counted as 1 for the SLO */
    json_object_set_new(c, "seed", json_integer((json_int_t)(cfg->seed & 0xFFFFFFFFFFFFull)));
    json_object_set_new(c, "warmup", json_integer(cfg->warmup));
    json_object_set_new(c, "slo_scale", json_real(cfg->slo_scale));
    json_object_set_new(c, "timeout_s", json_real(cfg->timeout_s));
    json_object_set_new(c, "max_in_flight", json_integer(cfg->max_in_flight));
    return c;
}

static kiln_status check_cfg(const kiln_serve_cfg *c, kiln_err *err) {
    if (!c->url) return KILN_FAIL(err, KILN_E_INVALID, "bench serve: --url is required");
    if (c->api == KILN_SERVE_API_COMFY && !c->graph)
        return KILN_FAIL(err, KILN_E_INVALID, "bench serve: --graph is required for a ComfyUI-API target");
    if (c->requests < 1 || c->requests > KILN_SERVE_MAX_REQUESTS)
        return KILN_FAIL(err, KILN_E_INVALID, "bench serve: --requests must be from 1 to %d", KILN_SERVE_MAX_REQUESTS);
    if (c->n_runs < 1 || c->n_runs > KILN_SERVE_MAX_LIST)
        return KILN_FAIL(err, KILN_E_INVALID, "bench serve: give --rate or --concurrency (1 to %d values)", KILN_SERVE_MAX_LIST);
    for (size_t i = 0; i < c->n_runs; i++) {
        if (c->arrival == KILN_ARRIVAL_CONCURRENCY ? (c->concurrency[i] < 1 || c->concurrency[i] > 1024)
                                                   : !(c->rates[i] > 0 && c->rates[i] <= 1e6))
            return KILN_FAIL(err, KILN_E_INVALID, "bench serve: a rate must be in (0, 1e6], a concurrency from 1 to 1024");
    }
    if (c->warmup < 1 || c->warmup > 1000)
        return KILN_FAIL(err, KILN_E_INVALID, "bench serve: --warmup must be from 1 to 1000 (the SLO baseline)");
    if (!(c->slo_scale > 0) || !(c->timeout_s > 0) || c->max_in_flight < 1)
        return KILN_FAIL(err, KILN_E_INVALID, "bench serve: --slo-scale, --timeout and --max-in-flight must be positive");
    for (size_t i = 0; i < c->n_sizes; i++)
        if (c->widths[i] < 16 || c->heights[i] < 16 || c->widths[i] > 16384 || c->heights[i] > 16384)
            return KILN_FAIL(err, KILN_E_INVALID, "bench serve: size %dx%d is outside 16..16384", c->widths[i], c->heights[i]);
    for (size_t i = 0; i < c->n_steps; i++)
        if (c->steps[i] < 1 || c->steps[i] > 10000)
            return KILN_FAIL(err, KILN_E_INVALID, "bench serve: steps %d is outside 1..10000", c->steps[i]);
    return KILN_OK;
}

kiln_status kiln_bench_serve(const kiln_serve_cfg *cfg, json_t **report, kiln_err *err) {
    *report = NULL;
    KILN_TRY(check_cfg(cfg, err));
    curl_global_init(CURL_GLOBAL_DEFAULT);
    double wall0 = kiln_clock_s();
    kiln_workflow wf = {0};
    prompts ps = {0};
    slot *slots = NULL;
    json_t *rep = NULL;
    kiln_status st = KILN_OK;
    int widths[KILN_SERVE_MAX_LIST], heights[KILN_SERVE_MAX_LIST], steps[KILN_SERVE_MAX_LIST];
    size_t ns = cfg->n_sizes, nst = cfg->n_steps;
    memcpy(widths, cfg->widths, sizeof widths);
    memcpy(heights, cfg->heights, sizeof heights);
    memcpy(steps, cfg->steps, sizeof steps);
    if (cfg->api == KILN_SERVE_API_COMFY) {
        if ((st = kiln_workflow_load(cfg->graph, &wf, err)) != KILN_OK) goto done;
        if (!ns) {
            widths[0] = (int)json_integer_value(json_object_get(wf.knobs, "width"));
            heights[0] = (int)json_integer_value(json_object_get(wf.knobs, "height"));
            ns = 1;
        }
        if (!nst) {
            steps[0] = (int)json_integer_value(json_object_get(wf.knobs, "steps"));
            nst = 1;
        }
    } else if (!ns) {
        widths[0] = heights[0] = 1024;
        ns = 1;
    }
    if (cfg->prompts_file && (st = prompts_load(cfg->prompts_file, &ps, err)) != KILN_OK) goto done;
    size_t n = (size_t)cfg->requests, nw = (size_t)cfg->warmup;
    slots = kiln_calloc(n > nw ? n : nw, sizeof *slots);
    if (!slots) {
        st = KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
        goto done;
    }
    runner r = {.cfg = cfg, .graph = wf.graph, .slots = slots};
    pthread_mutex_init(&r.mu, NULL);
    pthread_cond_init(&r.cv, NULL);

    /* The unloaded baseline: the first requests of the mix, one at a time. */
    draw_mix(cfg, widths, heights, ns, steps, nst, &ps, slots, n > nw ? n : nw);
    double *units = kiln_calloc(nw, sizeof *units);
    json_t *base = json_array();
    const char *first_error = NULL;
    for (size_t i = 0; i < nw && units && base; i++) {
        slot *s = &slots[i];
        s->run = &r;
        s->rq.tag = "warmup";
        r.origin = kiln_clock_s();
        send_one(s);
        units[i] = s->res.ok ? (s->done - s->sent) / kiln_serve_patches(s->rq.width, s->rq.height, s->rq.steps) : NAN;
        if (!s->res.ok && !first_error) first_error = s->res.error;
        json_array_append_new(base, json_pack("{s:i,s:i,s:i,s:i,s:f,s:b,s:o,s:o}", "index", (int)i, "width",
                                              s->rq.width, "height", s->rq.height, "steps", s->rq.steps, "latency_s",
                                              s->done - s->sent, "ok", s->res.ok, "error",
                                              s->res.ok ? json_null() : json_string(s->res.error), "unit_s",
                                              num_or_null(units[i])));
    }
    double unit = units ? kiln_median(units, nw) : NAN;
    kiln_free(units);
    if (isnan(unit)) {
        st = KILN_FAIL(err, KILN_E_IO, "bench serve: every warm-up request failed, so there is no unloaded time (%s)",
                       first_error ? first_error : "out of memory");
        json_decref(base);
        goto runs_done;
    }
    char at[32];
    iso_now(at, sizeof at);
    rep = json_pack("{s:s,s:s,s:{s:s,s:s},s:s,s:{s:s,s:s},s:o,s:{s:o,s:f,s:s},s:[]}", "schema", "kiln-bench-report/1",
                    "kind", "serve-load", "tool", "name", "kiln", "version", KILN_VERSION, "at", at, "target", "kind",
                    cfg->api == KILN_SERVE_API_COMFY ? "comfyui-http" : "openai-images", "url", cfg->url, "config",
                    config_json(cfg, widths, heights, ns, steps, nst, ps.n ? ps.n : 1), "baseline", "requests", base,
                    "unit_s", unit, "definition",
                    "unit_s = median over the warm-up requests (sent one at a time) of latency / (max(W*H/256, 1) * "
                    "max(steps, 1)); deadline = unit_s * max(W*H/256, 1) * max(steps, 1) * slo_scale (vLLM-Omni)",
                    "runs");
    if (!rep) {
        st = KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
        goto runs_done;
    }
    for (size_t k = 0; k < cfg->n_runs; k++) {
        bool closed = cfg->arrival == KILN_ARRIVAL_CONCURRENCY;
        double rate = closed ? NAN : cfg->rates[k];
        draw_mix(cfg, widths, heights, ns, steps, nst, &ps, slots, n);
        char label[64];
        if (closed) snprintf(label, sizeof label, "concurrency-%d", cfg->concurrency[k]);
        else snprintf(label, sizeof label, "%s-%g/s", arrival_name(cfg->arrival), rate);
        for (size_t i = 0; i < n; i++) {
            slots[i].run = &r;
            slots[i].rq.tag = label;
        }
        if (!closed) schedule(cfg->arrival, rate, cfg->seed ^ (0xD1B54A32D192ED03ull * (k + 1)), slots, n);
        r.n = n;
        r.next = 0;
        r.in_flight = 0;
        r.origin = kiln_clock_s() + 0.01;
        fprintf(stderr, "kiln bench serve: run %s, %zu requests\n", label, n);
        if (closed) run_closed_loop(&r, cfg->concurrency[k]);
        else run_open_loop(&r);
        json_t *reqs = json_array();
        for (size_t i = 0; i < n && reqs; i++) json_array_append_new(reqs, request_json(&slots[i], unit, cfg->slo_scale));
        json_t *sum = reqs ? kiln_serve_summary(reqs, unit, cfg->slo_scale, rate) : NULL;
        json_t *run = json_pack("{s:s,s:s,s:o,s:o,s:o,s:o}", "label", label, "arrival", arrival_name(cfg->arrival),
                                "rate_rps", num_or_null(rate), "concurrency",
                                closed ? json_integer(cfg->concurrency[k]) : json_null(), "requests",
                                reqs ? reqs : json_array(), "summary", sum ? sum : json_object());
        if (!run || !sum || json_array_append_new(json_object_get(rep, "runs"), run)) {
            st = KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
            break;
        }
    }
    if (rep) json_object_set_new(rep, "run_seconds_wall", json_real(kiln_clock_s() - wall0));
runs_done:
    pthread_mutex_destroy(&r.mu);
    pthread_cond_destroy(&r.cv);
done:
    kiln_free(slots);
    prompts_free(&ps);
    kiln_workflow_free(&wf);
    *report = rep;
    return st;
}

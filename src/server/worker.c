/* worker.c - the thread that runs jobs from the durable queue, one at a time, and reports ComfyUI's messages.
 *
 * A job's life here: claim (QUEUED -> RUNNING, committed), parse the stored graph again (models may have changed
 * since submission), execute, then one committed finish (SUCCEEDED | FAILED | INTERRUPTED) carrying the outputs
 * and the history messages. Progress goes to the WebSocket hub as it happens; nothing here depends on the HTTP
 * connection that submitted the job still being open.
 *
 * Shutdown while a job runs: the executor is asked to stop and the job is left RUNNING in the store, so the
 * next server recovers it to QUEUED and runs it again (an accepted job is never lost, never reported as done
 * when it was not). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "server/server_internal.h"

struct kiln_worker {
    kiln_server *srv;
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    bool stop;
    atomic_bool interrupt;
    atomic_bool stopping;
    char current[64];
    /* the running job's message context */
    const char *client_id;
    json_t *messages;
    const char *prompt_id;
    const kiln_graph *graph;
    json_t *executed; /* node ids that ran */
};

static int64_t now_ms(void) { return (int64_t)(kiln_clock_wall_s() * 1000.0); }

/* Sends a message to the job's client and, for the prompt-level events, records it in the history. */
static void emit(kiln_worker *w, const char *type, json_t *data, bool record) {
    if (record) json_array_append_new(w->messages, json_pack("[s, O]", type, data));
    kiln_ws_send(w->srv->hub, w->client_id, type, data);
}

void kiln_broadcast_status(kiln_server *srv, const char *sid) {
    int pending = kiln_store_count(srv->store, KILN_JOB_QUEUED) + kiln_store_count(srv->store, KILN_JOB_RUNNING);
    json_t *d = json_pack("{s:{s:{s:i}}}", "status", "exec_info", "queue_remaining", pending);
    if (sid) json_object_set_new(d, "sid", json_string(sid));
    kiln_ws_send(srv->hub, NULL, "status", d);
}

static const char *class_of(const kiln_graph *g, const char *node) {
    int i = node ? kiln_graph_find(g, node) : -1;
    return i >= 0 ? g->nodes[i].cls->name : "";
}

static void hook_executing(void *ctx, const char *node) {
    kiln_worker *w = ctx;
    emit(w, "executing", json_pack("{s:s, s:s, s:s}", "node", node, "display_node", node, "prompt_id", w->prompt_id),
         false);
    json_array_append_new(w->executed, json_string(node));
}

static void hook_progress(void *ctx, const char *node, int value, int max) {
    kiln_worker *w = ctx;
    emit(w, "progress", json_pack("{s:i, s:i, s:s, s:s}", "value", value, "max", max, "prompt_id", w->prompt_id,
                                  "node", node), false);
}

static void hook_executed(void *ctx, const char *node, json_t *ui) {
    kiln_worker *w = ctx;
    emit(w, "executed", json_pack("{s:s, s:s, s:O, s:s}", "node", node, "display_node", node, "output", ui,
                                  "prompt_id", w->prompt_id), false);
}

static bool hook_should_stop(void *ctx) {
    kiln_worker *w = ctx;
    return atomic_load(&w->interrupt) || atomic_load(&w->stopping);
}

/* Runs one claimed job to its final state. */
static void run_job(kiln_worker *w, kiln_job *job) {
    kiln_server *srv = w->srv;
    json_error_t je;
    json_t *req = json_loads(job->request, 0, &je);
    json_t *graph_json = json_object_get(req, "prompt");
    w->client_id = job->client_id;
    w->prompt_id = job->id;
    w->messages = json_array();
    w->executed = json_array();
    atomic_store(&w->interrupt, false);

    emit(w, "execution_start", json_pack("{s:s, s:I}", "prompt_id", job->id, "timestamp", (json_int_t)now_ms()), true);
    emit(w, "execution_cached",
         json_pack("{s:[], s:s, s:I}", "nodes", "prompt_id", job->id, "timestamp", (json_int_t)now_ms()), true);

    kiln_graph *g = NULL;
    json_t *errors = NULL, *outputs = NULL;
    kiln_err err = {0};
    char failed[64] = "";
    double engine_ms = 0;
    size_t peak_bytes = 0;
    kiln_status s;
    if (!graph_json) {
        s = KILN_FAIL(&err, KILN_E_FORMAT, "stored job has no graph");
    } else if (kiln_graph_parse(graph_json, &srv->cfg.limits, srv->cfg.models_dir, &g, &errors) != KILN_OK) {
        char *txt = json_dumps(errors, JSON_COMPACT);
        s = KILN_FAIL(&err, KILN_E_INVALID, "the graph no longer validates: %.900s", txt ? txt : "?");
        free(txt);
    } else {
        w->graph = g;
        kiln_exec_env env = {.models_root = srv->cfg.models_dir, .output_dir = srv->output_dir,
                             .engine = srv->cfg.engine, .prompt_id = job->id,
                             .extra_pnginfo = json_object_get(json_object_get(req, "extra_data"), "extra_pnginfo"),
                             .engine_ms = &engine_ms, .peak_memory_bytes = &peak_bytes};
        kiln_exec_hooks hooks = {.ctx = w, .executing = hook_executing, .progress = hook_progress,
                                 .executed = hook_executed, .should_stop = hook_should_stop};
        s = kiln_graph_execute(g, &env, &hooks, &outputs, failed, &err);
    }
    json_decref(errors);

    if (s == KILN_E_CANCELLED && atomic_load(&w->stopping) && !atomic_load(&w->interrupt)) {
        /* server shutdown: leave it RUNNING; the next start re-queues it */
        log_warn("serve: job %s left for the next start (shutdown during the run)", job->id);
    } else {
        kiln_job_state final;
        json_t *error = NULL;
        int64_t t = now_ms();
        if (s == KILN_OK) {
            final = KILN_JOB_SUCCEEDED;
            emit(w, "executing", json_pack("{s:n, s:n, s:s}", "node", "display_node", "prompt_id", job->id), false);
            /* "kiln" is an extension ComfyUI clients ignore: what the engine measured for this prompt */
            emit(w, "execution_success",
                 json_pack("{s:s, s:I, s:{s:f, s:I}}", "prompt_id", job->id, "timestamp", (json_int_t)t, "kiln",
                           "engine_ms", engine_ms, "peak_memory_bytes", (json_int_t)peak_bytes),
                 true);
        } else if (s == KILN_E_CANCELLED) {
            final = KILN_JOB_INTERRUPTED;
            emit(w, "execution_interrupted",
                 json_pack("{s:s, s:s, s:s, s:O, s:I}", "prompt_id", job->id, "node_id", failed, "node_type",
                           g ? class_of(g, failed) : "", "executed", w->executed, "timestamp", (json_int_t)t),
                 true);
        } else {
            final = KILN_JOB_FAILED;
            error = json_pack("{s:s, s:s, s:s, s:s, s:O, s:s, s:[], s:{}, s:{}, s:I}", "prompt_id", job->id,
                              "node_id", failed, "node_type", g ? class_of(g, failed) : "", "exception_message",
                              err.msg, "executed", w->executed, "exception_type", kiln_status_name(s), "traceback",
                              "current_inputs", "current_outputs", "timestamp", (json_int_t)t);
            emit(w, "execution_error", json_incref(error), true);
        }
        char *out_txt = json_dumps(outputs ? outputs : json_object(), JSON_COMPACT);
        char *msg_txt = json_dumps(w->messages, JSON_COMPACT);
        char *err_txt = error ? json_dumps(error, JSON_COMPACT) : NULL;
        kiln_err ferr = {0};
        if (kiln_store_finish(srv->store, job->id, final, out_txt ? out_txt : "{}", msg_txt ? msg_txt : "[]", err_txt,
                              &ferr) != KILN_OK)
            log_error("serve: recording the end of job %s: %s", job->id, ferr.msg);
        free(out_txt);
        free(msg_txt);
        free(err_txt);
        json_decref(error);
        log_info("serve: job %s %s%s%s", job->id, kiln_job_state_name(final), s ? ": " : "", s ? err.msg : "");
    }
    json_decref(outputs);
    json_decref(w->messages);
    json_decref(w->executed);
    kiln_graph_free(g);
    json_decref(req);
    w->graph = NULL;
    w->messages = w->executed = NULL;
    w->client_id = w->prompt_id = NULL;
}

static void *worker_main(void *arg) {
    kiln_worker *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->mu);
        bool stop = w->stop;
        pthread_mutex_unlock(&w->mu);
        if (stop) break;
        kiln_job job;
        kiln_err err = {0};
        kiln_status s = kiln_store_claim_next(w->srv->store, &job, &err);
        if (s == KILN_E_NOT_FOUND) {
            pthread_mutex_lock(&w->mu);
            if (!w->stop) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_sec += 1;
                pthread_cond_timedwait(&w->wake, &w->mu, &ts);
            }
            pthread_mutex_unlock(&w->mu);
            continue;
        }
        if (s != KILN_OK) {
            log_error("serve: claiming a job: %s", err.msg);
            struct timespec ts = {0, 200 * 1000 * 1000};
            nanosleep(&ts, NULL);
            continue;
        }
        pthread_mutex_lock(&w->mu);
        snprintf(w->current, sizeof w->current, "%s", job.id);
        pthread_mutex_unlock(&w->mu);
        kiln_broadcast_status(w->srv, NULL);
        run_job(w, &job);
        pthread_mutex_lock(&w->mu);
        w->current[0] = 0;
        pthread_cond_broadcast(&w->done);
        pthread_mutex_unlock(&w->mu);
        kiln_job_clear(&job);
        kiln_broadcast_status(w->srv, NULL);
    }
    return NULL;
}

kiln_status kiln_worker_start(kiln_server *srv, kiln_worker **out, kiln_err *err) {
    kiln_worker *w = kiln_calloc(1, sizeof *w);
    if (!w) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
    w->srv = srv;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->wake, NULL);
    pthread_cond_init(&w->done, NULL);
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
        kiln_worker_free(w);
        return KILN_FAIL(err, KILN_E_INTERNAL, "cannot start the worker thread");
    }
    w->started = true;
    *out = w;
    return KILN_OK;
}

void kiln_worker_stop(kiln_worker *w) {
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    atomic_store(&w->stopping, true);
    pthread_cond_broadcast(&w->wake);
    pthread_cond_broadcast(&w->done);
    pthread_mutex_unlock(&w->mu);
    if (w->started) pthread_join(w->thread, NULL);
    w->started = false;
}

void kiln_worker_free(kiln_worker *w) {
    if (!w) return;
    kiln_worker_stop(w);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->wake);
    pthread_cond_destroy(&w->done);
    kiln_free(w);
}

void kiln_worker_wake(kiln_worker *w) {
    pthread_mutex_lock(&w->mu);
    pthread_cond_broadcast(&w->wake);
    pthread_mutex_unlock(&w->mu);
}

bool kiln_worker_interrupt(kiln_worker *w, const char *id) {
    pthread_mutex_lock(&w->mu);
    bool hit = w->current[0] && (!id || !strcmp(id, w->current));
    if (hit) atomic_store(&w->interrupt, true);
    pthread_mutex_unlock(&w->mu);
    return hit;
}

bool kiln_worker_current(kiln_worker *w, char *id) {
    pthread_mutex_lock(&w->mu);
    bool busy = w->current[0] != 0;
    snprintf(id, 64, "%s", w->current);
    pthread_mutex_unlock(&w->mu);
    return busy;
}

bool kiln_worker_wait(kiln_worker *w, const char *id, double timeout_s) {
    double deadline = kiln_clock_s() + timeout_s;
    for (;;) {
        kiln_job j;
        if (kiln_store_get(w->srv->store, id, &j, NULL) != KILN_OK) return false;
        bool final = kiln_job_state_final(j.state);
        kiln_job_clear(&j);
        if (final) return true;
        if (kiln_clock_s() >= deadline || atomic_load(&w->stopping)) return false;
        pthread_mutex_lock(&w->mu);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 250 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&w->done, &w->mu, &ts);
        pthread_mutex_unlock(&w->mu);
    }
}

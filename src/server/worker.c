/* worker.c - the thread that runs jobs from the durable queue, one at a time, and reports ComfyUI's messages.
 *
 * A job's life here: claim (QUEUED -> RUNNING, committed), parse the stored graph again (models may have changed
 * since submission), execute, then one committed finish (SUCCEEDED | FAILED | INTERRUPTED) carrying the outputs
 * and the history messages. Progress goes to the WebSocket hub as it happens; nothing here depends on the HTTP
 * connection that submitted the job still being open.
 *
 * Shutdown while a job runs: the executor is asked to stop and the job is left RUNNING in the store, so the
 * next server recovers it to QUEUED and runs it again (an accepted job is never lost, never reported as done
 * when it was not).
 *
 * Batching (cfg.batch_images > 1, and an engine with generate_batch): with the job it claimed, the worker also
 * claims queued jobs whose one engine call differs only in prompt, seed and batch (collect_batch), runs those
 * calls as one forward, and hands each job its images when its own graph asks the engine for them (each job
 * then runs its graph - post-processing, saving, messages, its committed finish - exactly as alone). Every job
 * of a batch is claimed (RUNNING) in the store before the forward starts, so a crash mid-batch re-queues all.
 * If the shared forward fails or is stopped, each job simply calls the engine itself. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "server/openai.h"
#include "server/output_commit.h"
#include "kiln.h"
#include "server/server_internal.h"

#define MAX_BATCH_JOBS 16

/* A claimed job while the worker holds it: its message context and, when it shares a forward with other jobs,
 * its engine call and the images that forward made for it. */
typedef struct job_run {
    kiln_worker *w;
    kiln_job job;
    json_t *messages;      /* history messages */
    json_t *executed;      /* node ids that ran */
    json_t *deferred;      /* node -> ui of "executed" events naming output files: sent once they are committed */
    bool started;          /* execution_start sent (batch members get it before the shared forward) */
    const kiln_graph *graph;
    bool captured;         /* params holds the graph's engine call (strings below are owned) */
    kiln_gen_params params;
    char *owned[8];
    float *owned_sigmas;
    kiln_gen_lora owned_loras[8];
    char *owned_lora_paths[8];
    char sampler_node[64]; /* where ComfyUI reports the call's progress */
    kiln_gen_images pre;   /* images the shared forward made for this job; pixels NULL when none */
    int batch_images;      /* images in that forward */
    json_t *batched_with;  /* the other jobs of that forward */
    json_t *nodes_state;   /* progress_state's nodes */
    kiln_gen_engine eng;   /* what the job's graph calls: hands out pre, else the server's engine */
    bool partials;         /* an OpenAI stream on this node asked for partial images (openai.h) */
    double stage_ms[KILN_STAGE_COUNT]; /* the engine's stage times, summed over the job's calls (/history) */
} job_run;

struct kiln_worker {
    kiln_server *srv;
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    bool stop;
    atomic_bool interrupt;
    atomic_bool stopping;
    atomic_bool draining; /* claim nothing more (kiln_worker_drain) */
    char current[64];
    /* the jobs claimed together (current is one of them); an interrupt of one waiting for its turn is kept in
     * member_stop until it runs, and stops a shared forward in progress */
    char members[MAX_BATCH_JOBS][64];
    bool member_stop[MAX_BATCH_JOBS];
    int n_members, member_now; /* members[member_now..] have not finished */
    atomic_bool member_stopped;
    job_run runs[MAX_BATCH_JOBS];
};

static int64_t now_ms(void) { return (int64_t)(kiln_clock_wall_s() * 1000.0); }

/* Sends a message to the job's client and, for the prompt-level events, records it in the history. */
static void emit(job_run *jr, const char *type, json_t *data, bool record) {
    if (record) json_array_append_new(jr->messages, json_pack("[s, O]", type, data));
    kiln_events_send(jr->w->srv, jr->job.client_id, type, data);
}

void kiln_broadcast_status(kiln_server *srv, const char *sid) {
    int pending = kiln_store_count(srv->store, KILN_JOB_QUEUED) + kiln_store_count(srv->store, KILN_JOB_RUNNING);
    json_t *d = json_pack("{s:{s:{s:i}}}", "status", "exec_info", "queue_remaining", pending);
    if (sid) { /* the hello of one new socket: local */
        json_object_set_new(d, "sid", json_string(sid));
        kiln_ws_send(srv->hub, NULL, "status", d);
    } else {
        kiln_events_send(srv, NULL, "status", d);
    }
}

static const char *class_of(const kiln_graph *g, const char *node) {
    int i = node ? kiln_graph_find(g, node) : -1;
    return i >= 0 ? g->nodes[i].cls->name : "";
}

/* progress_state, as current ComfyUI sends it: every node this prompt has touched, with its state
 * (running, finished) and progress, after each change. */
static void progress_state(job_run *jr, const char *node, const char *state, int value, int max) {
    if (!jr->nodes_state) jr->nodes_state = json_object();
    if (node) {
        const char *id;
        json_t *v;
        if (!strcmp(state, "running")) /* the node before it is done */
            json_object_foreach(jr->nodes_state, id, v) if (!strcmp(json_string_value(json_object_get(v, "state")), "running")) {
                json_object_set_new(v, "state", json_string("finished"));
                json_object_set(v, "value", json_object_get(v, "max"));
            }
        json_object_set_new(jr->nodes_state, node,
                            json_pack("{s:i, s:i, s:s, s:s, s:s, s:s, s:n, s:s}", "value", value, "max", max, "state",
                                      state, "node_id", node, "prompt_id", jr->job.id, "display_node_id", node,
                                      "parent_node_id", "real_node_id", node));
    } else {
        const char *id;
        json_t *v;
        json_object_foreach(jr->nodes_state, id, v) {
            json_object_set_new(v, "state", json_string("finished"));
            json_object_set(v, "value", json_object_get(v, "max"));
        }
    }
    emit(jr, "progress_state", json_pack("{s:s, s:O}", "prompt_id", jr->job.id, "nodes", jr->nodes_state), false);
}

static void hook_executing(void *ctx, const char *node) {
    job_run *jr = ctx;
    emit(jr, "executing", json_pack("{s:s, s:s, s:s}", "node", node, "display_node", node, "prompt_id", jr->job.id),
         false);
    json_array_append_new(jr->executed, json_string(node));
    progress_state(jr, node, "running", 0, 1);
}

static void hook_progress(void *ctx, const char *node, int value, int max) {
    job_run *jr = ctx;
    emit(jr, "progress", json_pack("{s:i, s:i, s:s, s:s}", "value", value, "max", max, "prompt_id", jr->job.id,
                                   "node", node), false);
    if (node && *node) progress_state(jr, node, "running", value, max);
}

/* --preview-method latent2rgb: the step's latent as a JPEG in ComfyUI's binary PREVIEW_IMAGE frame. */
static void hook_latent_preview(void *ctx, const char *node, const float *latent, int h16, int w16) {
    job_run *jr = ctx;
    (void)node;
    int w, h;
    uint8_t *rgb = kiln_preview_latent2rgb(latent, h16, w16, &w, &h), *jpg = NULL;
    size_t len = 0;
    if (rgb && jr->partials) kiln_partials_step(jr->w->srv->partials, jr->job.id, rgb, w, h);
    if (rgb && jr->w->srv->cfg.preview_method == KILN_PREVIEW_LATENT2RGB && kiln_jpeg_encode(rgb, w, h, 90, &jpg, &len))
        kiln_ws_send_binary(jr->w->srv->hub, jr->job.client_id, KILN_WS_PREVIEW_IMAGE, KILN_WS_FORMAT_JPEG, jpg, len);
    kiln_free(rgb);
    kiln_free(jpg);
}

static bool names_outputs(const json_t *ui) {
    const json_t *img;
    size_t i;
    json_array_foreach(json_object_get(ui, "images"), i, img) {
        const char *t = json_string_value(json_object_get(img, "type"));
        if (t && !strcmp(t, "output")) return true;
    }
    return false;
}

static void hook_executed(void *ctx, const char *node, json_t *ui) {
    job_run *jr = ctx;
    if (names_outputs(ui)) { /* its files are staged: the event names the committed files, after the commit */
        if (!jr->deferred) jr->deferred = json_object();
        json_object_set(jr->deferred, node, ui);
        return;
    }
    emit(jr, "executed", json_pack("{s:s, s:s, s:O, s:s}", "node", node, "display_node", node, "output", ui,
                                   "prompt_id", jr->job.id), false);
}

/* The engine's warnings (a prompt truncated to the template, a negative prompt the model does not use): into the
 * job's history messages, one message per line. */
static void hook_warning(void *ctx, const char *node, const char *text) {
    job_run *jr = ctx;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        json_t *d = json_pack("{s:s, s:s, s:s%, s:I}", "prompt_id", jr->job.id, "node_id", node, "message", p, len,
                              "timestamp", (json_int_t)now_ms());
        /* history only: ComfyUI has no warning event, and its frontend reports an unknown ws type as an error */
        if (d) json_array_append_new(jr->messages, json_pack("[s, o]", "kiln_warning", d));
        p += len + (nl ? 1 : 0);
    }
}

static void hook_image_frame(void *ctx, const char *node, const uint8_t *png, size_t len) {
    job_run *jr = ctx;
    (void)node;
    kiln_ws_send_binary(jr->w->srv->hub, jr->job.client_id, KILN_WS_PREVIEW_IMAGE, KILN_WS_FORMAT_PNG, png, len);
}

static bool hook_should_stop(void *ctx) {
    job_run *jr = ctx;
    return atomic_load(&jr->w->interrupt) || atomic_load(&jr->w->stopping);
}

/* ---- batching ---------------------------------------------------------------------------------------------- */

/* The engine a job's graph calls: the images the shared forward made for exactly this call, else the server's
 * engine (a job that was not batched, a failed or stopped shared forward, a graph's second call). */
static bool same_call(const kiln_gen_params *a, const kiln_gen_params *b);
static kiln_status job_generate(void *self, const kiln_gen_params *p, kiln_gen_progress_fn progress, void *pctx,
                                kiln_gen_images *out, kiln_err *err) {
    job_run *jr = self;
    if (jr->pre.pixels && same_call(p, &jr->params) && !strcmp(p->prompt, jr->params.prompt) &&
        p->seed == jr->params.seed && p->batch == jr->params.batch) {
        *out = jr->pre;
        memset(&jr->pre, 0, sizeof jr->pre);
    } else {
        kiln_gen_engine *e = jr->w->srv->cfg.engine;
        KILN_TRY(e->generate(e->self, p, progress, pctx, out, err));
    }
    for (int i = 0; i < KILN_STAGE_COUNT; i++) jr->stage_ms[i] += out->stage_ms[i];
    return KILN_OK;
}

static void job_run_init(kiln_worker *w, job_run *jr, kiln_job *job) {
    memset(jr, 0, sizeof *jr);
    jr->w = w;
    jr->job = *job; /* takes the strings */
    memset(job, 0, sizeof *job);
    jr->messages = json_array();
    jr->executed = json_array();
    jr->eng = (kiln_gen_engine){.self = jr, .generate = job_generate};
}

static void job_run_clear(job_run *jr) {
    kiln_job_clear(&jr->job);
    json_decref(jr->messages);
    json_decref(jr->executed);
    json_decref(jr->deferred);
    json_decref(jr->batched_with);
    json_decref(jr->nodes_state);
    for (int i = 0; i < 8; i++) kiln_free(jr->owned[i]);
    kiln_free(jr->owned_sigmas);
    for (int i = 0; i < 8; i++) kiln_free(jr->owned_lora_paths[i]);
    kiln_free(jr->pre.pixels);
    memset(jr, 0, sizeof *jr);
}

static char *dup_opt(const char *s) { return s ? kiln_strdup(s) : NULL; }

/* Capture: an engine that records the graph's first call and stops the run there. Nothing was saved by then
 * (SaveImage needs that call's images), and the capture hooks send no messages. */
static kiln_status capture_generate(void *self, const kiln_gen_params *p, kiln_gen_progress_fn progress, void *pctx,
                                    kiln_gen_images *out, kiln_err *err) {
    job_run *jr = self;
    memset(out, 0, sizeof *out);
    const char *src[8] = {p->unet_path, p->clip_path, p->vae_path, p->prompt, p->negative_prompt, p->sampler,
                          p->clip2_path, p->prompt_2};
    for (int i = 0; i < 8; i++) {
        kiln_free(jr->owned[i]);
        jr->owned[i] = dup_opt(src[i]);
    }
    jr->params = *p;
    jr->params.unet_path = jr->owned[0];
    jr->params.clip_path = jr->owned[1];
    jr->params.vae_path = jr->owned[2];
    jr->params.prompt = jr->owned[3];
    jr->params.negative_prompt = jr->owned[4];
    jr->params.sampler = jr->owned[5];
    jr->params.clip2_path = jr->owned[6];
    jr->params.prompt_2 = jr->owned[7];
    jr->params.request_id = jr->job.id;
    jr->params.latent = NULL; /* a shared forward's progress context is not the graph's */
    /* images are not kept: a job with references or an init image runs alone (same_call) */
    jr->params.refs = NULL;
    jr->params.init_image = NULL;
    bool ok = p->n_loras <= 8 && p->n_refs == 0 && !p->init_image;
    kiln_free(jr->owned_sigmas);
    jr->owned_sigmas = NULL;
    if (p->sigmas && p->n_sigmas > 0 && (jr->owned_sigmas = kiln_malloc((size_t)p->n_sigmas * sizeof(float))))
        memcpy(jr->owned_sigmas, p->sigmas, (size_t)p->n_sigmas * sizeof(float));
    ok = ok && (!p->sigmas || jr->owned_sigmas);
    jr->params.sigmas = jr->owned_sigmas;
    for (int i = 0; i < 8; i++) {
        kiln_free(jr->owned_lora_paths[i]);
        jr->owned_lora_paths[i] = i < p->n_loras && ok ? dup_opt(p->loras[i].path) : NULL;
        if (i < p->n_loras && ok) {
            ok = jr->owned_lora_paths[i] != NULL;
            jr->owned_loras[i] = (kiln_gen_lora){jr->owned_lora_paths[i], p->loras[i].strength};
        }
    }
    jr->params.loras = p->n_loras ? jr->owned_loras : NULL;
    jr->captured = ok && jr->owned[0] && jr->owned[1] && jr->owned[2] && jr->owned[3] && jr->owned[5] &&
                   (!p->clip2_path || jr->owned[6]) && (!p->prompt_2 || jr->owned[7]);
    if (progress) progress(pctx, 0, p->steps); /* the executor's step hook names the sampler node (below) */
    return KILN_FAIL(err, KILN_E_CANCELLED, "captured");
}

static void capture_node(void *ctx, const char *node, int value, int max) {
    job_run *jr = ctx;
    (void)value, (void)max;
    snprintf(jr->sampler_node, sizeof jr->sampler_node, "%s", node ? node : "");
}

/* Fills jr->params with the engine call jr's graph makes first. false when it makes none (or is invalid). */
static bool capture(kiln_worker *w, job_run *jr) {
    kiln_server *srv = w->srv;
    json_t *req = json_loads(jr->job.request, 0, NULL), *errors = NULL, *outputs = NULL;
    kiln_graph *g = NULL;
    json_t *graph_json = json_object_get(req, "prompt");
    if (graph_json && kiln_graph_parse(graph_json, &srv->cfg.limits, srv->cfg.models_dir, &g, &errors) == KILN_OK) {
        kiln_gen_engine eng = {.self = jr, .generate = capture_generate};
        kiln_exec_env env = {.models_root = srv->cfg.models_dir, .output_dir = srv->output_dir, .engine = &eng,
                             .input_dir = srv->input_dir, .prompt_id = jr->job.id,
                             .openai_rules = !strcmp(jr->job.kind, "openai")};
        kiln_exec_hooks hooks = {.ctx = jr, .progress = capture_node};
        char failed[64];
        kiln_err err = {0};
        kiln_graph_execute(g, &env, &hooks, &outputs, failed, &err);
    }
    json_decref(outputs);
    json_decref(errors);
    kiln_graph_free(g);
    json_decref(req);
    return jr->captured;
}

/* Two calls can share a forward: same models, size, steps, guidance, sampler and negative prompt (NULL, the
 * zeroed negative of ConditioningZeroOut, differs from every text; the engine's CFG rule is the same for all). */
static bool same_str(const char *a, const char *b) { return (!a && !b) || (a && b && !strcmp(a, b)); }

/* Two engine calls that one forward can serve: the same models, adapters (in order, at the same strengths),
 * schedule, size, guidance and negative; only prompt, seed and batch may differ. Calls with reference or init
 * images, or FLUX.1's separate T5 text, never share a forward. */
static bool same_call(const kiln_gen_params *a, const kiln_gen_params *b) {
    if (a->n_loras != b->n_loras || a->n_sigmas != b->n_sigmas || !a->sigmas != !b->sigmas)
        return false;
    for (int i = 0; i < a->n_loras; i++)
        if (strcmp(a->loras[i].path, b->loras[i].path) || a->loras[i].strength != b->loras[i].strength) return false;
    if (a->sigmas && memcmp(a->sigmas, b->sigmas, (size_t)a->n_sigmas * sizeof *a->sigmas)) return false;
    return same_str(a->negative_prompt, b->negative_prompt) && !strcmp(a->unet_path, b->unet_path) &&
           !strcmp(a->clip_path, b->clip_path) && same_str(a->clip2_path, b->clip2_path) &&
           !strcmp(a->vae_path, b->vae_path) && !strcmp(a->sampler, b->sampler) && a->width == b->width &&
           a->height == b->height && a->steps == b->steps && a->cfg == b->cfg && a->guidance == b->guidance &&
           a->comfy_noise == b->comfy_noise && a->comfy_text == b->comfy_text &&
           !a->prompt_2 && !b->prompt_2 && !a->n_refs && !b->n_refs && !a->init_image && !b->init_image;
}

typedef struct id_list {
    char ids[32][64];
    int n;
} id_list;

static bool list_id(void *ctx, const kiln_job *job) {
    id_list *l = ctx;
    snprintf(l->ids[l->n++], 64, "%s", job->id);
    return l->n < 32;
}

/* runs[0] holds the claimed job; claims queued jobs that can share its forward into runs[1..]. Returns how many
 * jobs runs holds. Looks at the first 32 queued jobs, in queue order. */
static int collect_batch(kiln_worker *w, job_run *runs) {
    kiln_server *srv = w->srv;
    int max = srv->cfg.batch_images;
    if (max <= 1 || !srv->cfg.engine || !srv->cfg.engine->generate_batch || !capture(w, &runs[0]) ||
        runs[0].params.batch >= max)
        return 1;
    id_list queued = {.n = 0};
    if (kiln_store_list(srv->store, KILN_JOB_MASK(KILN_JOB_QUEUED), false, 32, list_id, &queued, NULL) != KILN_OK)
        return 1;
    int n = 1, images = runs[0].params.batch;
    for (int i = 0; i < queued.n && n < MAX_BATCH_JOBS && images < max; i++) {
        kiln_job job;
        if (kiln_store_get(srv->store, queued.ids[i], &job, NULL) != KILN_OK) continue;
        job_run *jr = &runs[n];
        job_run_init(w, jr, &job);
        bool fits = capture(w, jr) && same_call(&runs[0].params, &jr->params) && images + jr->params.batch <= max;
        if (fits) { /* claimed now, committed: from here on it is this worker's, as a claim_next job is */
            kiln_job_clear(&jr->job);
            fits = kiln_store_claim(srv->store, queued.ids[i], &jr->job, NULL) == KILN_OK;
            jr->params.request_id = jr->job.id;
        }
        if (!fits) {
            job_run_clear(jr);
            continue;
        }
        images += jr->params.batch;
        n++;
    }
    return n;
}

typedef struct forward_ctx {
    kiln_worker *w;
    job_run *runs;
    int n;
} forward_ctx;

static bool forward_progress(void *ctx, int step, int n_steps) {
    forward_ctx *fc = ctx;
    for (int i = 0; i < fc->n; i++) hook_progress(&fc->runs[i], fc->runs[i].sampler_node, step, n_steps);
    kiln_worker *w = fc->w;
    return !(atomic_load(&w->interrupt) || atomic_load(&w->stopping) || atomic_load(&w->member_stopped));
}

/* The batch's engine calls as one forward; each job's images go to its run (split by generate_batch). */
static void run_shared_forward(kiln_worker *w, job_run *runs, int n) {
    kiln_gen_params ps[MAX_BATCH_JOBS] = {{0}}; /* all set below; zeroed for the compiler */
    kiln_gen_images outs[MAX_BATCH_JOBS];
    int images = 0;
    for (int i = 0; i < n; i++) {
        ps[i] = runs[i].params;
        images += ps[i].batch;
    }
    kiln_gen_engine *e = w->srv->cfg.engine;
    forward_ctx fc = {w, runs, n};
    kiln_err err = {0};
    kiln_status s = e->generate_batch(e->self, ps, n, forward_progress, &fc, outs, &err);
    if (s != KILN_OK) {
        log_warn("serve: shared forward of %d jobs: %s; each runs alone", n, err.msg);
        return;
    }
    for (int i = 0; i < n; i++) {
        runs[i].pre = outs[i];
        runs[i].batch_images = images;
        runs[i].batched_with = json_array();
        for (int k = 0; k < n; k++)
            if (k != i) json_array_append_new(runs[i].batched_with, json_string(runs[k].job.id));
    }
    log_info("serve: %d jobs (%d images) shared one forward", n, images);
}

static void emit_start(job_run *jr) {
    const char *id = jr->job.id;
    emit(jr, "execution_start", json_pack("{s:s, s:I}", "prompt_id", id, "timestamp", (json_int_t)now_ms()), true);
    emit(jr, "execution_cached",
         json_pack("{s:[], s:s, s:I}", "nodes", "prompt_id", id, "timestamp", (json_int_t)now_ms()), true);
    jr->started = true;
}

/* Fault injection for tests/cli/serve_output_commit.sh and serve_pg_events.sh: KILN_FAULT_PAUSE=<point>:<seconds>
 * holds the worker at that point of every job - "after-stage" (the graph's files staged, nothing committed),
 * "after-link" (the files committed, the job not yet recorded finished) or "after-finish" (the job recorded
 * finished, nothing after it done) - so that the test can kill -9 the node exactly there. */
static void fault_pause(const char *point) {
    const char *v = getenv("KILN_FAULT_PAUSE");
    size_t n = strlen(point);
    if (!v || strncmp(v, point, n) != 0 || v[n] != ':') return;
    double sec = atof(v + n + 1);
    log_warn("serve: KILN_FAULT_PAUSE: holding %.1f s %s", sec, point);
    struct timespec ts = {(time_t)sec, (long)((sec - (double)(time_t)sec) * 1e9)};
    nanosleep(&ts, NULL);
}

/* false when another attempt has the job now (this node's lease expired while it ran and another node claimed
 * it, or that attempt already finished it): this attempt must not commit files. */
static bool still_ours(kiln_server *srv, const kiln_job *mine) {
    kiln_job now;
    if (kiln_store_get(srv->store, mine->id, &now, NULL) != KILN_OK) return true; /* cannot tell: the plan decides */
    bool ours = now.state == KILN_JOB_RUNNING && now.attempts == mine->attempts;
    kiln_job_clear(&now);
    return ours;
}

/* The staged outputs of a finished graph committed to the output folder (output_commit.h), then the "executed"
 * events that name them. */
static kiln_status commit_outputs(job_run *jr, const char *stage, bool planned, json_t **outputs, kiln_err *err) {
    kiln_server *srv = jr->w->srv;
    fault_pause("after-stage");
    if (!still_ours(srv, &jr->job))
        return KILN_FAIL(err, KILN_E_IO, "another node took the job over (this node's lease expired): not committing");
    json_t *fin;
    KILN_TRY(kiln_outputs_commit(srv->output_dir, stage, *outputs, planned, &fin, err));
    json_decref(*outputs);
    *outputs = fin;
    const char *node;
    json_t *ui;
    json_object_foreach(planned ? fin : jr->deferred, node, ui) {
        json_t *now = json_object_get(fin, node);
        if (planned && !names_outputs(now)) continue;
        emit(jr, "executed", json_pack("{s:s, s:s, s:O, s:s}", "node", node, "display_node", node, "output",
                                       now ? now : ui, "prompt_id", jr->job.id), false);
    }
    fault_pause("after-link");
    return KILN_OK;
}

/* Runs one claimed job to its final state. */
static void run_job(kiln_worker *w, job_run *jr) {
    kiln_server *srv = w->srv;
    kiln_job *job = &jr->job;
    json_error_t je;
    json_t *req = json_loads(job->request, 0, &je);
    json_t *graph_json = json_object_get(req, "prompt");
    if (!jr->started) emit_start(jr);
    jr->partials = kiln_partials_wanted(srv->partials, job->id);

    kiln_graph *g = NULL;
    json_t *errors = NULL, *outputs = NULL;
    kiln_err err = {0};
    char failed[64] = "";
    double engine_ms = 0;
    size_t peak_bytes = 0;
    kiln_status s;
    char stage[4096] = "";
    bool planned = false;
    if (!graph_json) {
        s = KILN_FAIL(&err, KILN_E_FORMAT, "stored job has no graph");
    } else if (kiln_graph_parse(graph_json, &srv->cfg.limits, srv->cfg.models_dir, &g, &errors) != KILN_OK) {
        char *txt = json_dumps(errors, JSON_COMPACT);
        s = KILN_FAIL(&err, KILN_E_INVALID, "the graph no longer validates: %.900s", txt ? txt : "?");
        free(txt);
    } else if ((s = kiln_outputs_begin(srv->output_dir, job->id, stage, &planned, &outputs, &err)) != KILN_OK) {
        stage[0] = 0;
    } else if (planned) { /* an earlier attempt ran the graph and planned its files: commit them, run nothing */
        jr->graph = g;
        log_warn("serve: job %s: an earlier attempt's outputs are planned; committing them", job->id);
    } else {
        jr->graph = g;
        kiln_exec_env env = {.models_root = srv->cfg.models_dir, .output_dir = stage,
                             .temp_dir = srv->temp_dir, .input_dir = srv->input_dir,
                             .engine = srv->cfg.engine ? &jr->eng : NULL, .prompt_id = job->id,
                             .openai_rules = !strcmp(job->kind, "openai"),
                             .extra_pnginfo = json_object_get(json_object_get(req, "extra_data"), "extra_pnginfo"),
                             .engine_ms = &engine_ms, .peak_memory_bytes = &peak_bytes};
        kiln_exec_hooks hooks = {.ctx = jr, .executing = hook_executing, .progress = hook_progress,
                                 .executed = hook_executed, .should_stop = hook_should_stop,
                                 .warning = hook_warning,
                                 .image_frame = hook_image_frame,
                                 .latent_preview = srv->cfg.preview_method == KILN_PREVIEW_LATENT2RGB || jr->partials
                                                       ? hook_latent_preview : NULL};
        s = kiln_graph_execute(g, &env, &hooks, &outputs, failed, &err);
    }
    json_decref(errors);
    if (s == KILN_OK && stage[0]) s = commit_outputs(jr, stage, planned, &outputs, &err);

    if (s == KILN_E_CANCELLED && atomic_load(&w->stopping) && !atomic_load(&w->interrupt)) {
        /* server shutdown: leave it RUNNING; the next start re-queues it */
        log_warn("serve: job %s left for the next start (shutdown during the run)", job->id);
    } else {
        kiln_job_state final;
        json_t *error = NULL, *last = NULL; /* the final event: recorded now, sent once the finish is committed */
        const char *last_type = NULL;
        int64_t t = now_ms();
        if (s == KILN_OK) {
            final = KILN_JOB_SUCCEEDED;
            if (jr->nodes_state) progress_state(jr, NULL, "finished", 0, 0);
            /* "kiln" is an extension ComfyUI clients ignore: what the engine measured for this prompt, and for a
             * job that shared a forward, that forward's image count and the other jobs in it */
            json_t *ext = json_pack("{s:f, s:I}", "engine_ms", engine_ms, "peak_memory_bytes", (json_int_t)peak_bytes);
            json_t *stages = json_array(); /* the engine's stages (kiln bench variants reads Decoding) */
            for (int i = 0; i < KILN_STAGE_COUNT; i++)
                if (jr->stage_ms[i] > 0)
                    json_array_append_new(stages, json_pack("{s:s, s:f}", "name", kiln_stage_name((kiln_stage)i),
                                                            "duration_ms", jr->stage_ms[i]));
            json_object_set_new(ext, "stages", stages);
            if (jr->batched_with && !jr->pre.pixels) { /* its images came from the shared forward */
                json_object_set_new(ext, "batch_images", json_integer(jr->batch_images));
                json_object_set(ext, "batched_with", jr->batched_with);
            }
            last_type = "execution_success";
            last = json_pack("{s:s, s:I, s:o}", "prompt_id", job->id, "timestamp", (json_int_t)t, "kiln", ext);
        } else if (s == KILN_E_CANCELLED) {
            final = KILN_JOB_INTERRUPTED;
            last_type = "execution_interrupted";
            last = json_pack("{s:s, s:s, s:s, s:O, s:I}", "prompt_id", job->id, "node_id", failed, "node_type",
                             g ? class_of(g, failed) : "", "executed", jr->executed, "timestamp", (json_int_t)t);
        } else {
            final = KILN_JOB_FAILED;
            char clean_msg[sizeof err.msg];
            kiln_scrub_paths(err.msg, clean_msg, sizeof clean_msg); /* history is served: no server paths */
            error = json_pack("{s:s, s:s, s:s, s:s, s:O, s:s, s:[], s:{}, s:{}, s:I}", "prompt_id", job->id,
                              "node_id", failed, "node_type", g ? class_of(g, failed) : "", "exception_message",
                              clean_msg, "executed", jr->executed, "exception_type", kiln_status_name(s), "traceback",
                              "current_inputs", "current_outputs", "timestamp", (json_int_t)t);
            last_type = "execution_error";
            last = json_incref(error);
        }
        json_array_append_new(jr->messages, json_pack("[s, O]", last_type, last));
        char *out_txt = json_dumps(outputs ? outputs : json_object(), JSON_COMPACT);
        char *msg_txt = json_dumps(jr->messages, JSON_COMPACT);
        char *err_txt = error ? json_dumps(error, JSON_COMPACT) : NULL;
        kiln_err ferr = {0};
        /* ComfyUI's order: execution_success (or _error, _interrupted), the history row committed, and only then
         * executing {node: null} - a client that reads /history on that message finds the job there. On a shared
         * store both go out in the commit's transaction: a node killed just after committing cannot leave a
         * finished job whose end no client hears of */
        json_t *idle = json_pack("{s:n, s:n, s:s}", "node", "display_node", "prompt_id", job->id);
        char *ev[3] = {kiln_events_encode(srv, job->client_id, last_type, last),
                       kiln_events_encode(srv, job->client_id, "executing", idle), NULL};
        bool in_commit = ev[0] && ev[1];
        /* the job ends once: only the commit that moved it out of RUNNING sends its final event (on a shared
         * store a node whose lease expired mid-run cannot commit: the node now running it will) */
        kiln_status fs = kiln_store_finish(srv->store, job->id, final, out_txt ? out_txt : "{}",
                                           msg_txt ? msg_txt : "[]", err_txt,
                                           in_commit ? (const char *const *)ev : NULL, &ferr);
        if (fs != KILN_OK) {
            log_error("serve: recording the end of job %s: %s", job->id, ferr.msg);
            json_decref(last);
        } else {
            fault_pause("after-finish");
            if (stage[0]) kiln_outputs_done(stage); /* the job is finished: its staging folder has served */
            if (in_commit)
                json_decref(last);
            else
                kiln_events_send(srv, job->client_id, last_type, last);
            int images = 0;
            const char *okey;
            json_t *oval;
            json_object_foreach(outputs, okey, oval) images += (int)json_array_size(json_object_get(oval, "images"));
            kiln_metrics_job(srv->metrics, job, final, images, engine_ms, graph_json);
        }
        free(ev[0]);
        free(ev[1]);
        free(out_txt);
        free(msg_txt);
        free(err_txt);
        json_decref(error);
        if (in_commit)
            json_decref(idle);
        else
            emit(jr, "executing", idle, false);
        log_info("serve: job %s %s%s%s", job->id, kiln_job_state_name(final), s ? ": " : "", s ? err.msg : "");
    }
    json_decref(outputs);
    kiln_graph_free(g);
    json_decref(req);
    jr->graph = NULL;
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
        if (atomic_load(&w->draining)) { /* idle until the stop */
            pthread_mutex_lock(&w->mu);
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            if (!w->stop) pthread_cond_timedwait(&w->wake, &w->mu, &ts);
            pthread_mutex_unlock(&w->mu);
            continue;
        }
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
        job_run *runs = w->runs;
        job_run_init(w, &runs[0], &job);
        int n = collect_batch(w, runs);
        pthread_mutex_lock(&w->mu);
        snprintf(w->current, sizeof w->current, "%s", runs[0].job.id);
        for (int k = 0; k < n; k++) {
            snprintf(w->members[k], sizeof w->members[k], "%s", runs[k].job.id);
            w->member_stop[k] = false;
        }
        w->n_members = n;
        w->member_now = 0;
        atomic_store(&w->interrupt, false);
        atomic_store(&w->member_stopped, false);
        pthread_mutex_unlock(&w->mu);
        kiln_broadcast_status(w->srv, NULL);
        if (n > 1) {
            for (int k = 0; k < n; k++) emit_start(&runs[k]);
            run_shared_forward(w, runs, n);
        }
        for (int k = 0; k < n; k++) { /* each job to its own final state, in order */
            pthread_mutex_lock(&w->mu);
            snprintf(w->current, sizeof w->current, "%s", runs[k].job.id);
            w->member_now = k;
            atomic_store(&w->interrupt, w->member_stop[k]);
            pthread_mutex_unlock(&w->mu);
            run_job(w, &runs[k]);
            job_run_clear(&runs[k]);
            pthread_mutex_lock(&w->mu);
            if (k == n - 1) {
                w->current[0] = 0;
                w->n_members = 0;
            }
            pthread_cond_broadcast(&w->done);
            pthread_mutex_unlock(&w->mu);
        }
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

bool kiln_worker_stopping(kiln_worker *w) { return atomic_load(&w->stopping); }

bool kiln_worker_drain(kiln_worker *w, double timeout_s) {
    atomic_store(&w->draining, true);
    double deadline = kiln_clock_s() + timeout_s;
    char id[64];
    while (kiln_worker_current(w, id)) {
        if (kiln_clock_s() >= deadline) return false;
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return true;
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
    const char *target = id ? id : hit ? w->current : NULL;
    for (int k = w->member_now; target && k < w->n_members; k++) /* a batch's job: now, or when its turn comes */
        if (!strcmp(target, w->members[k])) {
            w->member_stop[k] = true;
            atomic_store(&w->member_stopped, true);
            hit = true;
        }
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

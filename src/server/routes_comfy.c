/* routes_comfy.c - the ComfyUI routes (spec server-api.md section 1): /prompt, /queue, /history, /interrupt,
 * /free, /system_stats, /object_info, /models. Shapes follow ComfyUI's server.py. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "base/alloc.h"
#include "server/server_internal.h"

static bool is(kiln_req *r, const char *method, const char *url) {
    return !strcmp(r->method, method) && !strcmp(r->url, url);
}

static bool uuid_ok(const char *s) {
    if (!s || strlen(s) != 36) return false;
    for (int i = 0; i < 36; i++) {
        char c = s[i];
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (c != '-') return false;
        } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
            return false;
        }
    }
    return true;
}

bool kiln_submit_job(kiln_req *r, kiln_submit *s, bool openai, enum MHD_Result *res) {
    kiln_server *srv = r->srv;
    json_t *errors = NULL;
    kiln_graph *g = NULL;
    s->node_errors = NULL;
    kiln_status st = kiln_graph_parse(s->graph, &srv->cfg.limits, srv->cfg.models_dir, &g, &errors);
    if (st != KILN_OK) {
        if (openai) {
            /* the first error in words, without ComfyUI's node ids (the client never saw the graph) */
            char msg[1000];
            const char *m = json_string_value(json_object_get(json_object_get(errors, "error"), "message"));
            const char *d = NULL, *key;
            json_t *ne;
            json_object_foreach(json_object_get(errors, "node_errors"), key, ne) {
                json_t *e0 = json_array_get(json_object_get(ne, "errors"), 0);
                if (e0) {
                    m = json_string_value(json_object_get(e0, "message"));
                    d = json_string_value(json_object_get(e0, "details"));
                    break;
                }
            }
            snprintf(msg, sizeof msg, "%s%s%s", m ? m : "the request is not valid", d && *d ? ": " : "", d && *d ? d : "");
            *res = kiln_reply_openai_error(r, 400, msg, "invalid_request_error", NULL, "validation_failed");
            json_decref(errors);
        } else {
            *res = kiln_reply_json(r, 400, errors);
        }
        return false;
    }
    s->node_errors = json_incref(g->node_errors);
    /* ComfyUI stores [number, id, prompt, extra_data, outputs_to_execute]; we keep the parts to rebuild it */
    json_t *outs = json_array();
    for (int i = 0; i < g->n_outputs; i++) json_array_append_new(outs, json_string(g->nodes[g->outputs[i]].id));
    kiln_graph_free(g);
    if (!s->id[0]) kiln_uuid4(s->id);
    json_t *stored = json_pack("{s:O, s:o, s:o}", "prompt", s->graph, "extra_data",
                               s->extra_data ? json_incref(s->extra_data) : json_object(), "outputs_to_execute", outs);
    if (s->extra_request) json_object_update(stored, s->extra_request);
    char *txt = json_dumps(stored, JSON_COMPACT);
    json_decref(stored);
    kiln_err err = {0};
    st = txt ? kiln_store_add(srv->store, s->id, s->kind, s->client_id, txt, s->front, srv->cfg.max_queue,
                              &s->number, &err)
             : KILN_FAIL(&err, KILN_E_NOMEM, "out of memory");
    free(txt);
    if (st == KILN_E_INVALID && s->reuse_existing) {
        kiln_job j;
        if (kiln_store_get(srv->store, s->id, &j, NULL) == KILN_OK) { /* taken by a twin request meanwhile */
            kiln_job_clear(&j);
            s->existed = true;
            json_decref(s->node_errors);
            s->node_errors = NULL;
            return true;
        }
    }
    if (st != KILN_OK) {
        unsigned code = st == KILN_E_LIMIT ? 429 : st == KILN_E_INVALID ? 400 : 500;
        *res = openai ? kiln_reply_openai_error(r, code, err.msg, code == 429 ? "rate_limit_error" : "invalid_request_error",
                                                NULL, st == KILN_E_LIMIT ? "queue_full" : "submit_failed")
                      : kiln_reply_comfy_error(r, code, st == KILN_E_LIMIT ? "queue_full" : "invalid_prompt", err.msg, "");
        json_decref(s->node_errors);
        s->node_errors = NULL;
        return false;
    }
    kiln_worker_wake(srv->worker);
    kiln_broadcast_status(srv, NULL);
    return true;
}

static enum MHD_Result post_prompt(kiln_req *r) {
    enum MHD_Result res;
    /* seeds up to 2^64-1: integer literals beyond int64 are quoted before jansson parses the body (the INT
     * coercion reads them back exactly) */
    size_t qlen = 0;
    char *quoted = r->body ? kiln_graph_quote_big_ints(r->body, r->body_len, &qlen) : NULL;
    if (quoted) {
        kiln_free(r->body);
        r->body = quoted;
        r->body_len = r->body_cap = qlen;
    }
    json_t *body = kiln_req_json(r, false, &res);
    if (!body) return res;
    json_t *prompt = json_object_get(body, "prompt");
    json_t *cid = json_object_get(body, "client_id"), *pid = json_object_get(body, "prompt_id");
    json_t *extra = json_object_get(body, "extra_data");
    /* null means absent, as in ComfyUI */
    if (json_is_null(cid)) cid = NULL;
    if (json_is_null(pid)) pid = NULL;
    if (json_is_null(extra)) extra = NULL;
    if (!prompt) {
        json_decref(body);
        return kiln_reply_comfy_error(r, 400, "no_prompt", "No prompt provided", "");
    }
    if ((cid && !json_is_string(cid)) || (extra && !json_is_object(extra)) || (pid && !json_is_string(pid))) {
        json_decref(body);
        return kiln_reply_comfy_error(r, 400, "invalid_prompt", "client_id and prompt_id must be strings, "
                                                                "extra_data an object", "");
    }
    if (pid && !uuid_ok(json_string_value(pid))) {
        json_decref(body);
        return kiln_reply_comfy_error(r, 400, "invalid_prompt", "prompt_id must be a UUID", "");
    }
    if (cid && strlen(json_string_value(cid)) > 100) {
        json_decref(body);
        return kiln_reply_comfy_error(r, 400, "invalid_prompt", "client_id is longer than 100 bytes", "");
    }
    kiln_submit s = {.graph = prompt, .client_id = cid ? json_string_value(cid) : NULL, .extra_data = extra,
                     .kind = "comfy", .front = json_is_true(json_object_get(body, "front"))};
    if (pid) snprintf(s.id, sizeof s.id, "%s", json_string_value(pid));
    if (kiln_submit_job(r, &s, false, &res)) {
        res = kiln_reply_json(r, 200, json_pack("{s:s, s:I, s:o}", "prompt_id", s.id, "number", (json_int_t)s.number,
                                                "node_errors", s.node_errors ? s.node_errors : json_object()));
    }
    json_decref(body);
    return res;
}

/* ---- queue and history views ------------------------------------------------------------------------------------ */

/* [number, id, prompt, extra_data, outputs_to_execute] - ComfyUI's queue/history item. */
static json_t *prompt_item(const kiln_job *j) {
    json_t *req = json_loads(j->request, 0, NULL);
    json_t *item = json_pack("[I, s, O, O, O]", (json_int_t)j->number, j->id,
                             json_object_get(req, "prompt") ? json_object_get(req, "prompt") : json_null(),
                             json_object_get(req, "extra_data") ? json_object_get(req, "extra_data") : json_null(),
                             json_object_get(req, "outputs_to_execute") ? json_object_get(req, "outputs_to_execute")
                                                                        : json_null());
    json_decref(req);
    return item;
}

static bool visit_queue(void *ctx, const kiln_job *j) {
    json_array_append_new((json_t *)ctx, prompt_item(j));
    return true;
}

static enum MHD_Result get_queue(kiln_req *r) {
    json_t *running = json_array(), *pending = json_array();
    kiln_store_list(r->srv->store, KILN_JOB_MASK(KILN_JOB_RUNNING), false, 0, visit_queue, running, NULL);
    kiln_store_list(r->srv->store, KILN_JOB_MASK(KILN_JOB_QUEUED), false, 0, visit_queue, pending, NULL);
    return kiln_reply_json(r, 200, json_pack("{s:o, s:o}", "queue_running", running, "queue_pending", pending));
}

static json_t *history_entry(const kiln_job *j) {
    json_t *outputs = j->result ? json_loads(j->result, 0, NULL) : NULL;
    json_t *messages = j->messages ? json_loads(j->messages, 0, NULL) : NULL;
    const char *status = j->state == KILN_JOB_SUCCEEDED ? "success" : "error";
    return json_pack("{s:o, s:o, s:{s:s, s:b, s:o}, s:{}}", "prompt", prompt_item(j), "outputs",
                     outputs ? outputs : json_object(), "status", "status_str", status, "completed",
                     j->state == KILN_JOB_SUCCEEDED, "messages", messages ? messages : json_array(), "meta");
}

static bool visit_history(void *ctx, const kiln_job *j) {
    json_object_set_new((json_t *)ctx, j->id, history_entry(j));
    return true;
}

/* Final states other than cancelled-before-start make history (ComfyUI drops deleted queue items). */
#define HISTORY_MASK                                                                                          \
    (KILN_JOB_MASK(KILN_JOB_SUCCEEDED) | KILN_JOB_MASK(KILN_JOB_FAILED) | KILN_JOB_MASK(KILN_JOB_INTERRUPTED))

static enum MHD_Result get_history(kiln_req *r, const char *id) {
    json_t *out = json_object();
    if (id) {
        kiln_job j;
        if (kiln_store_get(r->srv->store, id, &j, NULL) == KILN_OK) {
            if (KILN_JOB_MASK(j.state) & HISTORY_MASK) json_object_set_new(out, j.id, history_entry(&j));
            kiln_job_clear(&j);
        }
        return kiln_reply_json(r, 200, out);
    }
    const char *mi = kiln_req_arg(r, "max_items");
    int max = 0;
    if (mi) {
        char *end;
        long v = strtol(mi, &end, 10);
        if (*end || v < 0 || v > 1000000) {
            json_decref(out);
            return kiln_reply_comfy_error(r, 400, "invalid_request", "max_items must be a non-negative integer", "");
        }
        max = (int)v;
        if (max == 0) return kiln_reply_json(r, 200, out);
    }
    kiln_store_list(r->srv->store, HISTORY_MASK, true, max, visit_history, out, NULL);
    return kiln_reply_json(r, 200, out);
}

/* POST /queue and POST /history: {clear:true} | {delete:[ids]} */
static enum MHD_Result post_clear_delete(kiln_req *r, bool queue) {
    enum MHD_Result res;
    json_t *body = kiln_req_json(r, false, &res);
    if (!body) return res;
    json_t *del = json_object_get(body, "delete");
    if (del && !json_is_array(del)) {
        json_decref(body);
        return kiln_reply_comfy_error(r, 400, "invalid_request", "delete must be a list of prompt ids", "");
    }
    if (json_is_true(json_object_get(body, "clear"))) {
        if (queue)
            kiln_store_cancel_all(r->srv->store, NULL, NULL);
        else
            kiln_store_delete_finished(r->srv->store, NULL);
    }
    size_t i;
    json_t *v;
    json_array_foreach(del, i, v) {
        const char *id = json_string_value(v);
        if (!id) continue;
        if (queue) {
            /* a queued job is cancelled; deleting the running one interrupts it (as ComfyUI does) */
            if (kiln_store_cancel(r->srv->store, id, NULL) != KILN_OK) kiln_worker_interrupt(r->srv->worker, id);
        } else {
            kiln_store_delete(r->srv->store, id, NULL);
        }
    }
    json_decref(body);
    if (queue) kiln_broadcast_status(r->srv, NULL);
    return kiln_reply_json(r, 200, json_object());
}

static enum MHD_Result system_stats(kiln_req *r) {
    struct utsname u;
    const char *os = uname(&u) == 0 ? "posix" : "posix";
    long pages = sysconf(_SC_PHYS_PAGES), avail = sysconf(_SC_AVPHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    json_int_t total = (json_int_t)pages * psz, freeb = (json_int_t)avail * psz;
    json_t *argv = json_pack("[s, s]", "kiln", "serve");
    json_t *dev = json_pack("{s:s, s:s, s:i, s:I, s:I, s:I, s:I}", "name", "cpu", "type", "cpu", "index", 0,
                            "vram_total", total, "vram_free", freeb, "torch_vram_total", (json_int_t)0,
                            "torch_vram_free", (json_int_t)0);
    return kiln_reply_json(
        r, 200,
        json_pack("{s:{s:s, s:I, s:I, s:s, s:s, s:s, s:b, s:o, s:s}, s:[o]}", "system", "os", os, "ram_total", total,
                  "ram_free", freeb, "comfyui_version", "kiln-" KILN_VERSION, "python_version", "none (kiln is C)",
                  "pytorch_version", "none", "embedded_python", 0, "argv", argv, "kiln_version", KILN_VERSION,
                  "devices", dev));
}

static enum MHD_Result models_route(kiln_req *r) {
    const char *folder = r->url + strlen("/models");
    if (!*folder || !strcmp(folder, "/")) {
        json_t *a = json_array();
        for (int k = 0; k < KILN_MODELS_KIND_COUNT; k++)
            json_array_append_new(a, json_string(kiln_model_kind_folder((kiln_model_kind)k)));
        json_array_append_new(a, json_string("unet"));
        json_array_append_new(a, json_string("clip"));
        return kiln_reply_json(r, 200, a);
    }
    kiln_model_kind k;
    if (folder[0] != '/' || !kiln_model_kind_from_folder(folder + 1, &k))
        return kiln_reply_comfy_error(r, 404, "not_found", "Unknown model folder", folder);
    return kiln_reply_json(r, 200, kiln_models_list(r->srv->cfg.models_dir, k));
}

bool kiln_routes_comfy(kiln_req *r, enum MHD_Result *res) {
    kiln_server *srv = r->srv;
    if (is(r, "POST", "/prompt")) {
        *res = post_prompt(r);
    } else if (is(r, "GET", "/prompt")) {
        int pending = kiln_store_count(srv->store, KILN_JOB_QUEUED) + kiln_store_count(srv->store, KILN_JOB_RUNNING);
        *res = kiln_reply_json(r, 200, json_pack("{s:{s:i}}", "exec_info", "queue_remaining", pending));
    } else if (is(r, "GET", "/queue")) {
        *res = get_queue(r);
    } else if (is(r, "POST", "/queue")) {
        *res = post_clear_delete(r, true);
    } else if (is(r, "GET", "/history")) {
        *res = get_history(r, NULL);
    } else if (!strcmp(r->method, "GET") && !strncmp(r->url, "/history/", 9)) {
        *res = get_history(r, r->url + 9);
    } else if (is(r, "POST", "/history")) {
        *res = post_clear_delete(r, false);
    } else if (is(r, "POST", "/interrupt")) {
        /* optional {prompt_id}: interrupt only that prompt */
        json_t *body = r->body_len ? json_loadb(r->body, r->body_len, 0, NULL) : NULL;
        const char *id = json_string_value(json_object_get(body, "prompt_id"));
        kiln_worker_interrupt(srv->worker, id);
        json_decref(body);
        *res = kiln_reply_json(r, 200, json_object());
    } else if (is(r, "POST", "/free")) {
        json_t *body = r->body_len ? json_loadb(r->body, r->body_len, 0, NULL) : NULL;
        if (json_is_true(json_object_get(body, "unload_models")) || json_is_true(json_object_get(body, "free_memory"))) {
            char cur[64];
            /* unloading under a running job would pull weights from under it; the engine's own lock waits */
            if (srv->cfg.engine && srv->cfg.engine->unload && !kiln_worker_current(srv->worker, cur))
            {
                srv->cfg.engine->unload(srv->cfg.engine->self);
                kiln_metrics_unloaded(srv->metrics);
            }
        }
        json_decref(body);
        *res = kiln_reply_json(r, 200, json_object());
    } else if (is(r, "GET", "/system_stats")) {
        *res = system_stats(r);
    } else if (is(r, "GET", "/object_info")) {
        *res = kiln_reply_json(r, 200, kiln_graph_object_info(srv->cfg.models_dir, srv->input_dir, NULL));
    } else if (!strcmp(r->method, "GET") && !strncmp(r->url, "/object_info/", 13)) {
        json_t *info = kiln_graph_object_info(srv->cfg.models_dir, srv->input_dir, r->url + 13);
        *res = info ? kiln_reply_json(r, 200, info) : kiln_reply_json(r, 200, json_object());
    } else if (!strcmp(r->method, "GET") && (!strcmp(r->url, "/models") || !strncmp(r->url, "/models/", 8))) {
        *res = models_route(r);
    } else {
        return false;
    }
    return true;
}

/* routes_jobs.c - ComfyUI's jobs API (comfy_execution/jobs.py), the queue and history as one list the frontend's
 * queue and assets panels read:
 *
 *   GET /jobs?status=a,b&workflow_id=W&sort_by=created_at|execution_duration&sort_order=asc|desc&limit=N&offset=K
 *       {jobs:[job], pagination:{offset, limit, total, has_more}}
 *   GET /jobs/{id}          one job with outputs, execution_status and workflow; 404 {error} when unknown
 *   POST /jobs/{id}/cancel, POST /jobs/cancel {job_ids:[...]}     {cancelled:[ids]}
 *
 * job: {id, status pending|in_progress|completed|failed|cancelled, priority, create_time (ms),
 * execution_start_time, execution_end_time, execution_error, outputs_count, preview_output, workflow_id}; keys
 * with no value are left out, as ComfyUI's prune_dict does. A job cancelled before it started is not listed
 * (ComfyUI drops it from queue and history); an interrupted one is "cancelled". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_internal.h"

#define JOBS_MAX 100000 /* jobs one listing looks at */

static const char *job_status(kiln_job_state s) {
    switch (s) {
    case KILN_JOB_QUEUED: return "pending";
    case KILN_JOB_RUNNING: return "in_progress";
    case KILN_JOB_SUCCEEDED: return "completed";
    case KILN_JOB_FAILED: return "failed";
    case KILN_JOB_INTERRUPTED: return "cancelled";
    default: return NULL;
    }
}

/* outputs_count and the preview (an output-type image first, else any image), as jobs.py counts them. */
static void outputs_summary(json_t *outputs, json_t *job) {
    int count = 0;
    json_t *preview = NULL, *fallback = NULL;
    const char *node;
    json_t *ui;
    json_object_foreach(outputs, node, ui) {
        const char *media;
        json_t *items;
        json_object_foreach(ui, media, items) {
            if (!strcmp(media, "animated") || !json_is_array(items)) continue;
            size_t i;
            json_t *it;
            json_array_foreach(items, i, it) {
                if (!json_is_object(it)) continue;
                count++;
                bool previewable = !strcmp(media, "images") || !strcmp(media, "video") || !strcmp(media, "audio");
                if (preview || !previewable) continue;
                bool out = !strcmp(json_string_value(json_object_get(it, "type")) ? json_string_value(json_object_get(it, "type")) : "", "output");
                if (!out && fallback) continue;
                json_t *e = json_copy(it);
                json_object_set_new(e, "nodeId", json_string(node));
                if (!json_object_get(e, "mediaType")) json_object_set_new(e, "mediaType", json_string(media));
                if (out) preview = e;
                else fallback = e;
            }
        }
    }
    json_object_set_new(job, "outputs_count", json_integer(count));
    if (preview) {
        json_object_set_new(job, "preview_output", preview);
        json_decref(fallback);
    } else if (fallback) {
        json_object_set_new(job, "preview_output", fallback);
    }
}

static json_t *job_json(const kiln_job *j, bool detail) {
    const char *status = job_status(j->state);
    if (!status) return NULL;
    json_t *req = json_loads(j->request, 0, NULL);
    json_t *extra = json_object_get(req, "extra_data");
    json_t *job = json_pack("{s:s, s:s, s:I, s:I}", "id", j->id, "status", status, "priority", (json_int_t)j->number,
                            "create_time", (json_int_t)j->created_ms);
    const char *wid = json_string_value(json_object_get(json_object_get(json_object_get(extra, "extra_pnginfo"), "workflow"), "id"));
    if (wid) json_object_set_new(job, "workflow_id", json_string(wid));
    bool final = kiln_job_state_final(j->state);
    if (j->started_ms && final) json_object_set_new(job, "execution_start_time", json_integer((json_int_t)j->started_ms));
    if (j->finished_ms && final) json_object_set_new(job, "execution_end_time", json_integer((json_int_t)j->finished_ms));
    if (j->state == KILN_JOB_FAILED && j->error) {
        json_t *e = json_loads(j->error, 0, NULL);
        if (json_is_object(e)) json_object_set_new(job, "execution_error", e);
        else json_decref(e);
    }
    json_t *outputs = j->result ? json_loads(j->result, 0, NULL) : NULL;
    if (final) outputs_summary(outputs, job);
    else json_object_set_new(job, "outputs_count", json_integer(0));
    if (detail && final) {
        json_t *messages = j->messages ? json_loads(j->messages, 0, NULL) : NULL;
        json_object_set_new(job, "outputs", outputs ? json_incref(outputs) : json_object());
        json_object_set_new(job, "execution_status",
                            json_pack("{s:s, s:b, s:o}", "status_str", j->state == KILN_JOB_SUCCEEDED ? "success" : "error",
                                      "completed", j->state == KILN_JOB_SUCCEEDED, "messages",
                                      messages ? messages : json_array()));
        json_object_set_new(job, "workflow", json_pack("{s:O, s:O}", "prompt", json_object_get(req, "prompt") ? json_object_get(req, "prompt") : json_null(),
                                                       "extra_data", extra ? extra : json_null()));
    }
    json_decref(outputs);
    json_decref(req);
    return job;
}

typedef struct list_ctx {
    json_t *jobs;
    unsigned status_mask; /* over job_status names: bit per kiln_job_state */
    const char *workflow_id;
} list_ctx;

static bool visit(void *ctx, const kiln_job *j) {
    list_ctx *l = ctx;
    if (!(l->status_mask & KILN_JOB_MASK(j->state))) return true;
    json_t *job = job_json(j, false);
    if (!job) return true;
    if (l->workflow_id && strcmp(json_string_value(json_object_get(job, "workflow_id")) ? json_string_value(json_object_get(job, "workflow_id")) : "", l->workflow_id) != 0) {
        json_decref(job);
        return true;
    }
    json_array_append_new(l->jobs, job);
    return json_array_size(l->jobs) < JOBS_MAX;
}

typedef struct keyed {
    json_int_t key;
    json_t *job;
} keyed;

static json_int_t sort_key(json_t *j, bool by_duration) {
    if (!by_duration) return json_integer_value(json_object_get(j, "create_time"));
    json_int_t s = json_integer_value(json_object_get(j, "execution_start_time")),
               e = json_integer_value(json_object_get(j, "execution_end_time"));
    return s && e ? e - s : 0;
}

static int cmp_asc(const void *a, const void *b) {
    json_int_t x = ((const keyed *)a)->key, y = ((const keyed *)b)->key;
    return x < y ? -1 : x > y;
}

static int cmp_desc(const void *a, const void *b) { return cmp_asc(b, a); }

static bool parse_count(const char *s, long lo, long *out) {
    if (!s) return true;
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > 1000000000L) return false;
    *out = v;
    return true;
}

static enum MHD_Result bad(kiln_req *r, const char *msg) {
    return kiln_reply_json(r, 400, json_pack("{s:s}", "error", msg));
}

static enum MHD_Result list_jobs(kiln_req *r) {
    unsigned mask = 0;
    const char *status = kiln_req_arg(r, "status");
    if (status && *status) {
        char buf[256];
        if (strlen(status) >= sizeof buf) return bad(r, "status: too long");
        snprintf(buf, sizeof buf, "%s", status);
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            int k = -1;
            for (int s = 0; s < KILN_JOB_STATE_COUNT; s++)
                if (job_status((kiln_job_state)s) && !strcmp(job_status((kiln_job_state)s), t)) k = s;
            if (k < 0) return bad(r, "status must be a comma-separated list of pending, in_progress, completed, failed, cancelled");
            mask |= KILN_JOB_MASK(k);
        }
    } else {
        mask = KILN_JOB_MASK(KILN_JOB_QUEUED) | KILN_JOB_MASK(KILN_JOB_RUNNING) | KILN_JOB_MASK(KILN_JOB_SUCCEEDED) |
               KILN_JOB_MASK(KILN_JOB_FAILED) | KILN_JOB_MASK(KILN_JOB_INTERRUPTED);
    }
    const char *sort_by = kiln_req_arg(r, "sort_by"), *order = kiln_req_arg(r, "sort_order");
    if (sort_by && strcmp(sort_by, "created_at") != 0 && strcmp(sort_by, "execution_duration") != 0)
        return bad(r, "sort_by must be created_at or execution_duration");
    if (order && strcmp(order, "asc") != 0 && strcmp(order, "desc") != 0) return bad(r, "sort_order must be asc or desc");
    long limit = -1, offset = 0;
    if (!parse_count(kiln_req_arg(r, "limit"), 1, &limit)) return bad(r, "limit must be a positive integer");
    if (!parse_count(kiln_req_arg(r, "offset"), 0, &offset)) return bad(r, "offset must be a non-negative integer");
    const char *wid = kiln_req_arg(r, "workflow_id");
    list_ctx l = {.jobs = json_array(), .status_mask = mask, .workflow_id = wid && *wid ? wid : NULL};
    kiln_store_list(r->srv->store, mask, false, 0, visit, &l, NULL);
    size_t n = json_array_size(l.jobs);
    keyed *items = calloc(n ? n : 1, sizeof *items);
    if (!items) {
        json_decref(l.jobs);
        return kiln_reply_json(r, 500, json_pack("{s:s}", "error", "out of memory"));
    }
    bool by_duration = sort_by && !strcmp(sort_by, "execution_duration");
    for (size_t i = 0; i < n; i++) items[i] = (keyed){sort_key(json_array_get(l.jobs, i), by_duration), json_array_get(l.jobs, i)};
    /* qsort is not stable; the store's order (queue number) breaks ties because keys rarely tie */
    qsort(items, n, sizeof *items, !order || !strcmp(order, "desc") ? cmp_desc : cmp_asc);
    json_t *page = json_array();
    size_t end = limit < 0 ? n : (size_t)offset + (size_t)limit;
    for (size_t i = (size_t)offset; i < n && i < end; i++) json_array_append(page, items[i].job);
    free(items);
    json_decref(l.jobs);
    return kiln_reply_json(r, 200, json_pack("{s:o, s:{s:I, s:I, s:I, s:b}}", "jobs", page, "pagination", "offset",
                                             (json_int_t)offset, "limit", (json_int_t)(limit < 0 ? (long)n : limit),
                                             "total", (json_int_t)n, "has_more", end < n));
}

static bool cancel_one(kiln_req *r, const char *id) {
    if (kiln_store_cancel(r->srv->store, id, NULL) == KILN_OK) return true;
    return kiln_worker_interrupt(r->srv->worker, id);
}

bool kiln_routes_jobs(kiln_req *r, enum MHD_Result *res) {
    const char *u = r->url;
    if (strcmp(u, "/jobs") != 0 && strncmp(u, "/jobs/", 6) != 0) return false;
    bool get = !strcmp(r->method, "GET"), post = !strcmp(r->method, "POST");
    if (!strcmp(u, "/jobs") && get) {
        *res = list_jobs(r);
    } else if (!strcmp(u, "/jobs/cancel") && post) {
        enum MHD_Result rr;
        json_t *body = kiln_req_json(r, false, &rr);
        if (!body) {
            *res = rr;
            return true;
        }
        json_t *ids = json_object_get(body, "job_ids"), *done = json_array();
        if (!json_is_array(ids) || json_array_size(ids) < 1 || json_array_size(ids) > 100) {
            json_decref(body);
            json_decref(done);
            *res = bad(r, "job_ids must be a list of 1 to 100 job ids");
            return true;
        }
        size_t i;
        json_t *v;
        json_array_foreach(ids, i, v) if (json_is_string(v) && cancel_one(r, json_string_value(v)))
            json_array_append(done, v);
        json_decref(body);
        kiln_broadcast_status(r->srv, NULL);
        *res = kiln_reply_json(r, 200, json_pack("{s:o}", "cancelled", done));
    } else {
        char id[64];
        const char *rest = u + 6, *slash = strchr(rest, '/');
        size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
        if (n == 0 || n >= sizeof id) {
            *res = kiln_reply_json(r, 404, json_pack("{s:s}", "error", "Job not found"));
            return true;
        }
        memcpy(id, rest, n);
        id[n] = 0;
        if (slash && !strcmp(slash, "/cancel") && post) {
            json_t *done = json_array();
            if (cancel_one(r, id)) json_array_append_new(done, json_string(id));
            kiln_broadcast_status(r->srv, NULL);
            *res = kiln_reply_json(r, 200, json_pack("{s:o}", "cancelled", done));
            return true;
        }
        kiln_job j;
        json_t *job = NULL;
        if (!slash && get && kiln_store_get(r->srv->store, id, &j, NULL) == KILN_OK) {
            job = job_json(&j, true);
            kiln_job_clear(&j);
        }
        *res = job ? kiln_reply_json(r, 200, job)
               : !slash && get ? kiln_reply_json(r, 404, json_pack("{s:s}", "error", "Job not found"))
                               : kiln_reply_not_found(r);
    }
    return true;
}

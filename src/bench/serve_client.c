/* serve_client.c - one request of `kiln bench serve` to a ComfyUI-API or an OpenAI-images server (serve_load.h).
 * A client is one thread's connection state; it never aborts the run: a failed request is recorded with its
 * reason (HTTP status, the server's message, a timeout) and counted as an error. */
#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "bench/serve_load.h"
#include "bench/target.h"
#include "bench/workflow.h"

#define MAX_ANSWER_BYTES (64u << 20) /* a b64 image of 2048 x 2048 fits */

struct kiln_serve_client {
    const kiln_serve_cfg *cfg;
    const json_t *graph; /* comfy template (borrowed) */
    kiln_target *comfy;  /* comfy */
    CURL *curl;          /* openai */
    char url[600];
};

kiln_status kiln_serve_client_open(const kiln_serve_cfg *cfg, const json_t *graph, kiln_serve_client **out,
                                   kiln_err *err) {
    *out = NULL;
    kiln_serve_client *c = kiln_calloc(1, sizeof *c);
    if (!c) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
    c->cfg = cfg;
    c->graph = graph;
    if (cfg->api == KILN_SERVE_API_COMFY) {
        kiln_http_opts ho = {.timeout_s = cfg->timeout_s, .poll_s = 0.02}; /* 50 polls/s per request in flight */
        kiln_status st = kiln_target_http_open(cfg->url, &ho, &c->comfy, err);
        if (st != KILN_OK) {
            kiln_free(c);
            return st;
        }
    } else {
        /* curl_global_init ran in kiln_bench_serve, before any thread started */
        c->curl = curl_easy_init();
        size_t l = strlen(cfg->url);
        while (l && cfg->url[l - 1] == '/') l--;
        snprintf(c->url, sizeof c->url, "%.*s/v1/images/generations", (int)l, cfg->url);
        if (!c->curl) {
            kiln_free(c);
            return KILN_FAIL(err, KILN_E_INTERNAL, "libcurl: cannot make a handle");
        }
    }
    *out = c;
    return KILN_OK;
}

void kiln_serve_client_close(kiln_serve_client *c) {
    if (!c) return;
    kiln_target_close(c->comfy);
    if (c->curl) curl_easy_cleanup(c->curl);
    kiln_free(c);
}

static void send_comfy(kiln_serve_client *c, const kiln_serve_req *rq, kiln_serve_res *res) {
    kiln_workflow w = {.graph = (json_t *)c->graph};
    char prefix[160];
    snprintf(prefix, sizeof prefix, "kiln-bench-serve/%s-%d", rq->tag, rq->index);
    json_t *g = kiln_workflow_instantiate(&w, rq->prompt, rq->seed, prefix);
    if (!g) {
        snprintf(res->error, sizeof res->error, "out of memory");
        return;
    }
    kiln_workflow_set_knobs(g, rq->width, rq->height, rq->steps);
    kiln_submit_result r = {0};
    kiln_err err = {0};
    if (kiln_target_submit(c->comfy, g, &r, &err) == KILN_OK) {
        res->ok = true;
        res->exec_s = r.exec_from_target ? r.exec_seconds : NAN;
    } else {
        snprintf(res->error, sizeof res->error, "%s", err.msg);
    }
    snprintf(res->id, sizeof res->id, "%s", r.prompt_id);
    kiln_submit_result_clear(&r);
    json_decref(g);
}

typedef struct answer {
    char *p;
    size_t len, cap;
    bool over;
} answer;

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *ud) {
    answer *a = ud;
    size_t n = size * nmemb;
    if (a->len + n + 1 > MAX_ANSWER_BYTES) {
        a->over = true;
        return 0;
    }
    return kiln_bytes_append(&a->p, &a->len, &a->cap, 65536, ptr, n) ? n : 0;
}

static void send_openai(kiln_serve_client *c, const kiln_serve_req *rq, kiln_serve_res *res) {
    char size[32];
    snprintf(size, sizeof size, "%dx%d", rq->width, rq->height);
    json_t *body = json_pack("{s:s,s:s,s:i,s:s}", "prompt", rq->prompt, "size", size, "n", 1, "response_format",
                             "b64_json");
    if (body && c->cfg->model) json_object_set_new(body, "model", json_string(c->cfg->model));
    if (body && rq->steps > 0) json_object_set_new(body, "num_inference_steps", json_integer(rq->steps));
    if (body) json_object_set_new(body, "seed", json_integer(rq->seed));
    char *payload = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!payload) {
        snprintf(res->error, sizeof res->error, "out of memory");
        return;
    }
    answer a = {0};
    CURL *h = c->curl;
    curl_easy_reset(h);
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(h, CURLOPT_URL, c->url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, payload);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &a);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(c->cfg->timeout_s * 1000));
    CURLcode rc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdr);
    free(payload);
    json_t *j = (rc == CURLE_OK && a.p) ? json_loadb(a.p, a.len, 0, NULL) : NULL;
    const json_t *d0 = json_array_get(json_object_get(j, "data"), 0);
    if (a.over) snprintf(res->error, sizeof res->error, "POST /v1/images/generations: answer over %u bytes", MAX_ANSWER_BYTES);
    else if (rc != CURLE_OK) snprintf(res->error, sizeof res->error, "POST /v1/images/generations: %s", curl_easy_strerror(rc));
    else if (status != 200) {
        const char *msg = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
        snprintf(res->error, sizeof res->error, "POST /v1/images/generations: HTTP %ld%s%.150s", status, msg ? ": " : "",
                 msg ? msg : "");
    } else if (!json_is_string(json_object_get(d0, "b64_json")) && !json_is_string(json_object_get(d0, "url")))
        snprintf(res->error, sizeof res->error, "POST /v1/images/generations: no data[0].b64_json or url in the answer");
    else res->ok = true;
    json_decref(j);
    kiln_free(a.p);
}

void kiln_serve_client_send(kiln_serve_client *c, const kiln_serve_req *rq, kiln_serve_res *res) {
    memset(res, 0, sizeof *res);
    res->exec_s = NAN;
    if (c->cfg->api == KILN_SERVE_API_COMFY) send_comfy(c, rq, res);
    else send_openai(c, rq, res);
}

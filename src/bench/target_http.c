/* target_http.c - a ComfyUI-API server as a benchmark target (see target.h; API facts in
 * shared/spec/server-api.md section 1). One prompt at a time: POST /prompt, poll GET /history/{id} until the
 * status says completed (or error), then GET /view for each output image. Every answer is validated: a server
 * that answers nonsense gets a clear error naming the route, never a crash. */
#include <curl/curl.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "base/clock.h"
#include "bench/target.h"

#define MAX_JSON_BYTES (16u << 20)
#define MAX_IMAGE_BYTES (256u << 20)
#define MAX_IMAGES 4096

typedef struct http_target {
    kiln_target base;
    char url[512];
    kiln_http_opts opts;
    CURL *curl;
    unsigned counter;
} http_target;

typedef struct body {
    char *p;
    size_t len, cap, max;
    bool over;
} body;

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *ud) {
    body *b = ud;
    size_t n = size * nmemb;
    if (b->len + n > b->max) {
        b->over = true;
        return 0; /* abort the transfer */
    }
    return kiln_bytes_append(&b->p, &b->len, &b->cap, 65536, ptr, n) ? n : 0;
}

/* One request. *out receives the body (kiln_free it); *status the HTTP status. */
static kiln_status request(http_target *t, const char *method, const char *path, const char *payload, size_t max,
                           long *status, body *out, kiln_err *err) {
    memset(out, 0, sizeof *out);
    out->max = max;
    char url[2048];
    snprintf(url, sizeof url, "%s%s", t->url, path);
    CURL *c = t->curl;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(t->opts.timeout_s * 1000));
    struct curl_slist *hdr = NULL;
    if (!strcmp(method, "POST")) {
        hdr = curl_slist_append(hdr, "Content-Type: application/json");
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, payload);
    }
    CURLcode rc = curl_easy_perform(c);
    curl_slist_free_all(hdr);
    *status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    if (out->over) {
        kiln_free(out->p);
        out->p = NULL;
        return KILN_FAIL(err, KILN_E_LIMIT, "%s %s: answer over %zu bytes", method, path, max);
    }
    if (rc != CURLE_OK) {
        kiln_free(out->p);
        out->p = NULL;
        return KILN_FAIL(err, KILN_E_IO, "%s %s%s: %s", method, t->url, path, curl_easy_strerror(rc));
    }
    return KILN_OK;
}

/* A JSON answer of a route, status 200 required. */
static kiln_status request_json(http_target *t, const char *method, const char *path, const char *payload,
                                json_t **out, kiln_err *err) {
    *out = NULL;
    long status;
    body b;
    KILN_TRY(request(t, method, path, payload, MAX_JSON_BYTES, &status, &b, err));
    json_error_t je;
    json_t *j = b.p ? json_loadb(b.p, b.len, 0, &je) : NULL;
    if (status != 200) {
        const char *msg = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
        kiln_status st = KILN_FAIL(err, KILN_E_INVALID, "%s %s: HTTP %ld%s%s", method, path, status, msg ? ": " : "",
                                   msg ? msg : "");
        json_decref(j);
        kiln_free(b.p);
        return st;
    }
    kiln_free(b.p);
    if (!j) return KILN_FAIL(err, KILN_E_FORMAT, "%s %s: the answer is not JSON", method, path);
    *out = j;
    return KILN_OK;
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)(fmod(s, 1.0) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Milliseconds stamp of the first message named event in status.messages, NaN if absent. */
static double message_stamp(const json_t *messages, const char *event) {
    for (size_t i = 0; i < json_array_size(messages); i++) {
        const json_t *m = json_array_get(messages, i);
        if (json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
            !strcmp(json_string_value(json_array_get(m, 0)), event)) {
            const json_t *ts = json_object_get(json_array_get(m, 1), "timestamp");
            if (json_is_number(ts)) return json_number_value(ts);
        }
    }
    return NAN;
}

/* kiln serve's "kiln" extension of execution_success: the engine's time and its stages (ComfyUI has none). */
static void take_kiln_extension(const json_t *messages, kiln_submit_result *out) {
    for (size_t i = 0; i < json_array_size(messages); i++) {
        const json_t *m = json_array_get(messages, i);
        if (json_array_size(m) != 2 || !json_is_string(json_array_get(m, 0)) ||
            strcmp(json_string_value(json_array_get(m, 0)), "execution_success"))
            continue;
        const json_t *ext = json_object_get(json_array_get(m, 1), "kiln");
        const json_t *ms = json_object_get(ext, "engine_ms"), *stages = json_object_get(ext, "stages");
        if (json_is_number(ms)) out->engine_s = json_number_value(ms) / 1000.0;
        bool ok = json_is_array(stages) && json_array_size(stages) > 0;
        for (size_t k = 0; ok && k < json_array_size(stages); k++) {
            const json_t *st = json_array_get(stages, k);
            ok = json_is_string(json_object_get(st, "name")) && json_is_number(json_object_get(st, "duration_ms"));
        }
        if (ok && !out->stages) out->stages = json_deep_copy(stages);
    }
}

static void copy_str(char *dst, size_t cap, const char *src) { snprintf(dst, cap, "%s", src ? src : ""); }

static kiln_status fetch_image(http_target *t, kiln_bench_image *img, kiln_err *err) {
    char *f = curl_easy_escape(t->curl, img->filename, 0), *s = curl_easy_escape(t->curl, img->subfolder, 0),
         *ty = curl_easy_escape(t->curl, img->type, 0);
    char path[2048];
    snprintf(path, sizeof path, "/view?filename=%s&subfolder=%s&type=%s", f ? f : "", s ? s : "", ty ? ty : "");
    curl_free(f);
    curl_free(s);
    curl_free(ty);
    long status;
    body b;
    KILN_TRY(request(t, "GET", path, NULL, MAX_IMAGE_BYTES, &status, &b, err));
    kiln_status st = KILN_OK;
    if (status != 200) st = KILN_FAIL(err, KILN_E_NOT_FOUND, "GET /view %s: HTTP %ld", img->filename, status);
    img->bytes = b.len;
    if (st == KILN_OK)
        st = kiln_png_pixel_sha256(b.p, b.len, img->pixel_sha256, &img->width, &img->height, err);
    if (st != KILN_OK) kiln_err_prefix(err, "image %s", img->filename);
    if (st == KILN_OK && t->opts.save_dir) {
        /* Local copy under a name of our own: the server's name could hold anything. */
        snprintf(img->saved, sizeof img->saved, "%s/%s-%u.png", t->opts.save_dir, img->filename[0] ? "img" : "x",
                 ++t->counter);
        FILE *out = fopen(img->saved, "wb");
        if (!out || fwrite(b.p, 1, b.len, out) != b.len) st = KILN_FAIL(err, KILN_E_IO, "%s: %s", img->saved, strerror(errno));
        if (out) fclose(out);
    }
    kiln_free(b.p);
    return st;
}

static kiln_status http_submit(kiln_target *base, const json_t *graph, kiln_submit_result *out, kiln_err *err) {
    http_target *t = (http_target *)base;
    json_t *req = json_pack("{s:O,s:s}", "prompt", graph, "client_id", "kiln-bench");
    char *payload = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    if (!payload) return KILN_FAIL(err, KILN_E_NOMEM, "submit: out of memory");
    double c0 = kiln_clock_s();
    out->t0 = kiln_clock_wall_s();
    json_t *ans;
    out->queued_t = out->running_t = out->done_t = out->seen_t = out->engine_s = NAN;
    kiln_status st = request_json(t, "POST", "/prompt", payload, &ans, err);
    free(payload);
    if (st != KILN_OK) return st;
    out->queued_t = kiln_clock_wall_s();
    const char *id = json_string_value(json_object_get(ans, "prompt_id"));
    if (!id || !*id || strlen(id) >= sizeof out->prompt_id || strchr(id, '/') || strchr(id, '?')) {
        json_decref(ans);
        return KILN_FAIL(err, KILN_E_FORMAT, "POST /prompt: no usable prompt_id in the answer");
    }
    copy_str(out->prompt_id, sizeof out->prompt_id, id);
    json_decref(ans);
    /* Poll the history until the prompt is done. */
    char path[256];
    snprintf(path, sizeof path, "/history/%s", out->prompt_id);
    json_t *entry = NULL, *hist = NULL;
    for (;;) {
        KILN_TRY(request_json(t, "GET", path, NULL, &hist, err));
        entry = json_object_get(hist, out->prompt_id);
        const json_t *status = json_object_get(entry, "status");
        const char *ss = json_string_value(json_object_get(status, "status_str"));
        if (ss && !strcmp(ss, "error")) {
            json_decref(hist);
            return KILN_FAIL(err, KILN_E_INVALID, "prompt %s: the server reports an execution error", out->prompt_id);
        }
        if (entry && (json_is_true(json_object_get(status, "completed")) || (ss && !strcmp(ss, "success")))) break;
        json_decref(hist);
        hist = NULL;
        if (kiln_clock_s() - c0 > t->opts.timeout_s)
            return KILN_FAIL(err, KILN_E_LIMIT, "prompt %s: not done after %.0f s", out->prompt_id, t->opts.timeout_s);
        sleep_s(t->opts.poll_s);
    }
    out->seen_t = kiln_clock_wall_s();
    const json_t *msgs = json_object_get(json_object_get(entry, "status"), "messages");
    double start = message_stamp(msgs, "execution_start"), done = message_stamp(msgs, "execution_success");
    out->running_t = start / 1000.0;
    out->done_t = done / 1000.0;
    take_kiln_extension(msgs, out);
    /* Collect output images in node-id order (object order is not guaranteed). */
    const json_t *outputs = json_object_get(entry, "outputs");
    size_t n = 0;
    const char *node;
    json_t *o;
    json_object_foreach((json_t *)outputs, node, o) n += json_array_size(json_object_get(o, "images"));
    if (n == 0 || n > MAX_IMAGES) {
        json_decref(hist);
        return KILN_FAIL(err, KILN_E_FORMAT, "prompt %s: %zu output images in /history", out->prompt_id, n);
    }
    out->images = kiln_calloc(n, sizeof *out->images);
    if (!out->images) {
        json_decref(hist);
        return KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
    }
    json_object_foreach((json_t *)outputs, node, o) {
        const json_t *imgs = json_object_get(o, "images");
        for (size_t i = 0; i < json_array_size(imgs); i++) {
            const json_t *im = json_array_get(imgs, i);
            kiln_bench_image *dst = &out->images[out->n_images];
            const char *fn = json_string_value(json_object_get(im, "filename"));
            if (!fn || !*fn) {
                json_decref(hist);
                return KILN_FAIL(err, KILN_E_FORMAT, "prompt %s: an output image without a filename", out->prompt_id);
            }
            copy_str(dst->filename, sizeof dst->filename, fn);
            copy_str(dst->subfolder, sizeof dst->subfolder, json_string_value(json_object_get(im, "subfolder")));
            copy_str(dst->type, sizeof dst->type, json_string_value(json_object_get(im, "type")));
            if (!dst->type[0]) copy_str(dst->type, sizeof dst->type, "output");
            out->n_images++;
        }
    }
    json_decref(hist);
    for (int i = 0; i < out->n_images; i++) KILN_TRY(fetch_image(t, &out->images[i], err));
    out->t1 = kiln_clock_wall_s();
    out->wall_seconds = kiln_clock_s() - c0;
    /* exec: the server's own stamps; a server without them is timed from the client (and says so in the log). */
    out->exec_from_target = !isnan(start) && !isnan(done) && done >= start;
    out->exec_seconds = out->exec_from_target ? (done - start) / 1000.0 : out->wall_seconds;
    return KILN_OK;
}

static json_t *http_system_stats(kiln_target *base) {
    http_target *t = (http_target *)base;
    json_t *j;
    kiln_err err = {0};
    if (request_json(t, "GET", "/system_stats", NULL, &j, &err) != KILN_OK) return NULL;
    json_t *dev = json_incref(json_object_get(j, "devices"));
    json_decref(j);
    if (!json_is_array(dev)) {
        json_decref(dev);
        return NULL;
    }
    return dev;
}

static void http_close(kiln_target *base) {
    http_target *t = (http_target *)base;
    curl_easy_cleanup(t->curl);
    kiln_free(t);
}

static const kiln_target_ops http_ops = {http_submit, http_system_stats, http_close};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

kiln_status kiln_target_http_open(const char *url, const kiln_http_opts *opts, kiln_target **out, kiln_err *err) {
    *out = NULL;
    if (!url || (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)) || strlen(url) >= 500)
        return KILN_FAIL(err, KILN_E_INVALID, "target URL \"%s\": http://host:port expected", url ? url : "");
    pthread_once(&curl_once, curl_init_once);
    http_target *t = kiln_calloc(1, sizeof *t);
    if (!t) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
    t->curl = curl_easy_init();
    if (!t->curl) {
        kiln_free(t);
        return KILN_FAIL(err, KILN_E_INTERNAL, "libcurl: cannot make a handle");
    }
    snprintf(t->url, sizeof t->url, "%s", url);
    size_t l = strlen(t->url);
    while (l && t->url[l - 1] == '/') t->url[--l] = 0;
    t->opts.timeout_s = opts && opts->timeout_s > 0 ? opts->timeout_s : 600;
    t->opts.poll_s = opts && opts->poll_s > 0 ? opts->poll_s : 0.05;
    t->opts.save_dir = opts ? opts->save_dir : NULL;
    t->base.ops = &http_ops;
    snprintf(t->base.kind, sizeof t->base.kind, "comfyui-http");
    snprintf(t->base.describe, sizeof t->base.describe, "%s", t->url);
    *out = &t->base;
    return KILN_OK;
}

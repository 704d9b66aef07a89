/* openai_run.c - one images request end to end: find the job an earlier request with the same Idempotency-Key
 * made (its id is derived from the key, so the job store itself makes the key durable and shared by every
 * node), or queue a new one; wait for it; answer with its images as b64_json or signed /view links, converted to
 * the asked format, or as a stream of server-sent events (partial images, then the completed ones). */
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "io/image_png.h"
#include "server/openai.h"

#define URL_TTL_S 3600 /* signed links expire after an hour */

static char *b64(const uint8_t *buf, size_t n) {
    char *out = kiln_malloc(4 * ((n + 2) / 3) + 1);
    if (out) EVP_EncodeBlock((unsigned char *)out, buf, (int)n);
    return out;
}

static bool read_all(const char *path, uint8_t **out, size_t *len) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0 || sb.st_size <= 0 || sb.st_size > (1 << 28)) {
        if (fd >= 0) close(fd);
        return false;
    }
    size_t n = (size_t)sb.st_size, got = 0;
    uint8_t *buf = kiln_malloc(n);
    while (buf && got < n) {
        ssize_t rd = read(fd, buf + got, n - got);
        if (rd <= 0) break;
        got += (size_t)rd;
    }
    close(fd);
    if (!buf || got != n) {
        kiln_free(buf);
        return false;
    }
    *out = buf;
    *len = n;
    return true;
}

static bool write_atomic(const char *path, const uint8_t *buf, size_t n) {
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid()) >= (int)sizeof tmp) return false;
    FILE *f = fopen(tmp, "wb");
    if (!f) return false;
    bool ok = fwrite(buf, 1, n, f) == n;
    ok = fclose(f) == 0 && ok;
    if (ok) ok = rename(tmp, path) == 0;
    if (!ok) unlink(tmp);
    return ok;
}

/* One saved image of the job in the asked format: the bytes (b64 wanted) and/or the file name of that format
 * beside the PNG (url wanted; written once, then reused). */
static bool image_bytes(kiln_server *srv, const char *sub, const char *file, kiln_oai_format f, int quality,
                        uint8_t **bytes, size_t *len, char *fmt_file, size_t fmt_cap) {
    *bytes = NULL;
    if (!kiln_rel_path_ok(file, false) || strchr(file, '/') || (sub[0] && !kiln_rel_path_ok(sub, false)))
        return false;
    char png[PATH_MAX];
    if (snprintf(png, sizeof png, "%s/%s%s%s", srv->output_dir, sub, sub[0] ? "/" : "", file) >= (int)sizeof png ||
        !kiln_path_inside(srv->output_dir, png, false))
        return false;
    snprintf(fmt_file, fmt_cap, "%s", file);
    if (f == KILN_OAI_PNG) return read_all(png, bytes, len);
    const char *dot = strrchr(file, '.');
    int stem = dot ? (int)(dot - file) : (int)strlen(file);
    snprintf(fmt_file, fmt_cap, "%.*s_q%d.%s", stem, file, quality, f == KILN_OAI_JPEG ? "jpg" : "webp");
    char conv[PATH_MAX];
    if (snprintf(conv, sizeof conv, "%s/%s%s%s", srv->output_dir, sub, sub[0] ? "/" : "", fmt_file) >=
        (int)sizeof conv)
        return false;
    if (access(conv, R_OK) == 0 && read_all(conv, bytes, len)) return true;
    uint8_t *rgb = NULL;
    int w = 0, h = 0;
    kiln_err err = {0};
    if (kiln_png_read(png, &rgb, &w, &h, NULL, NULL, &err) != KILN_OK) return false;
    bool ok = kiln_image_encode(f, rgb, w, h, quality, bytes, len);
    kiln_free(rgb);
    if (ok) write_atomic(conv, *bytes, *len); /* for url responses; a failure only costs a re-encode */
    return ok;
}

/* The host for links: the request's Host header when it is a plain host[:port], else the listen address. */
static void link_host(kiln_req *r, char *out, size_t cap) {
    const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Host");
    bool ok = h && *h && strlen(h) < 200;
    for (const char *p = h; ok && *p; p++)
        ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr(".-:[]", *p);
    if (ok)
        snprintf(out, cap, "%s", h);
    else
        snprintf(out, cap, "%s:%d", r->srv->listen, r->srv->port);
}

/* data[] of the finished job: one entry per saved image. false (and *bad set) when a file cannot be read. */
static json_t *job_data(kiln_req *r, const kiln_job *j, const kiln_oai_params *p, bool force_b64, bool *bad) {
    kiln_server *srv = r->srv;
    json_t *outputs = json_loads(j->result ? j->result : "{}", 0, NULL), *data = json_array();
    char host[256];
    link_host(r, host, sizeof host);
    const char *node;
    json_t *out;
    *bad = false;
    json_object_foreach(outputs, node, out) {
        size_t i;
        json_t *img;
        json_array_foreach(json_object_get(out, "images"), i, img) {
            const char *file = json_string_value(json_object_get(img, "filename"));
            const char *sub = json_string_value(json_object_get(img, "subfolder"));
            if (!file || !sub) continue;
            uint8_t *bytes = NULL;
            size_t len = 0;
            char fmt_file[600];
            if (!image_bytes(srv, sub, file, p->format, p->compression, &bytes, &len, fmt_file, sizeof fmt_file)) {
                *bad = true;
                break;
            }
            if (p->url && !force_b64) {
                char q[2048], url[2400];
                if (!kiln_url_sign(srv, fmt_file, sub, "output", (long long)time(NULL) + URL_TTL_S, q, sizeof q)) {
                    kiln_free(bytes);
                    *bad = true;
                    break;
                }
                snprintf(url, sizeof url, "http://%s/view?%s", host, q);
                json_array_append_new(data, json_pack("{s:s, s:s}", "url", url, "revised_prompt", p->prompt));
            } else {
                char *s = b64(bytes, len);
                if (s) json_array_append_new(data, json_pack("{s:s, s:s}", "b64_json", s, "revised_prompt", p->prompt));
                kiln_free(s);
                *bad = !s;
            }
            kiln_free(bytes);
        }
        if (*bad) break;
    }
    json_decref(outputs);
    return data;
}

/* The job's failure as a readable message (no node ids, no server paths). Returns whether the engine refused the
 * request as it was asked (kiln status invalid, limit or unsupported: a size that does not fit this server's
 * memory, a setting the model cannot honour): the client's to change, so an invalid_request_error (400) rather
 * than a server_error (500); a retry gets the same answer either way. */
static bool job_failure(const kiln_job *j, char *msg, size_t cap) {
    json_t *e = j->error ? json_loads(j->error, 0, NULL) : NULL;
    const char *m = json_string_value(json_object_get(e, "exception_message"));
    const char *type = json_string_value(json_object_get(e, "exception_type")); /* kiln_status_name (worker.c) */
    bool refused = false;
    if (j->state == KILN_JOB_FAILED) {
        snprintf(msg, cap, "image generation failed: %s", m ? m : "unknown error");
        refused = type && (!strcmp(type, kiln_status_name(KILN_E_INVALID)) ||
                           !strcmp(type, kiln_status_name(KILN_E_LIMIT)) ||
                           !strcmp(type, kiln_status_name(KILN_E_UNSUPPORTED)));
    } else
        snprintf(msg, cap, "image generation was %s before it finished", kiln_job_state_name(j->state));
    json_decref(e);
    return refused;
}

static double peak_mb(const kiln_job *j) {
    json_t *msgs = j->messages ? json_loads(j->messages, 0, NULL) : NULL;
    json_t *last = json_array_get(json_array_get(msgs, json_array_size(msgs) - 1), 1);
    json_int_t b = json_integer_value(json_object_get(json_object_get(last, "kiln"), "peak_memory_bytes"));
    json_decref(msgs);
    return b > 0 ? (double)b / (1024.0 * 1024.0) : 0.0;
}

/* ---- the stream -------------------------------------------------------------------------------------------- */

typedef struct oai_stream {
    kiln_server *srv;
    kiln_req *r; /* valid while libmicrohttpd calls the reader (the request lives until the connection ends) */
    kiln_oai_params p;
    char *prompt_copy; /* p.prompt points here (the body is gone after the handler returns) */
    char id[64];
    int next_partial;
    bool done;
    double deadline;
    char *buf;
    size_t len, off;
} oai_stream;

static void stream_event(oai_stream *st, const char *event, json_t *data) {
    char *txt = json_dumps(data, JSON_COMPACT);
    json_decref(data);
    if (!txt) return;
    size_t need = strlen(event) + strlen(txt) + 32;
    char *nb = kiln_realloc(st->buf, st->len + need);
    if (nb) {
        st->buf = nb;
        st->len += (size_t)snprintf(nb + st->len, need, "event: %s\ndata: %s\n\n", event, txt);
    }
    free(txt);
}

static json_t *event_base(oai_stream *st, const char *type, const char *b64s) {
    char size[32];
    snprintf(size, sizeof size, "%dx%d", st->p.width, st->p.height);
    return json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:s}", "type", type, "b64_json", b64s, "created_at",
                     (json_int_t)time(NULL), "size", size, "quality", "auto", "background", "opaque",
                     "output_format", kiln_oai_format_name(st->p.format));
}

/* Fills st->buf with the next events; false when nothing is left to send. */
static bool stream_next(oai_stream *st) {
    if (st->done) return false;
    kiln_job j;
    for (;;) {
        uint8_t *rgb = NULL;
        int w = 0, h = 0;
        if (st->next_partial < st->p.partial_images &&
            kiln_partials_take(st->srv->partials, st->id, st->next_partial, 0.2, &rgb, &w, &h)) {
            uint8_t *big = kiln_image_resize_nearest(rgb, w, h, st->p.width, st->p.height), *enc = NULL;
            size_t len = 0;
            if (big && kiln_image_encode(st->p.format, big, st->p.width, st->p.height, st->p.compression, &enc, &len)) {
                char *s = b64(enc, len);
                json_t *ev = event_base(st, "image_generation.partial_image", s ? s : "");
                json_object_set_new(ev, "partial_image_index", json_integer(st->next_partial));
                stream_event(st, "image_generation.partial_image", ev);
                kiln_free(s);
            }
            kiln_free(big);
            kiln_free(enc);
            kiln_free(rgb);
            st->next_partial++;
            if (st->len) return true;
            continue;
        }
        if (kiln_store_get(st->srv->store, st->id, &j, NULL) != KILN_OK) {
            stream_event(st, "error", json_pack("{s:s, s:{s:s, s:s, s:n, s:s}}", "type", "error", "error", "message",
                                                "the job was deleted before it finished", "type", "server_error",
                                                "param", "code", "job_deleted"));
            st->done = true;
            return true;
        }
        if (kiln_job_state_final(j.state)) break;
        kiln_job_clear(&j);
        if (kiln_clock_s() > st->deadline) {
            stream_event(st, "error", json_pack("{s:s, s:{s:s, s:s, s:n, s:s}}", "type", "error", "error", "message",
                                                "the image is still being made; ask again with the same Idempotency-Key",
                                                "type", "timeout_error", "param", "code", "timeout"));
            st->done = true;
            return true;
        }
        if (kiln_worker_stopping(st->srv->worker)) {
            stream_event(st, "error", json_pack("{s:s, s:{s:s, s:s, s:n, s:s}}", "type", "error", "error", "message",
                                                "the server is shutting down; ask again with the same Idempotency-Key",
                                                "type", "server_error", "param", "code", "shutting_down"));
            st->done = true;
            return true;
        }
        if (st->next_partial >= st->p.partial_images) kiln_worker_wait(st->srv->worker, st->id, 0.5);
    }
    st->done = true;
    if (j.state == KILN_JOB_SUCCEEDED) {
        bool bad = false;
        json_t *data = job_data(st->r, &j, &st->p, true, &bad);
        size_t i;
        json_t *d;
        json_array_foreach(data, i, d) {
            json_t *ev = event_base(st, "image_generation.completed", json_string_value(json_object_get(d, "b64_json")));
            json_object_set_new(ev, "usage", json_pack("{s:i, s:i, s:i, s:{s:i, s:i}}", "input_tokens", 0,
                                                       "output_tokens", 0, "total_tokens", 0, "input_tokens_details",
                                                       "image_tokens", 0, "text_tokens", 0));
            stream_event(st, "image_generation.completed", ev);
        }
        json_decref(data);
        if (bad)
            stream_event(st, "error", json_pack("{s:s, s:{s:s, s:s, s:n, s:s}}", "type", "error", "error", "message",
                                                "could not read the saved image", "type", "server_error", "param",
                                                "code", "io_error"));
    } else {
        char msg[1200], clean[1200];
        bool refused = job_failure(&j, msg, sizeof msg);
        kiln_scrub_paths(msg, clean, sizeof clean);
        stream_event(st, "error", json_pack("{s:s, s:{s:s, s:s, s:n, s:s}}", "type", "error", "error", "message", clean,
                                            "type", refused ? "invalid_request_error" : "server_error", "param",
                                            "code", refused ? "request_refused" : "generation_failed"));
    }
    kiln_job_clear(&j);
    return st->len > 0;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    oai_stream *st = cls;
    (void)pos;
    if (st->off == st->len) {
        st->off = st->len = 0;
        if (!stream_next(st)) return MHD_CONTENT_READER_END_OF_STREAM;
    }
    size_t n = st->len - st->off < max ? st->len - st->off : max;
    memcpy(buf, st->buf + st->off, n);
    st->off += n;
    return (ssize_t)n;
}

static void stream_free(void *cls) {
    oai_stream *st = cls;
    kiln_partials_forget(st->srv->partials, st->id);
    kiln_free(st->prompt_copy);
    kiln_free(st->buf);
    kiln_free(st);
}

static enum MHD_Result reply_stream(kiln_req *r, const kiln_oai_params *p, const char *id) {
    oai_stream *st = kiln_calloc(1, sizeof *st);
    if (!st || !(st->prompt_copy = kiln_strdup(p->prompt))) {
        kiln_free(st);
        return kiln_oai_error(r, 500, true, "server_error", NULL, "out_of_memory", "out of memory");
    }
    st->srv = r->srv;
    st->r = r;
    st->p = *p;
    st->p.prompt = st->prompt_copy;
    st->p.negative = NULL;
    st->p.user = NULL;
    snprintf(st->id, sizeof st->id, "%s", id);
    st->deadline = kiln_clock_s() + r->srv->cfg.request_timeout_s;
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, stream_read, st,
                                                                  stream_free);
    if (!resp) {
        stream_free(st);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "text/event-stream");
    MHD_add_response_header(resp, "Cache-Control", "no-store");
    enum MHD_Result res = MHD_queue_response(r->conn, 200, resp);
    MHD_destroy_response(resp);
    r->replied = true;
    return res;
}

/* ---- the request --------------------------------------------------------------------------------------------- */

/* The stored job of an earlier request with this key: it must have been made from the same body. */
static bool same_body(const kiln_job *j, const kiln_oai_params *p) {
    json_t *req = json_loads(j->request, 0, NULL);
    const char *sha = json_string_value(json_object_get(json_object_get(req, "openai"), "body_sha256"));
    bool same = sha && !strcmp(sha, p->body_sha);
    json_decref(req);
    return same;
}

enum MHD_Result kiln_oai_run(kiln_req *r, const kiln_oai_params *p, json_t *graph) {
    kiln_server *srv = r->srv;
    enum MHD_Result res;
    char id[64] = "";
    if (p->idem_key[0])
        kiln_oai_idem_id(p->idem_key, id);
    else
        kiln_uuid4(id);
    kiln_job j;
    bool existed = p->idem_key[0] && kiln_store_get(srv->store, id, &j, NULL) == KILN_OK;
    if (!existed) {
        if (p->stream && p->partial_images > 0) kiln_partials_want(srv->partials, id, p->partial_images, p->steps);
        char size[32];
        snprintf(size, sizeof size, "%dx%d", p->width, p->height);
        json_t *meta = json_pack("{s:{s:s, s:s, s:s, s:s, s:s}}", "openai", "response_format", p->url ? "url" : "b64_json",
                                 "prompt", p->prompt, "output_format", kiln_oai_format_name(p->format), "size", size,
                                 "body_sha256", p->body_sha);
        if (p->idem_key[0]) json_object_set_new(json_object_get(meta, "openai"), "idempotency_key", json_string(p->idem_key));
        kiln_submit s = {.graph = graph, .kind = "openai", .extra_request = meta, .client_id = p->user,
                         .reuse_existing = p->idem_key[0] != 0};
        snprintf(s.id, sizeof s.id, "%s", id);
        bool queued = kiln_submit_job(r, &s, true, &res);
        json_decref(meta);
        json_decref(s.node_errors);
        if (!queued) {
            kiln_partials_forget(srv->partials, id);
            return res;
        }
        existed = s.existed && kiln_store_get(srv->store, id, &j, NULL) == KILN_OK; /* a concurrent twin won */
    }
    if (existed) {
        bool same = same_body(&j, p);
        kiln_job_clear(&j);
        if (!same)
            return kiln_oai_error(r, 400, false, "invalid_request_error", NULL, "idempotency_key_reused",
                                  "this Idempotency-Key was used with a different request body");
    }
    if (p->stream) return reply_stream(r, p, id);

    bool done = kiln_worker_wait(srv->worker, id, srv->cfg.request_timeout_s);
    if (!done || kiln_store_get(srv->store, id, &j, NULL) != KILN_OK)
        return kiln_oai_error(r, 504, true, "timeout_error", NULL, "timeout",
                              "the image is still being made (job %s); retry with the same Idempotency-Key header to "
                              "get it, or read /history/%s", id, id);
    if (j.state != KILN_JOB_SUCCEEDED) {
        char msg[1200];
        bool refused = job_failure(&j, msg, sizeof msg);
        kiln_job_clear(&j);
        if (refused) return kiln_oai_error(r, 400, false, "invalid_request_error", NULL, "request_refused", "%s", msg);
        return kiln_oai_error(r, 500, false, "server_error", NULL, "generation_failed", "%s", msg);
    }
    bool bad = false;
    json_t *data = job_data(r, &j, p, false, &bad);
    double secs = (double)(j.finished_ms - j.started_ms) / 1000.0, peak = peak_mb(&j);
    kiln_job_clear(&j);
    if (bad) {
        json_decref(data);
        return kiln_oai_error(r, 500, true, "server_error", NULL, "io_error", "could not read the saved image");
    }
    char size[32];
    snprintf(size, sizeof size, "%dx%d", p->width, p->height);
    return kiln_reply_json(r, 200, json_pack("{s:I, s:o, s:s, s:s, s:s, s:s, s:f, s:f, s:{s:i, s:i, s:i}}",
                                             "created", (json_int_t)time(NULL), "data", data, "output_format",
                                             kiln_oai_format_name(p->format), "size", size, "quality", "auto",
                                             "background", "opaque", "inference_time_s", secs, "peak_memory_mb", peak,
                                             "usage", "total_tokens", 0, "input_tokens", 0, "output_tokens", 0));
}

/* http.c - the libmicrohttpd daemon: request accumulation with a body limit, bearer-token auth, routing and
 * the reply helpers (see server_internal.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/socket.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "base/clock.h"
#include "base/log.h"
#include "server/openai.h"
#include "server/server_internal.h"

kiln_server_config kiln_server_config_default(void) {
    return (kiln_server_config){.listen = "127.0.0.1", .port = 8188, .max_body = 8u << 20, .max_queue = 256,
                                .conn_timeout_s = 30, .request_timeout_s = 600, .batch_images = 4,
                                .limits = kiln_graph_limits_default()};
}

void kiln_uuid4(char out[37]) {
    unsigned char b[16];
    if (RAND_bytes(b, sizeof b) != 1) {
        uint64_t t = (uint64_t)kiln_clock_ns();
        for (int i = 0; i < 16; i++) b[i] = (unsigned char)((t >> ((i % 8) * 8)) ^ (unsigned)rand());
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
             b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

/* ---- replies ------------------------------------------------------------------------------------------------ */

static enum MHD_Result reply_buffer_h(kiln_req *r, unsigned status, const char *type, char *buf, size_t len,
                                      const char *const *headers) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(buf);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", type);
    MHD_add_response_header(resp, "Cache-Control", "no-store");
    for (int i = 0; headers && headers[i] && headers[i + 1]; i += 2) MHD_add_response_header(resp, headers[i], headers[i + 1]);
    enum MHD_Result res = MHD_queue_response(r->conn, status, resp);
    MHD_destroy_response(resp);
    r->replied = true;
    return res;
}

static enum MHD_Result reply_buffer(kiln_req *r, unsigned status, const char *type, char *buf, size_t len) {
    return reply_buffer_h(r, status, type, buf, len, NULL);
}

enum MHD_Result kiln_reply_json(kiln_req *r, unsigned status, json_t *body) {
    return kiln_reply_json_headers(r, status, body, NULL);
}

enum MHD_Result kiln_reply_json_headers(kiln_req *r, unsigned status, json_t *body, const char *const *headers) {
    char *txt = body ? json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    json_decref(body);
    if (!txt) {
        txt = strdup("{\"error\":{\"type\":\"server_error\",\"message\":\"out of memory\"}}");
        status = 500;
        if (!txt) return MHD_NO;
    }
    return reply_buffer_h(r, status, "application/json", txt, strlen(txt), headers);
}

enum MHD_Result kiln_reply_text(kiln_req *r, unsigned status, const char *content_type, const char *text) {
    char *c = strdup(text);
    if (!c) return MHD_NO;
    return reply_buffer(r, status, content_type, c, strlen(c));
}

enum MHD_Result kiln_reply_comfy_error(kiln_req *r, unsigned status, const char *type, const char *message,
                                       const char *details) {
    char msg[1200], det[1200];
    kiln_scrub_paths(message, msg, sizeof msg);
    kiln_scrub_paths(details ? details : "", det, sizeof det);
    return kiln_reply_json(r, status,
                           json_pack("{s:{s:s, s:s, s:s, s:{}}, s:{}}", "error", "type", type, "message", msg,
                                     "details", det, "extra_info", "node_errors"));
}

enum MHD_Result kiln_reply_openai_error(kiln_req *r, unsigned status, const char *message, const char *type,
                                        const char *param, const char *code) {
    char msg[1200];
    kiln_scrub_paths(message, msg, sizeof msg);
    json_t *e = json_pack("{s:s, s:s, s:o, s:o}", "message", msg, "type", type, "param",
                          param ? json_string(param) : json_null(), "code", code ? json_string(code) : json_null());
    bool retry = status >= 500 || status == 408 || status == 409 || status == 429;
    const char *hdr[] = {"x-should-retry", retry ? "true" : "false", NULL};
    return kiln_reply_json_headers(r, status, json_pack("{s:o}", "error", e), hdr);
}

json_t *kiln_req_json(kiln_req *r, bool openai_shape, enum MHD_Result *replied) {
    json_error_t e = {0};
    json_t *j = r->body ? json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &e) : NULL;
    if (!j || !json_is_object(j)) {
        char msg[300];
        if (!j)
            snprintf(msg, sizeof msg, "Invalid JSON body: %s (line %d, column %d)", r->body ? e.text : "empty body",
                     e.line, e.column);
        else
            snprintf(msg, sizeof msg, "The JSON body must be an object");
        json_decref(j);
        *replied = openai_shape ? kiln_reply_openai_error(r, 400, msg, "invalid_request_error", NULL, "invalid_json")
                                : kiln_reply_comfy_error(r, 400, "invalid_prompt", msg, "");
        return NULL;
    }
    return j;
}

const char *kiln_req_arg(kiln_req *r, const char *name) {
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

/* ---- auth ----------------------------------------------------------------------------------------------------- */

static bool token_ok(kiln_req *r) {
    const char *tok = r->srv->token;
    if (!tok[0]) return true;
    const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Authorization");
    const char *given = NULL;
    if (h && !strncasecmp(h, "Bearer ", 7)) given = h + 7;
    if (!given) given = kiln_req_arg(r, "token"); /* browsers cannot set headers on a WebSocket */
    if (!given) return false;
    size_t n = strlen(tok);
    return strlen(given) == n && CRYPTO_memcmp(given, tok, n) == 0;
}

static bool is_openai_url(const char *url) { return !strncmp(url, "/v1/", 4); }

/* ---- the access handler ------------------------------------------------------------------------------------- */

#define DISCARD_MAX(limit) ((limit) < (16u << 20) ? (64u << 20) : 4 * (size_t)(limit))

static enum MHD_Result too_big(kiln_req *r) {
    char msg[128];
    snprintf(msg, sizeof msg, "Request body is larger than the limit of %zu bytes", r->srv->cfg.max_body);
    return is_openai_url(r->url) ? kiln_reply_openai_error(r, 413, msg, "invalid_request_error", NULL, "body_too_large")
                                 : kiln_reply_comfy_error(r, 413, "request_too_large", msg, "");
}

enum MHD_Result kiln_reply_not_found(kiln_req *r) {
    return kiln_reply_text(r, 404, "text/plain; charset=utf-8", "404: Not Found");
}

/* API routes first (they need the token), then the frontend's static files (public, like ComfyUI's), then
 * ComfyUI's plain 404 - never a JSON body a client could take for data. */
static enum MHD_Result dispatch(kiln_req *r) {
    enum MHD_Result res = MHD_NO;
    if (!strcmp(r->url, "/health") && !strcmp(r->method, "GET"))
        return kiln_reply_json(r, 200, json_pack("{s:s}", "status", "ok"));
    /* a signed /view link (an OpenAI url response) stands in for the token, for that one file until it expires */
    bool authed = token_ok(r) || kiln_url_signed_ok(r);
    if (authed && (kiln_routes_ws(r, &res) || kiln_routes_openai(r, &res) || kiln_routes_comfy(r, &res) ||
                   kiln_routes_files(r, &res) || kiln_routes_user(r, &res) || kiln_routes_jobs(r, &res) ||
                   kiln_routes_info(r, &res) || kiln_routes_metrics(r, &res)))
        return res;
    if (kiln_routes_static(r, &res)) return res;
    if (!authed) {
        return is_openai_url(r->url)
                   ? kiln_reply_openai_error(r, 401, "Invalid or missing bearer token", "authentication_error", NULL,
                                             "invalid_api_key")
                   : kiln_reply_comfy_error(r, 401, "unauthorized", "Invalid or missing bearer token", "");
    }
    if (is_openai_url(r->url)) {
        char msg[300];
        snprintf(msg, sizeof msg, "No route for %.16s %.200s", r->method, r->url);
        return kiln_reply_openai_error(r, 404, msg, "invalid_request_error", NULL, "not_found");
    }
    return kiln_reply_not_found(r);
}

/* libmicrohttpd's URI logger sees the request line's URI before it is decoded: the request object starts
 * here, keeping the raw path (so /userdata/a%2Fb.json/move/c.json splits on the real slashes). */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn) {
    kiln_req *r = kiln_calloc(1, sizeof *r);
    if (!r) return NULL;
    r->srv = cls;
    size_t n = strcspn(uri ? uri : "", "?#");
    if (n > 8192) n = 8192;
    if ((r->raw_path = kiln_malloc(n + 2))) { /* room for "/" when the path is empty ("/api" or none) */
        memcpy(r->raw_path, uri, n);
        r->raw_path[n] = 0;
    }
    (void)conn;
    return r;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    kiln_server *srv = cls;
    kiln_req *r = *con_cls;
    if (!r && !(r = *con_cls = on_uri(srv, url, conn))) return MHD_NO;
    if (!r->started) {
        r->started = true;
        r->srv = srv;
        r->conn = conn;
        r->method = method;
        r->url = url;
        r->started_s = kiln_clock_s();
        if (!strncmp(url, "/api/", 5) || !strcmp(url, "/api")) {
            r->url = url[4] ? url + 4 : "/";
            r->api_prefixed = true;
        }
        if (r->raw_path && (!strncmp(r->raw_path, "/api/", 5) || !strcmp(r->raw_path, "/api")))
            memmove(r->raw_path, r->raw_path + 4, strlen(r->raw_path + 4) + 1);
        if (r->raw_path && !r->raw_path[0]) snprintf(r->raw_path, 2, "/");
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
        if (cl) {
            char *end;
            errno = 0;
            unsigned long long n = strtoull(cl, &end, 10);
            if (errno || *end || n > srv->cfg.max_body) r->too_big = true;
        }
        if (r->too_big) return too_big(r); /* answer before reading the body; libmicrohttpd then closes */
        return MHD_YES;
    }
    r->conn = conn;
    if (*upload_data_size) {
        /* A body that trickles in never trips the idle time-out; bound the whole upload instead. */
        double limit = 4.0 * srv->cfg.conn_timeout_s;
        if (!r->replied && kiln_clock_s() - r->started_s > limit) {
            *upload_data_size = 0;
            char msg[128];
            snprintf(msg, sizeof msg, "Request body took longer than %.0f s", limit);
            return is_openai_url(r->url) ? kiln_reply_openai_error(r, 408, msg, "invalid_request_error", NULL, "timeout")
                                         : kiln_reply_comfy_error(r, 408, "request_timeout", msg, "");
        }
        if (r->replied) {
            *upload_data_size = 0;
            return MHD_YES;
        }
        if (r->too_big) {
            r->discarded += *upload_data_size;
        } else {
            size_t need;
            if (!kiln_add_size(r->body_len, *upload_data_size, &need) || need > srv->cfg.max_body) {
                r->too_big = true;
                r->discarded = need;
            } else {
                if (!kiln_bytes_append(&r->body, &r->body_len, &r->body_cap, 4096, upload_data, *upload_data_size))
                    return MHD_NO;
            }
        }
        *upload_data_size = 0;
        /* A chunked body has no Content-Length to refuse up front: the rest is read and dropped so the 413 reaches
         * the client (a reply sent while it still sends would be lost to the reset of an unread socket), up to a
         * bound past which it is sent at once and the connection closed. */
        if (r->too_big && !r->replied && r->discarded > DISCARD_MAX(srv->cfg.max_body)) return too_big(r);
        return MHD_YES;
    }
    if (r->replied) return MHD_YES;
    if (r->too_big) return too_big(r);
    return dispatch(r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    kiln_req *r = *con_cls;
    if (!r) return;
    kiln_free(r->body);
    kiln_free(r->raw_path);
    kiln_free(r);
    *con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static void mhd_log(void *cls, const char *fmt, va_list ap) {
    if (!kiln_log_enabled(KILN_LOG_DEBUG)) return;
    char buf[512];
    vsnprintf(buf, sizeof buf, fmt, ap);
    log_debug("microhttpd: %s", buf);
}

static void copy_str(char *dst, size_t cap, const char *src) { snprintf(dst, cap, "%s", src ? src : ""); }

static kiln_status ensure_dir(const char *path, kiln_err *err) {
    if (mkdir(path, 0755) != 0 && errno != EEXIST) return KILN_FAIL(err, KILN_E_IO, "mkdir %s: %s", path, strerror(errno));
    return KILN_OK;
}

kiln_status kiln_server_start(const kiln_server_config *cfg, kiln_server **out, kiln_err *err) {
    *out = NULL;
    if (!cfg->output_dir) return KILN_FAIL(err, KILN_E_INVALID, "serve: an output folder is required");
    const char *paths[] = {cfg->output_dir, cfg->models_dir, cfg->input_dir, cfg->db_path, cfg->user_dir,
                           cfg->front_end_root, cfg->templates_dirs[0], cfg->templates_dirs[1],
                           cfg->templates_dirs[2], cfg->templates_dirs[3], cfg->templates_dirs[4],
                           cfg->templates_dirs[5], cfg->templates_dirs[6], cfg->templates_dirs[7]};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) /* never a silently truncated path */
        if (paths[i] && strlen(paths[i]) > 1900) return KILN_FAIL(err, KILN_E_INVALID, "serve: path too long: %.80s...", paths[i]);
    if ((cfg->token && strlen(cfg->token) >= 256) || (cfg->listen && strlen(cfg->listen) >= 64))
        return KILN_FAIL(err, KILN_E_INVALID, "serve: --token must be under 256 bytes, --listen under 64");
    kiln_server *srv = kiln_calloc(1, sizeof *srv);
    if (!srv) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
    srv->cfg = *cfg;
    kiln_server_config def = kiln_server_config_default();
    if (!srv->cfg.max_body) srv->cfg.max_body = def.max_body;
    if (srv->cfg.max_queue <= 0) srv->cfg.max_queue = def.max_queue;
    if (srv->cfg.conn_timeout_s <= 0) srv->cfg.conn_timeout_s = def.conn_timeout_s;
    if (srv->cfg.request_timeout_s <= 0) srv->cfg.request_timeout_s = def.request_timeout_s;
    if (srv->cfg.batch_images <= 0) srv->cfg.batch_images = def.batch_images;
    copy_str(srv->listen, sizeof srv->listen, cfg->listen ? cfg->listen : "127.0.0.1");
    copy_str(srv->models_dir, sizeof srv->models_dir, cfg->models_dir);
    copy_str(srv->output_dir, sizeof srv->output_dir, cfg->output_dir);
    copy_str(srv->token, sizeof srv->token, cfg->token);
    copy_str(srv->default_unet, sizeof srv->default_unet, cfg->default_unet);
    copy_str(srv->default_clip, sizeof srv->default_clip, cfg->default_clip);
    copy_str(srv->default_vae, sizeof srv->default_vae, cfg->default_vae);
    if (cfg->input_dir)
        copy_str(srv->input_dir, sizeof srv->input_dir, cfg->input_dir);
    else
        snprintf(srv->input_dir, sizeof srv->input_dir, "%s/input", srv->output_dir);
    snprintf(srv->temp_dir, sizeof srv->temp_dir, "%s/temp", srv->output_dir);
    if (cfg->user_dir) {
        copy_str(srv->user_dir, sizeof srv->user_dir, cfg->user_dir);
    } else { /* beside the output folder, as ComfyUI keeps user/ beside output/ */
        char parent[2048];
        copy_str(parent, sizeof parent, srv->output_dir);
        size_t n = strlen(parent);
        while (n > 1 && parent[n - 1] == '/') parent[--n] = 0;
        char *slash = strrchr(parent, '/');
        if (!slash) snprintf(parent, sizeof parent, ".");
        else if (slash == parent) parent[1] = 0;
        else *slash = 0;
        snprintf(srv->user_dir, sizeof srv->user_dir, "%s%suser", parent, parent[strlen(parent) - 1] == '/' ? "" : "/");
    }
    if (cfg->db_path)
        copy_str(srv->db_path, sizeof srv->db_path, cfg->db_path);
    else
        snprintf(srv->db_path, sizeof srv->db_path, "%s/kiln-jobs.sqlite", srv->user_dir);
    if (cfg->front_end_root) {
        struct stat sb;
        if (stat(cfg->front_end_root, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            kiln_free(srv);
            return KILN_FAIL(err, KILN_E_INVALID, "serve: --front-end-root %.200s is not a folder", cfg->front_end_root);
        }
        copy_str(srv->front_end_root, sizeof srv->front_end_root, cfg->front_end_root);
    }
    for (int i = 0; i < 8 && cfg->templates_dirs[i]; i++)
        copy_str(srv->templates_dirs[srv->n_templates_dirs++], sizeof srv->templates_dirs[0], cfg->templates_dirs[i]);
    pthread_mutex_init(&srv->user_mu, NULL);
    srv->started_s = kiln_clock_wall_s();
    srv->cfg.listen = srv->listen;
    srv->cfg.models_dir = srv->models_dir[0] ? srv->models_dir : NULL;
    srv->cfg.output_dir = srv->output_dir;

    kiln_status s = ensure_dir(srv->output_dir, err);
    if (s == KILN_OK) s = ensure_dir(srv->input_dir, err);
    if (s == KILN_OK) s = ensure_dir(srv->temp_dir, err);
    if (s == KILN_OK) s = ensure_dir(srv->user_dir, err);
    int recovered = 0;
    if (s == KILN_OK) s = kiln_store_open(srv->db_path, &srv->store, &recovered, err);
    if (s != KILN_OK) {
        kiln_server_stop(srv);
        return s;
    }
    if (recovered) log_warn("serve: %d job(s) were running when the last server died; queued again", recovered);
    if (kiln_store_shared(srv->store)) {
        kiln_store_set_lease(srv->store, cfg->lease_s > 0 ? cfg->lease_s : 30);
        kiln_store_on_event(srv->store, kiln_events_deliver, srv);
    }
    if (!(srv->hub = kiln_ws_hub_new()) || !(srv->partials = kiln_partials_new()) || !(srv->metrics = kiln_metrics_new())) {
        kiln_server_stop(srv);
        return KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
    }
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)cfg->port)};
    if (inet_pton(AF_INET, srv->listen, &addr.sin_addr) != 1) {
        s = KILN_FAIL(err, KILN_E_INVALID, "serve: --listen %s is not an IPv4 address", srv->listen);
        kiln_server_stop(srv);
        return s;
    }
    srv->daemon = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_ALLOW_UPGRADE | MHD_USE_ERROR_LOG,
        0, NULL, NULL, on_request, srv, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)srv->cfg.conn_timeout_s, MHD_OPTION_CONNECTION_LIMIT, 1024u,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_URI_LOG_CALLBACK, on_uri, srv,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, srv,
        MHD_OPTION_END); /* no LISTENING_ADDRESS_REUSE: it means SO_REUSEPORT, two servers on one port */
    if (!srv->daemon) {
        s = KILN_FAIL(err, KILN_E_IO, "serve: cannot listen on %s:%d (in use or not allowed)", srv->listen, cfg->port);
        kiln_server_stop(srv);
        return s;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(srv->daemon, MHD_DAEMON_INFO_BIND_PORT);
    srv->port = info ? info->port : cfg->port;
    if ((s = kiln_worker_start(srv, &srv->worker, err)) != KILN_OK) {
        kiln_server_stop(srv);
        return s;
    }
    *out = srv;
    return KILN_OK;
}

int kiln_server_port(const kiln_server *srv) { return srv->port; }

bool kiln_server_idle(kiln_server *srv) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(srv->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    char id[64];
    return info && info->num_connections == 0 && !kiln_worker_current(srv->worker, id) &&
           kiln_store_count(srv->store, KILN_JOB_QUEUED) == 0;
}

bool kiln_server_drain(kiln_server *srv, double timeout_s) {
    if (!srv) return true;
    return kiln_worker_drain(srv->worker, timeout_s);
}

void kiln_server_stop(kiln_server *srv) {
    if (!srv) return;
    /* Order matters: no new connections; the worker stops (its running job stays RUNNING in the store, so the
     * next start runs it again) and is joined, so nothing sends to the hub any more; the hub closes the
     * WebSockets so their connection threads return; then libmicrohttpd joins every connection thread (a
     * handler waiting for a job sees the worker stopping and answers); only then go the worker and the store. */
    if (srv->daemon) MHD_quiesce_daemon(srv->daemon);
    if (srv->worker) kiln_worker_stop(srv->worker);
    kiln_store_on_event(srv->store, NULL, NULL); /* no listener callback touches the hub after this */
    kiln_ws_hub_free(srv->hub);
    srv->hub = NULL;
    if (srv->daemon) MHD_stop_daemon(srv->daemon);
    kiln_worker_free(srv->worker);
    kiln_partials_free(srv->partials);
    kiln_metrics_free(srv->metrics);
    kiln_store_close(srv->store);
    pthread_mutex_destroy(&srv->user_mu);
    kiln_free(srv);
}

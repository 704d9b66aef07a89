/* test_server_http.c - the server in-process on a loopback port, driven by a raw-socket HTTP and WebSocket
 * client: routes and their shapes, bad input and the server still answering, the ComfyUI message sequence,
 * interrupt, queue limits, auth, and a restart that re-runs the job a stopped server left running.
 *
 * The engine is a TEST DOUBLE (slow_engine) that paints a pattern and sleeps per step; it exists to exercise
 * the queue and WebSocket plumbing and is never linked into kiln. Real images: tests/cli/serve_e2e.sh. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "fake_models.h"
#include "server/server.h"
#include "server/server_internal.h"
#include "test.h"

static char models[256], outdir[256];
static atomic_int engine_calls;
static int step_ms = 5;

static kiln_status slow_generate(void *self, const kiln_gen_params *p, kiln_gen_progress_fn progress, void *pctx,
                                 kiln_gen_images *out, kiln_err *err) {
    atomic_fetch_add(&engine_calls, 1);
    for (int s = 1; s <= p->steps; s++) {
        struct timespec ts = {0, step_ms * 1000000L};
        nanosleep(&ts, NULL);
        if (!progress(pctx, s, p->steps)) return KILN_FAIL(err, KILN_E_CANCELLED, "cancelled");
    }
    size_t one = (size_t)p->width * (size_t)p->height * 3;
    out->pixels = kiln_calloc(one, (size_t)p->batch);
    if (!out->pixels) return KILN_FAIL(err, KILN_E_NOMEM, "oom");
    out->n = p->batch;
    out->width = p->width;
    out->height = p->height;
    return KILN_OK;
}

static kiln_gen_engine test_engine = {.generate = slow_generate};

static void setup(void) {
    fake_models_make(models, sizeof models, "srv");
    snprintf(outdir, sizeof outdir, "/tmp/kiln-test-srv-out-%d", (int)getpid());
}

static void teardown(void) {
    test_rm_rf(models);
    test_rm_rf(outdir);
}

static kiln_server *start(const char *token, int max_queue) {
    kiln_server_config cfg = kiln_server_config_default();
    cfg.port = 0;
    cfg.models_dir = models;
    cfg.output_dir = outdir;
    cfg.engine = &test_engine;
    cfg.token = token;
    cfg.max_body = 64 * 1024;
    if (max_queue) cfg.max_queue = max_queue;
    cfg.conn_timeout_s = 2;
    kiln_server *srv = NULL;
    kiln_err err = {0};
    CHECK_MSG(kiln_server_start(&cfg, &srv, &err) == KILN_OK, "%s", err.msg);
    return srv;
}

/* ---- a tiny HTTP client ------------------------------------------------------------------------------------------ */

static int dial(int port) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
        close(s);
        return -1;
    }
    struct timeval tv = {.tv_sec = 10};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return s;
}

typedef struct reply {
    int status;
    char *body;
    json_t *json;
} reply;

static void reply_free(reply *r) {
    free(r->body);
    json_decref(r->json);
    memset(r, 0, sizeof *r);
}

/* Sends raw bytes, reads to EOF. */
static reply raw(int port, const char *req, size_t len) {
    reply r = {0};
    int s = dial(port);
    if (s < 0) return r;
    size_t off = 0;
    while (off < len) {
        ssize_t w = send(s, req + off, len - off, MSG_NOSIGNAL);
        if (w <= 0) break;
        off += (size_t)w;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (n + 4096 > cap) buf = realloc(buf, cap *= 2);
        ssize_t got = recv(s, buf + n, cap - n - 1, 0);
        if (got <= 0) break;
        n += (size_t)got;
    }
    close(s);
    buf[n] = 0;
    sscanf(buf, "HTTP/1.%*d %d", &r.status);
    char *b = strstr(buf, "\r\n\r\n");
    r.body = strdup(b ? b + 4 : "");
    r.json = json_loads(r.body, JSON_DECODE_ANY, NULL);
    free(buf);
    return r;
}

static reply http(int port, const char *method, const char *path, const char *body, const char *extra_headers) {
    size_t bl = body ? strlen(body) : 0;
    char *req = malloc(bl + 1024);
    int n = snprintf(req, 1024, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%sContent-Length: %zu\r\n\r\n",
                     method, path, extra_headers ? extra_headers : "", bl);
    if (body) memcpy(req + n, body, bl);
    reply r = raw(port, req, (size_t)n + bl);
    free(req);
    return r;
}

static const char *err_type(const reply *r) {
    return json_string_value(json_object_get(json_object_get(r->json, "error"), "type"));
}

static char *graph_text(int steps, const char *prefix) {
    json_t *g = json_load_file(test_src_path("tests/data/graphs/flux2_klein_t2i_template_api.json"), 0, NULL);
    json_object_set_new(json_object_get(json_object_get(g, "75:62"), "inputs"), "steps", json_integer(steps));
    json_object_set_new(json_object_get(json_object_get(g, "75:66"), "inputs"), "width", json_integer(64));
    json_object_set_new(json_object_get(json_object_get(g, "75:66"), "inputs"), "height", json_integer(64));
    json_object_set_new(json_object_get(json_object_get(g, "9"), "inputs"), "filename_prefix", json_string(prefix));
    json_t *body = json_pack("{s:o, s:s}", "prompt", g, "client_id", "tester");
    char *txt = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    return txt;
}

static bool wait_history(int port, const char *id, json_t **entry) {
    char path[128];
    snprintf(path, sizeof path, "/history/%s", id);
    for (int i = 0; i < 400; i++) {
        reply r = http(port, "GET", path, NULL, NULL);
        json_t *e = json_object_get(r.json, id);
        if (e) {
            *entry = json_incref(e);
            reply_free(&r);
            return true;
        }
        reply_free(&r);
        struct timespec ts = {0, 25 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return false;
}

/* ---- tests ------------------------------------------------------------------------------------------------------------ */

static void test_routes_and_history(void) {
    kiln_server *srv = start(NULL, 0);
    if (!srv) return;
    int port = kiln_server_port(srv);
    reply r = http(port, "GET", "/system_stats", NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK(json_object_get(json_object_get(r.json, "system"), "ram_total") != NULL);
    reply_free(&r);
    r = http(port, "GET", "/api/object_info/SaveImage", NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK(json_object_get(r.json, "SaveImage") != NULL);
    reply_free(&r);
    r = http(port, "GET", "/models/vae", NULL, NULL);
    CHECK_EQ_STR(json_string_value(json_array_get(r.json, 0)), "flux2-vae.safetensors");
    reply_free(&r);
    r = http(port, "GET", "/", NULL, NULL);
    CHECK(r.status == 200 && strstr(r.body, "<title>kiln</title>"));
    reply_free(&r);
    r = http(port, "GET", "/v1/models", NULL, NULL);
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(json_object_get(r.json, "data"), 0), "id")),
                 "flux-2-klein-4b.safetensors");
    reply_free(&r);

    char *body = graph_text(3, "t/route");
    r = http(port, "POST", "/prompt", body, NULL);
    free(body);
    CHECK_EQ_INT(r.status, 200);
    const char *id = json_string_value(json_object_get(r.json, "prompt_id"));
    CHECK(id && strlen(id) == 36);
    CHECK(json_integer_value(json_object_get(r.json, "number")) >= 1);
    char pid[64];
    snprintf(pid, sizeof pid, "%s", id ? id : "");
    reply_free(&r);
    json_t *e = NULL;
    CHECK(wait_history(port, pid, &e));
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(e, "status"), "status_str")), "success");
    json_t *img = json_array_get(json_object_get(json_object_get(json_object_get(e, "outputs"), "9"), "images"), 0);
    CHECK_EQ_STR(json_string_value(json_object_get(img, "subfolder")), "t");
    /* history messages carry the two timestamps a harness needs */
    json_t *msgs = json_object_get(json_object_get(e, "status"), "messages");
    CHECK_EQ_STR(json_string_value(json_array_get(json_array_get(msgs, 0), 0)), "execution_start");
    CHECK_EQ_STR(json_string_value(json_array_get(json_array_get(msgs, json_array_size(msgs) - 1), 0)),
                 "execution_success");
    CHECK(json_integer_value(json_object_get(json_array_get(json_array_get(msgs, 0), 1), "timestamp")) > 1600000000000LL);
    char view[512];
    snprintf(view, sizeof view, "/view?filename=%s&subfolder=t&type=output",
             json_string_value(json_object_get(img, "filename")));
    json_decref(e);
    r = http(port, "GET", view, NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    CHECK(r.body && !memcmp(r.body, "\x89PNG", 4));
    reply_free(&r);
    r = http(port, "GET", "/history?max_items=1", NULL, NULL);
    CHECK_EQ_INT(json_object_size(r.json), 1);
    reply_free(&r);
    r = http(port, "GET", "/queue", NULL, NULL);
    CHECK(json_is_array(json_object_get(r.json, "queue_pending")));
    reply_free(&r);
    r = http(port, "GET", "/prompt", NULL, NULL);
    CHECK(json_is_integer(json_object_get(json_object_get(r.json, "exec_info"), "queue_remaining")));
    reply_free(&r);
    r = http(port, "POST", "/history", "{\"delete\":[\"nope\"]}", NULL);
    CHECK_EQ_INT(r.status, 200);
    reply_free(&r);
    kiln_server_stop(srv);
}

static void test_bad_input_keeps_serving(void) {
    kiln_server *srv = start(NULL, 0);
    if (!srv) return;
    int port = kiln_server_port(srv);
    reply r = http(port, "POST", "/prompt", "{not json", NULL);
    CHECK_EQ_INT(r.status, 400);
    CHECK_EQ_STR(err_type(&r), "invalid_prompt");
    reply_free(&r);
    r = http(port, "POST", "/prompt", "{\"prompt\":{\"1\":{\"class_type\":\"Nope\",\"inputs\":{}}}}", NULL);
    CHECK_EQ_INT(r.status, 400);
    CHECK_EQ_STR(err_type(&r), "invalid_prompt");
    reply_free(&r);
    r = http(port, "POST", "/prompt", "{\"prompt\":{}}", NULL);
    CHECK_EQ_STR(err_type(&r), "prompt_no_outputs");
    reply_free(&r);
    r = http(port, "POST", "/prompt", "{\"client_id\":\"x\"}", NULL);
    CHECK_EQ_STR(err_type(&r), "no_prompt");
    reply_free(&r);
    char *body = graph_text(0, "zero");
    r = http(port, "POST", "/prompt", body, NULL);
    free(body);
    CHECK_EQ_INT(r.status, 400);
    CHECK_EQ_STR(err_type(&r), "prompt_outputs_failed_validation");
    CHECK(json_object_get(json_object_get(r.json, "node_errors"), "75:62") != NULL);
    reply_free(&r);
    /* oversized body: 413 before the body is read */
    char *big = malloc(200 * 1024);
    memset(big, 'a', 200 * 1024 - 1);
    big[200 * 1024 - 1] = 0;
    r = http(port, "POST", "/prompt", big, NULL);
    CHECK_EQ_INT(r.status, 413);
    reply_free(&r);
    r = http(port, "POST", "/v1/images/generations", big, NULL);
    CHECK_EQ_INT(r.status, 413);
    CHECK(json_object_get(json_object_get(r.json, "error"), "code") != NULL);
    reply_free(&r);
    free(big);
    /* path traversal in /view: every variant is refused, nothing outside the output folder is served */
    const char *bad[] = {"/view?filename=../../../../etc/passwd", "/view?filename=%2e%2e%2f%2e%2e%2fetc%2fpasswd",
                         "/view?filename=passwd&subfolder=../../../../etc", "/view?filename=/etc/passwd",
                         "/view?filename=passwd&subfolder=%2fetc", "/view?filename=x.png%00.txt",
                         "/view?filename=passwd&subfolder=..%2f..%2f..%2fetc", "/view?filename=..",
                         "/view?filename=x&type=../../etc", "/view?filename=kiln-jobs.sqlite%2f..%2f..%2fx"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = http(port, "GET", bad[i], NULL, NULL);
        CHECK_MSG(r.status == 400 || r.status == 404, "%s -> %d", bad[i], r.status);
        CHECK_MSG(!strstr(r.body ? r.body : "", "root:"), "%s leaked", bad[i]);
        reply_free(&r);
    }
    /* a symlink inside the output folder that points outside is not followed out */
    char link[600];
    snprintf(link, sizeof link, "%s/escape.png", outdir);
    CHECK(symlink("/etc/passwd", link) == 0);
    r = http(port, "GET", "/view?filename=escape.png", NULL, NULL);
    CHECK_EQ_INT(r.status, 404);
    reply_free(&r);
    /* ... nor into a sibling folder whose name starts with the output folder's (a prefix is not containment) */
    char sib[600], secret[700];
    snprintf(sib, sizeof sib, "%s-sibling", outdir);
    mkdir(sib, 0755);
    snprintf(secret, sizeof secret, "%s/secret.png", sib);
    FILE *sf = fopen(secret, "w");
    CHECK(sf != NULL);
    if (sf) fputs("SIBLING-SECRET", sf), fclose(sf);
    snprintf(link, sizeof link, "%s/sib", outdir);
    CHECK(symlink(sib, link) == 0);
    r = http(port, "GET", "/view?filename=secret.png&subfolder=sib", NULL, NULL);
    CHECK_EQ_INT(r.status, 404);
    CHECK(!strstr(r.body ? r.body : "", "SIBLING-SECRET"));
    reply_free(&r);
    test_rm_rf(sib);
    /* the name checks refuse by themselves (400), before realpath's containment (404) is needed: hidden files
     * and folders that exist inside the output folder are still not served */
    char hidden[700];
    snprintf(hidden, sizeof hidden, "%s/.hidden.png", outdir);
    sf = fopen(hidden, "w");
    if (sf) fputs("HIDDEN", sf), fclose(sf);
    snprintf(hidden, sizeof hidden, "%s/.dot", outdir);
    mkdir(hidden, 0755);
    snprintf(hidden, sizeof hidden, "%s/.dot/in.png", outdir);
    sf = fopen(hidden, "w");
    if (sf) fputs("HIDDEN", sf), fclose(sf);
    const char *refused[] = {"/view?filename=.hidden.png", "/view?filename=in.png&subfolder=.dot",
                             "/view?filename=in.png&subfolder=t/../.dot", "/view?filename=.."};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        r = http(port, "GET", refused[i], NULL, NULL);
        CHECK_MSG(r.status == 400, "%s -> %d", refused[i], r.status);
        reply_free(&r);
    }
    /* a body of exactly the limit is read (and then judged on its content) */
    char *at_limit = malloc(64 * 1024 + 1);
    memset(at_limit, ' ', 64 * 1024);
    at_limit[64 * 1024] = 0;
    memcpy(at_limit, "{\"prompt\":{}}", 13);
    r = http(port, "POST", "/prompt", at_limit, NULL);
    CHECK_EQ_INT(r.status, 400);
    CHECK_EQ_STR(err_type(&r), "prompt_no_outputs");
    reply_free(&r);
    free(at_limit);
    /* an oversized Content-Length is answered before any of the body is sent (no waiting for it) */
    const char head_only[] = "POST /prompt HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                             "Content-Length: 70000\r\n\r\n";
    r = raw(port, head_only, sizeof head_only - 1);
    CHECK_EQ_INT(r.status, 413);
    reply_free(&r);
    /* OpenAI errors */
    r = http(port, "POST", "/v1/images/generations", "{\"n\":1}", NULL);
    CHECK_EQ_INT(r.status, 400);
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(r.json, "error"), "param")), "prompt");
    reply_free(&r);
    r = http(port, "POST", "/v1/images/generations", "{\"prompt\":\"x\",\"n\":0}", NULL);
    CHECK_EQ_INT(r.status, 400);
    reply_free(&r);
    r = http(port, "POST", "/v1/images/generations", "{\"prompt\":\"x\",\"n\":17}", NULL); /* max_batch 16 */
    CHECK_EQ_INT(r.status, 400);
    reply_free(&r);
    r = http(port, "POST", "/v1/images/generations", "{\"prompt\":\"x\",\"size\":\"99999x99999\"}", NULL);
    CHECK_EQ_INT(r.status, 400);
    reply_free(&r);
    r = http(port, "GET", "/no/such/route", NULL, NULL);
    CHECK_EQ_INT(r.status, 404);
    reply_free(&r);
    /* garbage on the wire */
    const char junk[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n";
    r = raw(port, junk, sizeof junk - 1);
    reply_free(&r);
    /* still serving */
    r = http(port, "GET", "/health", NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    reply_free(&r);
    kiln_server_stop(srv);
}

static void test_auth(void) {
    kiln_server *srv = start("s3cret", 0);
    if (!srv) return;
    int port = kiln_server_port(srv);
    reply r = http(port, "GET", "/queue", NULL, NULL);
    CHECK_EQ_INT(r.status, 401);
    reply_free(&r);
    r = http(port, "GET", "/queue", NULL, "Authorization: Bearer wrong\r\n");
    CHECK_EQ_INT(r.status, 401);
    reply_free(&r);
    r = http(port, "GET", "/v1/models", NULL, "Authorization: Bearer s3cret2\r\n");
    CHECK_EQ_INT(r.status, 401);
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(r.json, "error"), "type")), "authentication_error");
    reply_free(&r);
    r = http(port, "GET", "/queue", NULL, "Authorization: Bearer s3cret\r\n");
    CHECK_EQ_INT(r.status, 200);
    reply_free(&r);
    r = http(port, "GET", "/health", NULL, NULL);
    CHECK_EQ_INT(r.status, 200);
    reply_free(&r);
    kiln_server_stop(srv);
}

/* ---- WebSocket ---------------------------------------------------------------------------------------------------------- */

static int ws_open(int port, const char *client_id) {
    int s = dial(port);
    if (s < 0) return -1;
    char req[512];
    int n = snprintf(req, sizeof req,
                     "GET /ws?clientId=%s HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
                     client_id);
    if (send(s, req, (size_t)n, 0) != n) return -1;
    char buf[1024];
    size_t got = 0;
    while (got < sizeof buf - 1) {
        ssize_t k = recv(s, buf + got, 1, 0);
        if (k <= 0) break;
        got++;
        if (got >= 4 && !memcmp(buf + got - 4, "\r\n\r\n", 4)) break;
    }
    buf[got] = 0;
    CHECK_MSG(strstr(buf, "101") && strstr(buf, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), "handshake: %s", buf);
    return s;
}

static bool recv_n(int s, void *p, size_t n) {
    char *c = p;
    while (n) {
        ssize_t k = recv(s, c, n, 0);
        if (k <= 0) return false;
        c += k;
        n -= (size_t)k;
    }
    return true;
}

/* Next text frame as JSON, NULL on close/timeout. */
static json_t *ws_next(int s) {
    unsigned char h[2];
    if (!recv_n(s, h, 2)) return NULL;
    uint64_t len = h[1] & 0x7f;
    if (len == 126) {
        unsigned char e[2];
        if (!recv_n(s, e, 2)) return NULL;
        len = (uint64_t)e[0] << 8 | e[1];
    } else if (len == 127) {
        unsigned char e[8];
        if (!recv_n(s, e, 8)) return NULL;
        len = 0;
        for (int i = 0; i < 8; i++) len = len << 8 | e[i];
    }
    char *buf = malloc(len + 1);
    if (!recv_n(s, buf, len)) {
        free(buf);
        return NULL;
    }
    buf[len] = 0;
    json_t *j = (h[0] & 0x0f) == 1 ? json_loads(buf, 0, NULL) : json_object();
    free(buf);
    return j;
}

static void test_websocket_sequence_and_interrupt(void) {
    kiln_server *srv = start(NULL, 0);
    if (!srv) return;
    int port = kiln_server_port(srv);
    int ws = ws_open(port, "tester");
    if (ws < 0) {
        CHECK(ws >= 0);
        kiln_server_stop(srv);
        return;
    }
    json_t *m = ws_next(ws);
    CHECK_EQ_STR(json_string_value(json_object_get(m, "type")), "status");
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(m, "data"), "sid")), "tester");
    json_decref(m);
    /* a masked ping from the client is answered with a pong (opcode 0xA) */
    unsigned char ping[] = {0x89, 0x80 | 2, 1, 2, 3, 4, 'h' ^ 1, 'i' ^ 2};
    CHECK(send(ws, ping, sizeof ping, 0) == (ssize_t)sizeof ping);

    char *body = graph_text(4, "ws");
    reply r = http(port, "POST", "/prompt", body, NULL);
    free(body);
    char pid[64];
    snprintf(pid, sizeof pid, "%s", json_string_value(json_object_get(r.json, "prompt_id")));
    reply_free(&r);
    char seq[2048] = "";
    int progress = 0, progress_states = 0;
    bool pong = false;
    for (int i = 0; i < 100; i++) {
        m = ws_next(ws);
        if (!m) break;
        const char *type = json_string_value(json_object_get(m, "type"));
        if (!type) {
            pong = true; /* non-text frame */
            json_decref(m);
            continue;
        }
        if (!strcmp(type, "progress")) {
            progress++;
            CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(m, "data"), "max")), 4);
        } else if (!strcmp(type, "progress_state")) {
            progress_states++;
        } else if (strcmp(type, "status") != 0 && strcmp(type, "executing") != 0) {
            strcat(seq, type);
            strcat(seq, ",");
        }
        bool done = !strcmp(type, "execution_success") || !strcmp(type, "execution_error");
        json_decref(m);
        if (done) break;
    }
    CHECK(pong);
    CHECK_EQ_INT(progress, 4);
    CHECK(progress_states > 0); /* ComfyUI's per-node progress_state (worker.c) */
    CHECK_EQ_STR(seq, "execution_start,execution_cached,executed,execution_success,");

    /* interrupt: a long job is stopped and ends interrupted, the next job still runs */
    step_ms = 100;
    body = graph_text(50, "long");
    r = http(port, "POST", "/prompt", body, NULL);
    snprintf(pid, sizeof pid, "%s", json_string_value(json_object_get(r.json, "prompt_id")));
    reply_free(&r);
    for (int i = 0; i < 100; i++) {
        m = ws_next(ws);
        const char *type = json_string_value(json_object_get(m, "type"));
        bool started = type && !strcmp(type, "progress");
        json_decref(m);
        if (started || !m) break;
    }
    /* an interrupt naming another prompt leaves this one running (50 steps of 100 ms: far from done) */
    r = http(port, "POST", "/interrupt", "{\"prompt_id\":\"not-this-one\"}", NULL);
    CHECK_EQ_INT(r.status, 200);
    reply_free(&r);
    usleep(600 * 1000);
    char hist[128];
    snprintf(hist, sizeof hist, "/history/%s", pid);
    r = http(port, "GET", hist, NULL, NULL);
    CHECK_MSG(r.json && json_object_size(r.json) == 0, "interrupting another id ended this job: %s", r.body);
    reply_free(&r);
    char target[160];
    snprintf(target, sizeof target, "{\"prompt_id\":\"%s\"}", pid);
    r = http(port, "POST", "/interrupt", target, NULL);
    CHECK_EQ_INT(r.status, 200);
    reply_free(&r);
    json_t *e = NULL;
    CHECK(wait_history(port, pid, &e));
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(e, "status"), "status_str")), "error");
    json_t *msgs = json_object_get(json_object_get(e, "status"), "messages");
    CHECK_EQ_STR(json_string_value(json_array_get(json_array_get(msgs, json_array_size(msgs) - 1), 0)),
                 "execution_interrupted");
    json_decref(e);
    step_ms = 5;
    free(body);
    close(ws);
    kiln_server_stop(srv);
}

static void test_queue_limit_cancel_and_restart(void) {
    step_ms = 200;
    kiln_server *srv = start(NULL, 2);
    if (!srv) return;
    int port = kiln_server_port(srv);
    char ids[4][64] = {{0}};
    int statuses[4];
    for (int i = 0; i < 4; i++) {
        char *body = graph_text(100, "q");
        reply r = http(port, "POST", "/prompt", body, NULL);
        free(body);
        statuses[i] = r.status;
        const char *id = json_string_value(json_object_get(r.json, "prompt_id"));
        snprintf(ids[i], sizeof ids[i], "%s", id ? id : "");
        reply_free(&r);
        for (int k = 0; i == 0 && k < 400; k++) { /* let the worker take the first so the next two wait */
            reply q = http(port, "GET", "/queue", NULL, NULL);
            bool running = json_array_size(json_object_get(q.json, "queue_running")) == 1;
            reply_free(&q);
            if (running) break;
            struct timespec ts = {0, 25 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    CHECK_EQ_INT(statuses[0], 200);
    CHECK_EQ_INT(statuses[1], 200);
    CHECK_EQ_INT(statuses[2], 200);
    CHECK_EQ_INT(statuses[3], 429); /* two pending already */
    /* cancel the last queued one */
    char del[200];
    snprintf(del, sizeof del, "{\"delete\":[\"%s\"]}", ids[2]);
    reply r = http(port, "POST", "/queue", del, NULL);
    CHECK_EQ_INT(r.status, 200);
    reply_free(&r);
    r = http(port, "GET", "/queue", NULL, NULL);
    CHECK_EQ_INT(json_array_size(json_object_get(r.json, "queue_running")), 1);
    CHECK_EQ_INT(json_array_size(json_object_get(r.json, "queue_pending")), 1);
    reply_free(&r);
    /* stop while job 0 runs: it stays accepted and runs after the restart, exactly once to completion */
    int calls_before = atomic_load(&engine_calls);
    kiln_server_stop(srv);
    step_ms = 5;
    srv = start(NULL, 2);
    if (!srv) return;
    port = kiln_server_port(srv);
    json_t *e = NULL;
    CHECK(wait_history(port, ids[0], &e));
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(e, "status"), "status_str")), "success");
    json_decref(e);
    CHECK(wait_history(port, ids[1], &e));
    json_decref(e);
    CHECK(atomic_load(&engine_calls) - calls_before == 2);
    r = http(port, "GET", "/history", NULL, NULL);
    CHECK(json_object_get(r.json, ids[2]) == NULL); /* cancelled before it ran: not history */
    reply_free(&r);
    kiln_server_stop(srv);
}

static void test_accept_key(void) {
    char out[29];
    CHECK(kiln_ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", out)); /* RFC 6455 section 1.3's example */
    CHECK_EQ_STR(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    CHECK(!kiln_ws_accept_key(NULL, out));
    CHECK(!kiln_ws_accept_key("short", out));
}

int main(void) {
    setup();
    RUN(test_accept_key);
    RUN(test_routes_and_history);
    RUN(test_bad_input_keeps_serving);
    RUN(test_auth);
    RUN(test_websocket_sequence_and_interrupt);
    RUN(test_queue_limit_cancel_and_restart);
    teardown();
    return test_summary();
}

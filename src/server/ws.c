/* ws.c - /ws: the WebSocket upgrade (RFC 6455) and the hub that fans ComfyUI's messages out to clients.
 *
 * The handshake is answered by libmicrohttpd (MHD_create_response_for_upgrade), which then hands over the raw
 * socket; in its thread-per-connection mode the upgrade handler may block, so each client's reader loop runs
 * there: it answers pings, honours close, and drops anything else the client sends (ComfyUI clients send
 * nothing that matters). Senders (the worker) write whole frames under the client's send lock with a send
 * time-out, so a stalled client is dropped instead of stalling the queue. */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/log.h"
#include "server/server_internal.h"

#define WS_MAX_CLIENTS 512
#define WS_MAX_FRAME (64 * 1024) /* what we accept from a client; larger frames close the connection */

typedef struct ws_client {
    int sock;
    struct MHD_UpgradeResponseHandle *urh;
    char client_id[128];
    pthread_mutex_t send_mu;
    bool dead;
} ws_client;

struct kiln_ws_hub {
    pthread_mutex_t mu;
    pthread_cond_t gone;
    ws_client *clients[WS_MAX_CLIENTS];
    int n;
    bool closing;
};

kiln_ws_hub *kiln_ws_hub_new(void) {
    kiln_ws_hub *h = kiln_calloc(1, sizeof *h);
    if (!h) return NULL;
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->gone, NULL);
    return h;
}

void kiln_ws_hub_free(kiln_ws_hub *h) {
    if (!h) return;
    pthread_mutex_lock(&h->mu);
    h->closing = true;
    for (int i = 0; i < h->n; i++) shutdown(h->clients[i]->sock, SHUT_RDWR); /* wakes the reader loops */
    while (h->n > 0) pthread_cond_wait(&h->gone, &h->mu);
    pthread_mutex_unlock(&h->mu);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->gone);
    kiln_free(h);
}

int kiln_ws_count(kiln_ws_hub *h) {
    pthread_mutex_lock(&h->mu);
    int n = h->n;
    pthread_mutex_unlock(&h->mu);
    return n;
}

bool kiln_ws_accept_key(const char *key, char out[29]) {
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    if (!key || strlen(key) < 16 || strlen(key) > 64) return false;
    char buf[128];
    snprintf(buf, sizeof buf, "%s%s", key, guid);
    unsigned char sha[SHA_DIGEST_LENGTH];
    SHA1((const unsigned char *)buf, strlen(buf), sha);
    return EVP_EncodeBlock((unsigned char *)out, sha, SHA_DIGEST_LENGTH) == 28;
}

static bool send_all(int sock, const void *buf, size_t len) {
    const char *p = buf;
    while (len) {
        ssize_t w = send(sock, p, len, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        len -= (size_t)w;
    }
    return true;
}

/* One unmasked server frame. */
static bool send_frame(ws_client *c, int opcode, const void *payload, size_t len) {
    unsigned char hdr[10];
    size_t hl;
    hdr[0] = (unsigned char)(0x80 | opcode);
    if (len < 126) {
        hdr[1] = (unsigned char)len;
        hl = 2;
    } else if (len < 65536) {
        hdr[1] = 126;
        hdr[2] = (unsigned char)(len >> 8);
        hdr[3] = (unsigned char)len;
        hl = 4;
    } else {
        hdr[1] = 127;
        for (int i = 0; i < 8; i++) hdr[2 + i] = (unsigned char)((uint64_t)len >> (56 - 8 * i));
        hl = 10;
    }
    pthread_mutex_lock(&c->send_mu);
    bool ok = !c->dead && send_all(c->sock, hdr, hl) && send_all(c->sock, payload, len);
    if (!ok && !c->dead) {
        c->dead = true;
        shutdown(c->sock, SHUT_RDWR); /* the reader loop notices and unregisters */
    }
    pthread_mutex_unlock(&c->send_mu);
    return ok;
}

void kiln_ws_send(kiln_ws_hub *h, const char *client_id, const char *type, json_t *data) {
    json_t *msg = json_pack("{s:s, s:o}", "type", type, "data", data ? data : json_object());
    char *txt = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
    json_decref(msg);
    if (!txt || !h) {
        free(txt);
        return;
    }
    size_t len = strlen(txt);
    pthread_mutex_lock(&h->mu);
    for (int i = 0; i < h->n; i++) {
        ws_client *c = h->clients[i];
        if (client_id && *client_id && strcmp(c->client_id, client_id) != 0) continue;
        send_frame(c, 1, txt, len);
    }
    pthread_mutex_unlock(&h->mu);
    free(txt);
}

void kiln_ws_send_binary(kiln_ws_hub *h, const char *client_id, uint32_t event, uint32_t format, const uint8_t *data,
                         size_t len) {
    if (!h) return;
    uint8_t *frame = kiln_malloc(len + 8);
    if (!frame) return;
    for (int i = 0; i < 4; i++) { /* ComfyUI's binary message: big-endian event type, then its payload */
        frame[i] = (uint8_t)(event >> (24 - 8 * i));
        frame[4 + i] = (uint8_t)(format >> (24 - 8 * i));
    }
    memcpy(frame + 8, data, len);
    pthread_mutex_lock(&h->mu);
    for (int i = 0; i < h->n; i++) {
        ws_client *c = h->clients[i];
        if (client_id && *client_id && strcmp(c->client_id, client_id) != 0) continue;
        send_frame(c, 2, frame, len + 8);
    }
    pthread_mutex_unlock(&h->mu);
    kiln_free(frame);
}

/* Reads exactly n bytes, consuming the bytes libmicrohttpd already read first. */
typedef struct reader {
    int sock;
    const char *extra;
    size_t extra_len;
} reader;

static bool read_n(reader *rd, void *buf, size_t n) {
    char *p = buf;
    while (n && rd->extra_len) {
        *p++ = *rd->extra++;
        rd->extra_len--;
        n--;
    }
    while (n) {
        ssize_t r = recv(rd->sock, p, n, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}

static void client_loop(ws_client *c, reader *rd) {
    unsigned char *payload = kiln_malloc(WS_MAX_FRAME);
    if (!payload) return;
    for (;;) {
        unsigned char h[2];
        if (!read_n(rd, h, 2)) break;
        int opcode = h[0] & 0x0f;
        bool masked = h[1] & 0x80;
        uint64_t len = h[1] & 0x7f;
        if (len == 126) {
            unsigned char e[2];
            if (!read_n(rd, e, 2)) break;
            len = ((uint64_t)e[0] << 8) | e[1];
        } else if (len == 127) {
            unsigned char e[8];
            if (!read_n(rd, e, 8)) break;
            len = 0;
            for (int i = 0; i < 8; i++) len = (len << 8) | e[i];
        }
        if (!masked || len > WS_MAX_FRAME) break; /* clients must mask (RFC 6455 5.1); cap before reading */
        unsigned char mask[4];
        if (!read_n(rd, mask, 4) || !read_n(rd, payload, (size_t)len)) break;
        for (uint64_t i = 0; i < len; i++) payload[i] ^= mask[i & 3];
        if (opcode == 0x8) { /* close: echo and stop */
            send_frame(c, 0x8, payload, len >= 2 ? 2 : 0);
            break;
        }
        if (opcode == 0x9) send_frame(c, 0xA, payload, (size_t)len); /* ping -> pong */
        /* text, binary, pong, continuation: ignored */
    }
    kiln_free(payload);
}

static void on_upgrade(void *cls, struct MHD_Connection *conn, void *con_cls, const char *extra_in,
                       size_t extra_in_size, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh) {
    /* cls is the server; con_cls the request, alive during this call (a context allocated for the upgrade
     * would leak whenever libmicrohttpd declines to upgrade, e.g. for HTTP/1.0) */
    kiln_server *srv = cls;
    const kiln_req *req = con_cls;
    kiln_ws_hub *h = srv->hub;
    ws_client *c = kiln_calloc(1, sizeof *c);
    bool added = false;
    if (c && h) {
        c->sock = sock;
        c->urh = urh;
        snprintf(c->client_id, sizeof c->client_id, "%s", req ? req->ws_client_id : "");
        pthread_mutex_init(&c->send_mu, NULL);
        /* libmicrohttpd hands the socket over non-blocking; the reader loop and the senders want it blocking,
         * with a send time-out so a client that stops reading cannot stall the worker */
        int fl = fcntl(sock, F_GETFL);
        if (fl >= 0) fcntl(sock, F_SETFL, fl & ~O_NONBLOCK);
        struct timeval tv = {.tv_sec = 10};
        setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        pthread_mutex_lock(&h->mu);
        if (!h->closing && h->n < WS_MAX_CLIENTS) {
            h->clients[h->n++] = c;
            added = true;
        }
        pthread_mutex_unlock(&h->mu);
    }
    if (added) {
        /* the first message, as ComfyUI sends it: the queue status and the session id */
        int pending = kiln_store_count(srv->store, KILN_JOB_QUEUED) + kiln_store_count(srv->store, KILN_JOB_RUNNING);
        json_t *msg = json_pack("{s:s, s:{s:{s:{s:i}}, s:s}}", "type", "status", "data", "status", "exec_info",
                                "queue_remaining", pending, "sid", c->client_id);
        char *txt = json_dumps(msg, JSON_COMPACT);
        json_decref(msg);
        if (txt) send_frame(c, 1, txt, strlen(txt));
        free(txt);
        reader rd = {sock, extra_in, extra_in_size};
        client_loop(c, &rd);
        pthread_mutex_lock(&h->mu);
        for (int i = 0; i < h->n; i++)
            if (h->clients[i] == c) {
                h->clients[i] = h->clients[--h->n];
                break;
            }
        pthread_cond_broadcast(&h->gone);
        pthread_mutex_lock(&c->send_mu); /* no sender is mid-frame on this socket any more */
        pthread_mutex_unlock(&c->send_mu);
        pthread_mutex_unlock(&h->mu);
    }
    if (c) {
        if (added) pthread_mutex_destroy(&c->send_mu);
        kiln_free(c);
    }
    MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
}

bool kiln_routes_ws(kiln_req *r, enum MHD_Result *res) {
    if (strcmp(r->url, "/ws") != 0) return false;
    const char *upgrade = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Upgrade");
    const char *key = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Sec-WebSocket-Key");
    const char *version = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Sec-WebSocket-Version");
    char accept[29];
    if (strcmp(r->method, "GET") != 0 || !upgrade || strcasecmp(upgrade, "websocket") != 0 ||
        !kiln_ws_accept_key(key, accept) || !version || strcmp(version, "13") != 0) {
        *res = kiln_reply_comfy_error(r, 400, "bad_request",
                                      "/ws needs a WebSocket upgrade (GET, Upgrade: websocket, version 13)", "");
        return true;
    }
    const char *cid = kiln_req_arg(r, "clientId");
    if (cid && *cid && strlen(cid) < sizeof r->ws_client_id)
        snprintf(r->ws_client_id, sizeof r->ws_client_id, "%s", cid);
    else
        kiln_uuid4(r->ws_client_id);
    struct MHD_Response *resp = MHD_create_response_for_upgrade(on_upgrade, r->srv);
    if (!resp) {
        *res = MHD_NO;
        return true;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_UPGRADE, "websocket");
    MHD_add_response_header(resp, "Sec-WebSocket-Accept", accept);
    *res = MHD_queue_response(r->conn, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
    MHD_destroy_response(resp);
    r->replied = true;
    return true;
}

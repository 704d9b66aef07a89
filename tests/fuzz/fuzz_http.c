/* fuzz_http.c - libFuzzer target: arbitrary bytes as one HTTP request to an in-process `kiln serve` (no image
 * engine, a scratch output folder). The server must answer or close - never crash, leak or hang - and must
 * still answer GET /health afterwards. Covers request parsing, the body limit, routing, /prompt validation,
 * /view and /upload path checks, the WebSocket upgrade and frame reader, and the OpenAI route's checks. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static kiln_server *srv;
static char scratch[64];

static void cleanup(void) {
    kiln_server_stop(srv);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch);
    if (system(cmd) != 0) fprintf(stderr, "fuzz_http: cleanup failed\n");
}

static int dial(void) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)kiln_server_port(srv))};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    int s = -1;
    /* tens of thousands of short connections exhaust loopback's ephemeral ports (TIME_WAIT): wait for one
     * rather than call that a server failure; a refused connection is one */
    for (int tries = 0; tries < 100; tries++) {
        s = socket(AF_INET, SOCK_STREAM, 0);
        struct linger lg = {.l_onoff = 1, .l_linger = 0}; /* close with RST: no TIME_WAIT on our side */
        setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        if (connect(s, (struct sockaddr *)&a, sizeof a) == 0) break;
        int e = errno;
        close(s);
        s = -1;
        if (e == ECONNREFUSED) break;
        usleep(100 * 1000);
    }
    if (s < 0) abort(); /* the server stopped listening */
    struct timeval tv = {.tv_sec = 5};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return s;
}

static void exchange(const uint8_t *data, size_t size, char *reply, size_t cap) {
    int s = dial();
    size_t off = 0;
    while (off < size) {
        ssize_t w = send(s, data + off, size - off, MSG_NOSIGNAL);
        if (w <= 0) break;
        off += (size_t)w;
    }
    shutdown(s, SHUT_WR);
    size_t n = 0;
    for (;;) {
        ssize_t r = recv(s, reply + n, cap - 1 - n, 0);
        if (r <= 0) break;
        n += (size_t)r;
        if (n == cap - 1) n = 0; /* keep reading to EOF; only the start matters */
    }
    reply[n] = 0;
    close(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!srv) {
        snprintf(scratch, sizeof scratch, "/tmp/kiln-fuzz-http-%d", (int)getpid());
        kiln_server_config cfg = kiln_server_config_default();
        cfg.port = 0;
        cfg.output_dir = scratch;
        cfg.max_body = 64 * 1024;
        cfg.conn_timeout_s = 1;
        cfg.max_queue = 64;
        kiln_err err = {0};
        if (kiln_server_start(&cfg, &srv, &err) != KILN_OK) {
            fprintf(stderr, "fuzz_http: %s\n", err.msg);
            abort();
        }
        atexit(cleanup);
    }
    if (size > 256 * 1024) return 0;
    static char reply[1 << 16];
    exchange(data, size, reply, sizeof reply);
    /* let the server's threads finish with this input (connection teardown, a queued job) before libFuzzer's
     * leak check looks at the heap: memory in flight between threads is not a leak */
    for (int i = 0; i < 2000 && !kiln_server_idle(srv); i++) usleep(1000);
    static unsigned calls;
    if (++calls % 64 == 0) {
        static const char health[] = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        bool up = false;
        for (int tries = 0; tries < 3 && !up; tries++) { /* a loaded machine may be slow once; dead is dead */
            exchange((const uint8_t *)health, sizeof health - 1, reply, sizeof reply);
            up = strstr(reply, "200 OK") != NULL;
        }
        if (!up) {
            fprintf(stderr, "fuzz_http: /health answered: %.300s\n", reply);
            abort(); /* the server stopped answering */
        }
    }
    return 0;
}

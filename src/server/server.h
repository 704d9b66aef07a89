/* server.h - `kiln serve`: the ComfyUI- and OpenAI-compatible HTTP/WebSocket server on one durable queue.
 *
 *     kiln_server_config cfg = kiln_server_config_default();
 *     cfg.models_dir = "models"; cfg.output_dir = "output";
 *     cfg.engine = &engine;                  // the image engine seam (graph/engine.h); NULL: jobs fail clearly
 *     kiln_server *srv;
 *     if (kiln_server_start(&cfg, &srv, &err) != KILN_OK) ...
 *     ... kiln_server_port(srv) ...
 *     kiln_server_stop(srv);                 // stops accepting, lets the running node finish its step, closes
 *
 * Routes (every ComfyUI route also under /api): see docs/server.md. Threads: libmicrohttpd runs one thread per
 * connection (so a handler may wait for a job); one worker thread runs jobs from the SQLite queue. A dropped
 * connection never cancels or frees a job: the job belongs to the queue, its result to the history.
 */
#ifndef KILN_SERVER_SERVER_H
#define KILN_SERVER_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "base/status.h"
#include "graph/engine.h"
#include "graph/graph.h"

enum { KILN_PREVIEW_NONE = 0, KILN_PREVIEW_LATENT2RGB = 1 };

typedef struct kiln_server_config {
    const char *listen;      /* address to bind; default "127.0.0.1" */
    int port;                /* 0 = pick a free port (see kiln_server_port) */
    const char *models_dir;  /* diffusion_models/, text_encoders/, vae/ */
    const char *output_dir;  /* SaveImage output; input/ and temp/ live beside it unless set */
    const char *input_dir;   /* uploads; default <output_dir>/../input... NULL = <output_dir>/input */
    const char *user_dir;    /* settings and userdata (user/default/...); NULL = <parent of output_dir>/user */
    const char *db_path;     /* job store; NULL = <user_dir>/kiln-jobs.sqlite (outside every /view folder); a
                              * postgresql:// URI: the queue shared by many servers (job_store_pg.h) */
    double lease_s;          /* shared store: a claim without heartbeat expires after this; 0 = 30 s */
    const char *front_end_root; /* the web frontend's static folder (ComfyUI's); NULL: kiln's own page at / */
    const char *templates_dirs[8]; /* folders /templates/NAME is served from, first hit wins; NULL-terminated */
    const char *token;       /* NULL: no auth; else every route but /health and / needs "Bearer <token>" */
    const char *default_unet, *default_clip, *default_vae; /* OpenAI route's models; NULL = first file found */
    size_t max_body;         /* bytes; default 8 MiB */
    int max_queue;           /* pending jobs; default 256 */
    int conn_timeout_s;      /* idle connection time-out (slow-drip clients); default 30 */
    int request_timeout_s;   /* how long an OpenAI request waits for its job; default 600 */
    int batch_images;        /* compatible queued jobs share one forward of at most this many images; default 4,
                              * 1 = one job at a time (worker.c) */
    int default_width, default_height; /* OpenAI size "auto" and no size; 0 = 1024x1024 */
    int preview_method;      /* KILN_PREVIEW_NONE (default) | KILN_PREVIEW_LATENT2RGB: JPEG previews on /ws */
    kiln_graph_limits limits;
    kiln_gen_engine *engine;
} kiln_server_config;

kiln_server_config kiln_server_config_default(void);

typedef struct kiln_server kiln_server;

kiln_status kiln_server_start(const kiln_server_config *cfg, kiln_server **out, kiln_err *err);
int kiln_server_port(const kiln_server *srv);
/* true when no HTTP connection is open and no job is queued or running (tests and fuzzing wait for it). */
bool kiln_server_idle(kiln_server *srv);
/* Graceful drain (SIGTERM): the worker claims nothing more and the jobs it holds run to their end (up to
 * timeout_s); HTTP keeps answering meanwhile (history, waiting OpenAI requests). true when it went idle in time.
 * Then call kiln_server_stop: jobs still queued stay queued (for the next start or, on a shared store, for the
 * other nodes), a job still running is handed back. */
bool kiln_server_drain(kiln_server *srv, double timeout_s);
void kiln_server_stop(kiln_server *srv); /* NULL allowed */

#endif

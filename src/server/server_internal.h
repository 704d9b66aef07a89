/* server_internal.h - what the server's files share: the server struct, one HTTP request, the reply helpers,
 * the worker and the WebSocket hub. Internal to src/server/. */
#ifndef KILN_SERVER_INTERNAL_H
#define KILN_SERVER_INTERNAL_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "server/job_store.h"
#include "server/server.h"

/* ---- WebSocket hub (ws.c) ----------------------------------------------------------------------------------- */

typedef struct kiln_ws_hub kiln_ws_hub;
kiln_ws_hub *kiln_ws_hub_new(void);
void kiln_ws_hub_free(kiln_ws_hub *hub); /* closes every client */
/* Sends {type, data} as a text frame to the clients with client_id (NULL: to every client). Steals data. */
void kiln_ws_send(kiln_ws_hub *hub, const char *client_id, const char *type, json_t *data);
/* A binary frame as ComfyUI sends it: u32 BE event (1 = PREVIEW_IMAGE), u32 BE format (1 JPEG, 2 PNG), bytes. */
#define KILN_WS_PREVIEW_IMAGE 1u
#define KILN_WS_FORMAT_JPEG 1u
#define KILN_WS_FORMAT_PNG 2u
void kiln_ws_send_binary(kiln_ws_hub *hub, const char *client_id, uint32_t event, uint32_t format, const uint8_t *data,
                         size_t len);
int kiln_ws_count(kiln_ws_hub *hub);
/* The RFC 6455 accept value for a Sec-WebSocket-Key (28 chars + NUL). false on a bad key. */
bool kiln_ws_accept_key(const char *key, char out[29]);

/* ---- worker (worker.c) -------------------------------------------------------------------------------------- */

typedef struct kiln_worker kiln_worker;
kiln_status kiln_worker_start(struct kiln_server *srv, kiln_worker **out, kiln_err *err);
/* Stops the thread (the running job is left for the next start) and joins it; waiters return. The struct stays
 * valid for threads still inside kiln_worker_wait until kiln_worker_free. */
void kiln_worker_stop(kiln_worker *w);
void kiln_worker_free(kiln_worker *w);
void kiln_worker_wake(kiln_worker *w);           /* a job was queued */
bool kiln_worker_stopping(kiln_worker *w);       /* the server is shutting down */
/* Graceful drain: claims nothing more; the jobs claimed now run to their end. Waits up to timeout_s for that;
 * true when the worker went idle. Then kiln_server_stop hands back what is left. */
bool kiln_worker_drain(kiln_worker *w, double timeout_s);
/* Interrupts the running job (only if its id matches, when id is not NULL). true if one was running. */
bool kiln_worker_interrupt(kiln_worker *w, const char *id);
/* Copies the running job's id into id (cap 64); false when idle. */
bool kiln_worker_current(kiln_worker *w, char *id);
/* Waits until job id is final or timeout_s passes; returns true when final. */
bool kiln_worker_wait(kiln_worker *w, const char *id, double timeout_s);

typedef struct kiln_partials kiln_partials; /* openai.h */

/* ---- metrics (metrics.c) -------------------------------------------------------------------------------- */

typedef struct kiln_metrics kiln_metrics;
kiln_metrics *kiln_metrics_new(void);
void kiln_metrics_free(kiln_metrics *m);
/* A job this node finished (after its finish committed): images made, the engine's time, its graph (the
 * loaders' files become the resident models). */
void kiln_metrics_job(kiln_metrics *m, const kiln_job *job, kiln_job_state final, int images, double engine_ms,
                      json_t *graph);
void kiln_metrics_unloaded(kiln_metrics *m); /* POST /free unloaded the models */

/* ---- the server --------------------------------------------------------------------------------------------- */

struct kiln_server {
    kiln_server_config cfg;
    char listen[64], models_dir[2048], output_dir[2048], input_dir[2048], temp_dir[2048], db_path[2048];
    char user_dir[2048];     /* <user_dir>/default/ holds settings and userdata */
    char front_end_root[2048]; /* "" = kiln's own page at / */
    char templates_dirs[8][2048];
    int n_templates_dirs;
    pthread_mutex_t user_mu; /* settings read-modify-write */
    char token[256];
    char default_unet[256], default_clip[256], default_vae[256];
    struct MHD_Daemon *daemon;
    int port;
    kiln_store *store;
    kiln_worker *worker;
    kiln_ws_hub *hub;
    kiln_partials *partials; /* partial images for OpenAI streams (partials.c) */
    kiln_metrics *metrics;
    atomic_int counter; /* ids for sockets */
    double started_s;
};

/* One HTTP request as accumulated across libmicrohttpd's calls. */
typedef struct kiln_req {
    struct kiln_server *srv;
    struct MHD_Connection *conn;
    const char *method, *url; /* url without the /api prefix (decoded by libmicrohttpd) */
    char *raw_path;           /* the request line's path as sent (still percent-encoded, no query), no /api */
    bool api_prefixed;        /* the URL began with /api/: never a static file */
    bool started;             /* the access handler has seen this request */
    char *body;
    size_t body_len, body_cap;
    bool too_big;
    size_t discarded;       /* bytes of an over-limit body read and dropped */
    bool replied;
    double started_s;       /* first byte of the request seen (monotonic): bounds slow-drip bodies */
    char ws_client_id[128]; /* /ws: the clientId the upgrade handler registers */
} kiln_req;

/* Replies (each returns the MHD result to hand back). Steal body. */
enum MHD_Result kiln_reply_json(kiln_req *r, unsigned status, json_t *body);
/* The same with extra headers: NULL-terminated name, value, name, value, ... */
enum MHD_Result kiln_reply_json_headers(kiln_req *r, unsigned status, json_t *body, const char *const *headers);
enum MHD_Result kiln_reply_text(kiln_req *r, unsigned status, const char *content_type, const char *text);
/* ComfyUI-style plain error {error:{type,message,details,extra_info}, node_errors:{}} */
enum MHD_Result kiln_reply_comfy_error(kiln_req *r, unsigned status, const char *type, const char *message,
                                       const char *details);
/* OpenAI's error shape {error:{message, type, param, code}}, with `x-should-retry` false for a 4xx other than
 * 408/409/429 and true otherwise (the openai SDK's retry rule, made explicit) */
enum MHD_Result kiln_reply_openai_error(kiln_req *r, unsigned status, const char *message, const char *type,
                                        const char *param, const char *code);

/* The body as JSON (an object), or a 400 reply already queued and NULL returned (*replied set). */
json_t *kiln_req_json(kiln_req *r, bool openai_shape, enum MHD_Result *replied);
const char *kiln_req_arg(kiln_req *r, const char *name);

/* Route groups: each returns true when it handled the URL (and *res holds the result). */
bool kiln_routes_comfy(kiln_req *r, enum MHD_Result *res);
bool kiln_routes_openai(kiln_req *r, enum MHD_Result *res);
bool kiln_routes_files(kiln_req *r, enum MHD_Result *res);
bool kiln_routes_ws(kiln_req *r, enum MHD_Result *res);
bool kiln_routes_user(kiln_req *r, enum MHD_Result *res);   /* /settings, /users, /userdata (routes_user.c) */
bool kiln_routes_jobs(kiln_req *r, enum MHD_Result *res);   /* /jobs (routes_jobs.c) */
bool kiln_routes_info(kiln_req *r, enum MHD_Result *res);   /* /features, /extensions, ... (routes_info.c) */
bool kiln_routes_static(kiln_req *r, enum MHD_Result *res); /* GET of the frontend's files (routes_static.c) */
bool kiln_routes_metrics(kiln_req *r, enum MHD_Result *res); /* GET /metrics (metrics.c) */

/* ---- previews (preview.c) ---------------------------------------------------------------------------- */

/* RGB8 [2*h16, 2*w16] from the DiT's latent tokens [h16*w16, 128] (kiln_malloc'd; NULL when out of memory). */
uint8_t *kiln_preview_latent2rgb(const float *tokens, int h16, int w16, int *width, int *height);
/* JPEG of an RGB8 image; *out from kiln_malloc. */
bool kiln_jpeg_encode(const uint8_t *rgb, int width, int height, int quality, uint8_t **out, size_t *len);

/* ---- paths (paths.c) ------------------------------------------------------------------------------------- */

/* A relative path of plain components: no leading '/', no empty, '.' or '..' component, no '\' or control
 * byte; components starting with '.' only when allow_dot_names. */
bool kiln_rel_path_ok(const char *rel, bool allow_dot_names);
/* Percent-decodes n bytes of s into out (cap bytes with the NUL); false on a bad escape, a NUL or overflow. */
bool kiln_pct_decode(const char *s, size_t n, char *out, size_t cap);
/* true when path resolves (symlinks followed) inside base; may_not_exist: a file about to be created, whose
 * folder must resolve inside base. */
bool kiln_path_inside(const char *base, const char *path, bool may_not_exist);
bool kiln_mkdirs(const char *path);
/* Copies in to out replacing each absolute path of this machine (a token starting with '/' whose first
 * component exists at /) by its last component: errors never show where the server keeps its files. */
void kiln_scrub_paths(const char *in, char *out, size_t cap);
/* Replies with a file's bytes (fd is consumed); the content type from the name. */
enum MHD_Result kiln_reply_file(kiln_req *r, int fd, const char *name, const char *cache_control);
const char *kiln_content_type(const char *name);
/* ComfyUI's plain 404 (aiohttp's "404: Not Found", text/plain). */
enum MHD_Result kiln_reply_not_found(kiln_req *r);

/* Shared by the ComfyUI and OpenAI routes: validates a graph and queues it. On failure a reply (ComfyUI shape
 * when openai is false) has been queued and false returned; on success *number and id are set. */
typedef struct kiln_submit {
    json_t *graph;       /* borrowed */
    const char *client_id;
    json_t *extra_data;  /* borrowed, may be NULL */
    const char *kind;    /* "comfy" | "openai" */
    json_t *extra_request; /* borrowed, may be NULL: merged into the stored request */
    bool front;
    char id[64];         /* in: requested id ("" = new uuid); out: the id */
    int64_t number;
    json_t *node_errors; /* out: owned by the caller when set */
    bool reuse_existing; /* in: an id that is already taken is not an error: existed is set, nothing queued */
    bool existed;        /* out */
} kiln_submit;
bool kiln_submit_job(kiln_req *r, kiln_submit *s, bool openai, enum MHD_Result *res);

/* A new random lowercase UUID v4. */
void kiln_uuid4(char out[37]);
/* A websocket event for client_id's sockets (NULL: all): through the shared store to every node when there is
 * one, else to this node's hub (events.c). Steals data. */
void kiln_events_send(struct kiln_server *srv, const char *client_id, const char *type, json_t *data);
/* The notification text kiln_events_send would publish (free it), for an event to go out in the transaction of
 * a store change (kiln_store_finish); NULL when the store is not shared or the event is too long for it. */
char *kiln_events_encode(struct kiln_server *srv, const char *client_id, const char *type, json_t *data);
/* The shared store's listener callback (kiln_store_on_event): events to the hub, job adds wake the worker. */
void kiln_events_deliver(void *ctx, const char *channel, const char *payload);
/* The queue-status message {status:{exec_info:{queue_remaining}}} broadcast on queue changes. */
void kiln_broadcast_status(struct kiln_server *srv, const char *sid);
/* The embedded web page (served at /kiln/, and at / when no frontend is installed). */
extern const char kiln_web_index_html[];

#endif

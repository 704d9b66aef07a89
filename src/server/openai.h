/* openai.h - the pieces of the OpenAI images API that every images route shares (generations today, edits
 * next): request fields parsed and validated into one struct, errors in OpenAI's shape with the SDK's retry
 * hint, Idempotency-Key handling, the finished job turned into the response's `data` (b64_json or signed url,
 * png/jpeg/webp) and the server-sent-event stream. A route of its own (routes_openai.c) builds its graph from
 * kiln_oai_params and calls kiln_oai_run. Internal to src/server/.
 *
 *     kiln_oai_params p;
 *     if (!kiln_oai_parse(r, body, KILN_OAI_GENERATIONS, &p, &res)) return res;   // a 400 is queued
 *     json_t *graph = my_graph(&p);
 *     res = kiln_oai_run(r, &p, graph);                                          // submit, wait, answer
 */
#ifndef KILN_SERVER_OPENAI_H
#define KILN_SERVER_OPENAI_H

#include "server/server_internal.h"

typedef enum { KILN_OAI_PNG = 0, KILN_OAI_JPEG, KILN_OAI_WEBP } kiln_oai_format;

/* Which route's fields are allowed (an unknown field is refused by name, as OpenAI does). */
typedef enum { KILN_OAI_GENERATIONS = 0, KILN_OAI_EDITS } kiln_oai_route;

/* The model families a request can select (openai_models.c): what graph it gets. */
typedef enum { KILN_OAI_FLUX2 = 0, KILN_OAI_FLUX1_DEV, KILN_OAI_FLUX1_SCHNELL } kiln_oai_family;

#define KILN_OAI_MAX_LORAS 8
#define KILN_OAI_MAX_IMAGES 10 /* KILN_MAX_REFS: the engine's reference images per request */

typedef struct kiln_oai_lora {
    char name[256];              /* a file of models/loras (one plain name, never a path) */
    double strength;
} kiln_oai_lora;

typedef struct kiln_oai_params {
    const char *prompt;          /* borrowed from the body; non-empty */
    const char *negative;        /* NULL: ConditioningZeroOut */
    kiln_oai_family family;
    char unet[256], clip[256], clip2[256], vae[256]; /* model files (validated names from the models folder);
                                                      * FLUX.1: clip = CLIP-L, clip2 = T5 */
    char model_name[256];        /* the name the response reports */
    kiln_oai_lora loras[KILN_OAI_MAX_LORAS];
    int n_loras;
    /* edits: the reference images, saved in the input folder under server-chosen names (openai_form.c) */
    char images[KILN_OAI_MAX_IMAGES][96];
    int n_images;
    int first_w, first_h;        /* the first reference's prepared size (the output size of "auto") */
    int width, height, n, steps, partial_images, compression;
    double guidance;
    json_int_t seed;
    kiln_oai_format format;
    bool url;                    /* response_format url (else b64_json) */
    bool stream;
    const char *user;            /* client id for /ws, may be NULL */
    char idem_key[256];          /* Idempotency-Key header, "" when none */
    char body_sha[65];           /* of the raw body: a key reused with another body is refused */
} kiln_oai_params;

const char *kiln_oai_format_name(kiln_oai_format f); /* "png" | "jpeg" | "webp" */

/* An error in OpenAI's shape. retry: the SDK's `x-should-retry` header ("true"/"false"); deterministic failures
 * (the same request would fail the same way) say false so the SDK does not resubmit them. */
enum MHD_Result kiln_oai_error(kiln_req *r, unsigned status, bool retry, const char *type, const char *param,
                               const char *code, const char *fmt, ...) __attribute__((format(printf, 7, 8)));

/* Validates every field of body (owned by the caller, must outlive p). On failure a 400 has been queued.
 * KILN_OAI_EDITS: the caller has set p->n_images and p->first_w/h (kiln_oai_form_images) before; the other
 * fields of p are reset. */
bool kiln_oai_parse(kiln_req *r, json_t *body, kiln_oai_route route, kiln_oai_params *p, enum MHD_Result *res);

/* ---- models (openai_models.c) ------------------------------------------------------------------------------ */

/* Resolves body's `model` (a kiln model id such as "flux.2-klein-4b" / "flux.1-dev" / "flux.1-schnell", a
 * diffusion model file name or its stem; absent: the server's default) into p->family and the four files.
 * On failure a 400/503 has been queued. */
bool kiln_oai_model(kiln_req *r, json_t *model, kiln_oai_params *p, enum MHD_Result *res);
/* GET /v1/models' data[]: the model ids the installed files serve, then the files themselves. */
json_t *kiln_oai_model_list(kiln_server *srv);

/* ---- graphs (openai_graph.c) ------------------------------------------------------------------------------- */

/* The ComfyUI graph of a request: text-to-image (FLUX.2 or FLUX.1) or, with p->n_images, a FLUX.2 edit with
 * the images as reference latents; p->loras as LoraLoaderModelOnly nodes. NULL when out of memory. */
json_t *kiln_oai_graph(const kiln_oai_params *p);

/* ---- multipart uploads (openai_form.c) --------------------------------------------------------------------- */

/* The checked images of an edits request, in memory until the fields have passed too. */
typedef struct kiln_oai_uploads kiln_oai_uploads;

/* The multipart/form-data body of an edits request: its fields as the JSON object kiln_oai_parse takes (typed
 * as the JSON API's: "2" -> 2, "true" -> true, lora[][name]... -> [{...}]) and its images checked and decoded
 * (*up; their server-chosen, content-addressed names in p->images, the first one's prepared size in
 * p->first_w/h). NULL (a 400 queued) when anything is wrong; nothing is written. *sha: SHA-256 hex of the
 * images, for idempotency. */
json_t *kiln_oai_form(kiln_req *r, kiln_oai_params *p, char sha[65], kiln_oai_uploads **up, enum MHD_Result *res);
/* Saves the images in the input folder (temp + rename; all or none). false: a 500 is queued. */
bool kiln_oai_form_save(kiln_req *r, const kiln_oai_uploads *up, const kiln_oai_params *p, enum MHD_Result *res);
void kiln_oai_uploads_free(kiln_oai_uploads *up);

/* ---- running a request (openai_run.c) ---------------------------------------------------------------------- */

/* Queues graph as an "openai" job (or finds the job an earlier request with the same Idempotency-Key made),
 * waits for it and answers: JSON, or the event stream when p->stream. Borrows graph. */
enum MHD_Result kiln_oai_run(kiln_req *r, const kiln_oai_params *p, json_t *graph);

/* The job id an Idempotency-Key maps to: a UUID from SHA-256 of the key, so every node of a cluster and every
 * restart agrees without a table. */
void kiln_oai_idem_id(const char *key, char out[37]);

/* ---- signed links (url_sign.c) --------------------------------------------------------------------------- */

/* Query string "filename=..&subfolder=..&type=output&expires=E&sig=S" (percent-encoded) for a /view link that
 * works without the bearer token until E (Unix seconds). No token configured: no expires/sig. */
bool kiln_url_sign(const struct kiln_server *srv, const char *filename, const char *subfolder, const char *type,
                   long long expires, char *out, size_t cap);
/* true when the request is GET /view with a valid, unexpired signature for its filename/subfolder/type. */
bool kiln_url_signed_ok(kiln_req *r);

/* ---- partial images (partials.c) ------------------------------------------------------------------------- */

/* A board where the worker leaves the partial images of the jobs whose requests asked for them and the stream
 * handler picks them up. Only jobs registered on this node's board get partials. */
typedef struct kiln_partials kiln_partials;
kiln_partials *kiln_partials_new(void);
void kiln_partials_free(kiln_partials *b);
/* Registers job id for n partial images over steps denoising steps. false when the board is full. */
bool kiln_partials_want(kiln_partials *b, const char *id, int n, int steps);
void kiln_partials_forget(kiln_partials *b, const char *id);
/* Worker side: true when job id wants partials; then kiln_partials_step is called after each step. */
bool kiln_partials_wanted(kiln_partials *b, const char *id);
/* One denoising step done with its preview (RGB8, copied when this step is one of the partials). */
void kiln_partials_step(kiln_partials *b, const char *id, const uint8_t *rgb, int w, int h);
/* Stream side: waits up to timeout_s for partial index `next`; true with a kiln_malloc'd RGB copy. */
bool kiln_partials_take(kiln_partials *b, const char *id, int next, double timeout_s, uint8_t **rgb, int *w, int *h);

/* ---- image formats (image_encode.c) ---------------------------------------------------------------------- */

/* Encodes RGB8 as png/jpeg/webp (quality 0..100 for jpeg/webp; 100 webp = lossless). *out from kiln_malloc. */
bool kiln_image_encode(kiln_oai_format f, const uint8_t *rgb, int w, int h, int quality, uint8_t **out,
                       size_t *len);
/* Nearest-neighbour resize (previews to the requested size); kiln_malloc'd, NULL when out of memory. */
uint8_t *kiln_image_resize_nearest(const uint8_t *rgb, int w, int h, int ow, int oh);

#endif

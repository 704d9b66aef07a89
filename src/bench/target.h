/* target.h - what the harness measures: something that takes a ComfyUI API-format graph, makes its images and
 * says how long that took. Two implementations:
 *   kiln_target_http_open   any ComfyUI-API server by URL (kiln serve, or ComfyUI itself): POST /prompt, poll
 *                           GET /history/{id}, GET /view for every output image (target_http.c)
 *   kiln_target_engine_open the in-process engine (include/kiln.h), models found by the graph's loader names
 *                           under a models root (target_engine.c)
 *
 *     kiln_target *t;
 *     kiln_target_http_open("http://127.0.0.1:8188", &opts, &t, &err);
 *     kiln_submit_result r;
 *     if (kiln_target_submit(t, graph, &r, &err) == KILN_OK) { r.exec_seconds, r.images[i].pixel_sha256 ... }
 *     kiln_submit_result_clear(&r);
 *     kiln_target_close(t);
 *
 * Timing definitions (the report's): exec_seconds is the target's own execution time (ComfyUI: from the
 * execution_start to the execution_success stamp of /history; engine: its end-to-end time); wall_seconds is the
 * client's view, from before the submit to the last output fetched; t0/t1 are Unix seconds of the same span.
 */
#ifndef KILN_BENCH_TARGET_H
#define KILN_BENCH_TARGET_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct kiln_bench_image {
    char filename[256], subfolder[256], type[16];
    char pixel_sha256[65]; /* sha256 of the decoded pixels, RGB8 row-major (alpha dropped); "" if not decoded */
    int width, height;
    size_t bytes;          /* size of the file as served */
    char saved[512];       /* local copy ("" when not saved) */
} kiln_bench_image;

typedef struct kiln_submit_result {
    char prompt_id[64];
    double exec_seconds, wall_seconds, t0, t1;
    bool exec_from_target; /* exec_seconds came from the target's own stamps (else it is the client's wall time) */
    int n_images;
    kiln_bench_image *images;
    json_t *stages; /* [{name, duration_ms}] when the target reports them, else NULL */
    /* The HTTP lifecycle (http target; NaN where unknown), Unix seconds: queued_t when POST /prompt answered (the
     * job is queued), running_t / done_t the server's execution_start / execution_success stamps (its clock),
     * seen_t when the client's poll saw it done (then the images are fetched and decoded: t1). engine_s: what the
     * server's engine measured (kiln serve's history extension), NaN when it does not say. */
    double queued_t, running_t, done_t, seen_t, engine_s;
} kiln_submit_result;

void kiln_submit_result_clear(kiln_submit_result *r);

typedef struct kiln_target kiln_target;

typedef struct kiln_target_ops {
    kiln_status (*submit)(kiln_target *t, const json_t *graph, kiln_submit_result *out, kiln_err *err);
    json_t *(*system_stats)(kiln_target *t); /* the target's device list (ComfyUI system_stats "devices") or NULL */
    void (*close)(kiln_target *t);
} kiln_target_ops;

struct kiln_target {
    const kiln_target_ops *ops;
    char kind[32];      /* "comfyui-http" | "engine" */
    char describe[256]; /* e.g. the URL */
};

kiln_status kiln_target_submit(kiln_target *t, const json_t *graph, kiln_submit_result *out, kiln_err *err);
json_t *kiln_target_system_stats(kiln_target *t);
void kiln_target_close(kiln_target *t); /* NULL allowed */

typedef struct kiln_http_opts {
    double timeout_s;       /* one prompt, submit to last image; default 600 */
    double poll_s;          /* /history poll period; default 0.05 */
    const char *save_dir;   /* save fetched images here (NULL: do not save) */
} kiln_http_opts;

/* url: "http://host:port" (a trailing slash is ignored). Nothing is contacted until the first call. */
kiln_status kiln_target_http_open(const char *url, const kiln_http_opts *opts, kiln_target **out, kiln_err *err);

/* models_root holds diffusion_models/ (or unet/), text_encoders/ (or clip/), vae/. threads: 0 = default.
 * device: "cpu", "cuda" or "cuda:N" (NULL = cpu); KILN_E_INVALID on anything else. */
kiln_status kiln_target_engine_open(const char *models_root, int threads, const char *device, kiln_target **out,
                                    kiln_err *err);

/* A target from a command-line spec: "http://host:port" (ComfyUI API), "engine:MODELS_DIR" (CPU) or
 * "engine@DEVICE:MODELS_DIR" with DEVICE cpu, cuda or cuda:N, e.g. "engine@cuda:0:/models". */
kiln_status kiln_target_open_spec(const char *spec, const kiln_http_opts *opts, kiln_target **out, kiln_err *err);

/* sha256 of the decoded pixels of a PNG (RGB8, alpha dropped); KILN_E_FORMAT when not a PNG. */
kiln_status kiln_png_pixel_sha256(const void *png, size_t len, char hex[65], int *width, int *height, kiln_err *err);

#endif

/* routes_openai.c - the OpenAI images API (spec server-api.md section 2) on the same queue as ComfyUI: a
 * generation request becomes the plain KSampler graph, is queued as a job of kind "openai", and the handler
 * waits for that job (the connection's own thread waits; the job does not depend on the connection). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "server/server_internal.h"

#define BAD(msg, param) kiln_reply_openai_error(r, 400, (msg), "invalid_request_error", (param), "invalid_value")

/* The default model file of a kind: the configured name, else the first file found. */
static bool default_model(kiln_server *srv, kiln_model_kind k, const char *configured, char *out, size_t cap) {
    if (configured && *configured) {
        snprintf(out, cap, "%s", configured);
        return true;
    }
    json_t *list = kiln_models_list(srv->cfg.models_dir, k);
    const char *first = json_string_value(json_array_get(list, 0));
    if (first) snprintf(out, cap, "%s", first);
    json_decref(list);
    return first != NULL;
}

static json_t *build_graph(const char *unet, const char *clip, const char *vae, const char *prompt,
                           const char *negative, int w, int h, int n, int steps, double cfg, json_int_t seed) {
    json_t *neg = negative ? json_pack("{s:s, s:{s:s, s:[s,i]}}", "class_type", "CLIPTextEncode", "inputs", "text",
                                       negative, "clip", "2", 0)
                           : json_pack("{s:s, s:{s:[s,i]}}", "class_type", "ConditioningZeroOut", "inputs",
                                       "conditioning", "4", 0);
    return json_pack(
        "{s:{s:s, s:{s:s, s:s}}, s:{s:s, s:{s:s, s:s}}, s:{s:s, s:{s:s}}, s:{s:s, s:{s:s, s:[s,i]}}, s:o,"
        " s:{s:s, s:{s:i, s:i, s:i}},"
        " s:{s:s, s:{s:[s,i], s:I, s:i, s:f, s:s, s:s, s:[s,i], s:[s,i], s:[s,i], s:f}},"
        " s:{s:s, s:{s:[s,i], s:[s,i]}}, s:{s:s, s:{s:[s,i], s:s}}}",
        "1", "class_type", "UNETLoader", "inputs", "unet_name", unet, "weight_dtype", "default",
        "2", "class_type", "CLIPLoader", "inputs", "clip_name", clip, "type", "flux2",
        "3", "class_type", "VAELoader", "inputs", "vae_name", vae,
        "4", "class_type", "CLIPTextEncode", "inputs", "text", prompt, "clip", "2", 0,
        "5", neg,
        "6", "class_type", "EmptyFlux2LatentImage", "inputs", "width", w, "height", h, "batch_size", n,
        "7", "class_type", "KSampler", "inputs", "model", "1", 0, "seed", seed, "steps", steps, "cfg", cfg,
        "sampler_name", "euler", "scheduler", "simple", "positive", "4", 0, "negative", "5", 0, "latent_image", "6", 0,
        "denoise", 1.0,
        "8", "class_type", "VAEDecode", "inputs", "samples", "7", 0, "vae", "3", 0,
        "9", "class_type", "SaveImage", "inputs", "images", "8", 0, "filename_prefix", "openai/kiln");
}

static char *read_file_b64(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0 || sb.st_size <= 0 || sb.st_size > (1 << 28)) {
        if (fd >= 0) close(fd);
        return NULL;
    }
    size_t n = (size_t)sb.st_size;
    unsigned char *buf = kiln_malloc(n);
    char *out = kiln_malloc(4 * ((n + 2) / 3) + 1);
    size_t got = 0;
    while (buf && out && got < n) {
        ssize_t rd = read(fd, buf + got, n - got);
        if (rd <= 0) break;
        got += (size_t)rd;
    }
    close(fd);
    if (!buf || !out || got != n) {
        kiln_free(buf);
        kiln_free(out);
        return NULL;
    }
    EVP_EncodeBlock((unsigned char *)out, buf, (int)n);
    kiln_free(buf);
    return out;
}

static enum MHD_Result generations(kiln_req *r) {
    kiln_server *srv = r->srv;
    enum MHD_Result res;
    json_t *body = kiln_req_json(r, true, &res);
    if (!body) return res;
    json_t *p = json_object_get(body, "prompt");
    const char *prompt = json_string_value(p);
    const char *fmt = "b64_json", *size = "1024x1024", *negative = NULL;
    int n = 1, steps = 0, w = 1024, h = 1024;
    double cfg = 1.0;
    json_int_t seed;
    json_t *v;
    res = MHD_NO;
    bool bad = true;
    if (!prompt) {
        res = BAD("prompt is required and must be a string", "prompt");
    } else if ((v = json_object_get(body, "n")) && (!json_is_integer(v) || json_integer_value(v) < 1 ||
                                                    json_integer_value(v) > srv->cfg.limits.max_batch)) {
        char msg[100];
        snprintf(msg, sizeof msg, "n must be an integer from 1 to %d", srv->cfg.limits.max_batch);
        res = BAD(msg, "n");
    } else if ((v = json_object_get(body, "size")) && !json_is_null(v) &&
               (!json_is_string(v) || sscanf(json_string_value(v), "%dx%d", &w, &h) != 2)) {
        res = BAD("size must be a string WIDTHxHEIGHT, e.g. 1024x1024", "size");
    } else if ((v = json_object_get(body, "response_format")) && !json_is_null(v) &&
               (!json_is_string(v) || (strcmp(json_string_value(v), "b64_json") && strcmp(json_string_value(v), "url")))) {
        res = BAD("response_format must be b64_json or url", "response_format");
    } else if ((v = json_object_get(body, "output_format")) && !json_is_null(v) &&
               (!json_is_string(v) || strcmp(json_string_value(v), "png") != 0)) {
        res = kiln_reply_openai_error(r, 400, "output_format: kiln writes png only for now", "invalid_request_error",
                                      "output_format", "unsupported_value");
    } else if ((v = json_object_get(body, "num_inference_steps")) && !json_is_null(v) && !json_is_integer(v)) {
        res = BAD("num_inference_steps must be an integer", "num_inference_steps");
    } else if ((v = json_object_get(body, "guidance_scale")) && !json_is_null(v) && !json_is_number(v)) {
        res = BAD("guidance_scale must be a number", "guidance_scale");
    } else if ((v = json_object_get(body, "seed")) && !json_is_null(v) && !json_is_integer(v)) {
        res = BAD("seed must be an integer", "seed");
    } else if ((v = json_object_get(body, "negative_prompt")) && !json_is_null(v) && !json_is_string(v)) {
        res = BAD("negative_prompt must be a string", "negative_prompt");
    } else {
        bad = false;
    }
    if (bad) {
        json_decref(body);
        return res;
    }
    if ((v = json_object_get(body, "n"))) n = (int)json_integer_value(v);
    if ((v = json_object_get(body, "size")) && json_is_string(v)) size = json_string_value(v);
    (void)size;
    if ((v = json_object_get(body, "response_format")) && json_is_string(v)) fmt = json_string_value(v);
    steps = json_is_integer(json_object_get(body, "num_inference_steps"))
                ? (int)json_integer_value(json_object_get(body, "num_inference_steps"))
                : 4;
    if (json_is_number(json_object_get(body, "guidance_scale")))
        cfg = json_number_value(json_object_get(body, "guidance_scale"));
    negative = json_string_value(json_object_get(body, "negative_prompt"));
    if (json_is_integer(json_object_get(body, "seed"))) {
        seed = json_integer_value(json_object_get(body, "seed"));
    } else {
        uint32_t rnd = 0;
        RAND_bytes((unsigned char *)&rnd, sizeof rnd);
        seed = (json_int_t)rnd;
    }

    char unet[256], clip[256], vae[256];
    const char *model = json_string_value(json_object_get(body, "model"));
    kiln_model_kind dk = KILN_MODELS_DIFFUSION;
    char path[PATH_MAX];
    if (model && kiln_models_resolve(srv->cfg.models_dir, dk, model, path, sizeof path, NULL) == KILN_OK)
        snprintf(unet, sizeof unet, "%s", model); /* a diffusion model file named by the client */
    else if (!default_model(srv, KILN_MODELS_DIFFUSION, srv->default_unet, unet, sizeof unet)) {
        json_decref(body);
        return kiln_reply_openai_error(r, 503, "no diffusion model in the models folder", "server_error", "model",
                                       "model_not_found");
    }
    if (!default_model(srv, KILN_MODELS_TEXT_ENCODER, srv->default_clip, clip, sizeof clip) ||
        !default_model(srv, KILN_MODELS_VAE, srv->default_vae, vae, sizeof vae)) {
        json_decref(body);
        return kiln_reply_openai_error(r, 503, "no text encoder or VAE in the models folder", "server_error", NULL,
                                       "model_not_found");
    }
    json_t *graph = build_graph(unet, clip, vae, prompt, negative, w, h, n, steps, cfg, seed);
    json_t *meta = json_pack("{s:{s:s, s:s}}", "openai", "response_format", fmt, "prompt", prompt);
    kiln_submit s = {.graph = graph, .kind = "openai", .extra_request = meta,
                     .client_id = json_string_value(json_object_get(body, "user"))};
    double t0 = kiln_clock_s();
    bool queued = kiln_submit_job(r, &s, true, &res);
    json_decref(graph);
    json_decref(meta);
    json_decref(s.node_errors);
    if (!queued) {
        json_decref(body);
        return res;
    }
    bool done = kiln_worker_wait(srv->worker, s.id, srv->cfg.request_timeout_s);
    kiln_job j;
    if (!done || kiln_store_get(srv->store, s.id, &j, NULL) != KILN_OK) {
        json_decref(body);
        char msg[200];
        snprintf(msg, sizeof msg, "the image is still being made; job %s stays queued, see /history/%s", s.id, s.id);
        return kiln_reply_openai_error(r, 504, msg, "timeout_error", NULL, "timeout");
    }
    if (j.state != KILN_JOB_SUCCEEDED) {
        json_t *e = j.error ? json_loads(j.error, 0, NULL) : NULL;
        const char *m = json_string_value(json_object_get(e, "exception_message"));
        char msg[1200];
        snprintf(msg, sizeof msg, "generation %s: %s", kiln_job_state_name(j.state), m ? m : "interrupted");
        json_decref(e);
        kiln_job_clear(&j);
        json_decref(body);
        return kiln_reply_openai_error(r, 500, msg, "server_error", NULL, "generation_failed");
    }
    json_t *outputs = json_loads(j.result, 0, NULL);
    json_t *images = json_object_get(json_object_get(outputs, "9"), "images");
    json_t *data = json_array();
    const char *host = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Host");
    size_t i;
    json_t *img;
    bool ok = true;
    json_array_foreach(images, i, img) {
        const char *file = json_string_value(json_object_get(img, "filename"));
        const char *sub = json_string_value(json_object_get(img, "subfolder"));
        if (!file || !sub) continue;
        if (!strcmp(fmt, "url")) {
            char url[1024];
            snprintf(url, sizeof url, "http://%s/view?filename=%s&subfolder=%s&type=output",
                     host ? host : "127.0.0.1", file, sub);
            json_array_append_new(data, json_pack("{s:s, s:s}", "url", url, "revised_prompt", prompt));
        } else {
            char fpath[PATH_MAX + 600];
            snprintf(fpath, sizeof fpath, "%s/%s/%s", srv->output_dir, sub, file);
            char *b64 = read_file_b64(fpath);
            if (!b64) {
                ok = false;
                break;
            }
            json_array_append_new(data, json_pack("{s:s, s:s}", "b64_json", b64, "revised_prompt", prompt));
            kiln_free(b64);
        }
    }
    double secs = (double)(j.finished_ms - j.started_ms) / 1000.0;
    json_t *peak = json_null();
    json_t *msgs = j.messages ? json_loads(j.messages, 0, NULL) : NULL;
    json_t *last = json_array_get(json_array_get(msgs, json_array_size(msgs) - 1), 1);
    json_t *kx = json_object_get(last, "kiln");
    if (json_integer_value(json_object_get(kx, "peak_memory_bytes")) > 0) {
        json_decref(peak);
        peak = json_real((double)json_integer_value(json_object_get(kx, "peak_memory_bytes")) / (1024.0 * 1024.0));
    }
    json_decref(msgs);
    json_decref(outputs);
    kiln_job_clear(&j);
    json_decref(body);
    if (!ok) {
        json_decref(peak);
        json_decref(data);
        return kiln_reply_openai_error(r, 500, "could not read the saved image", "server_error", NULL, "io_error");
    }
    (void)t0;
    return kiln_reply_json(r, 200, json_pack("{s:I, s:o, s:f, s:o, s:{s:i, s:i, s:i}}", "created",
                                             (json_int_t)time(NULL), "data", data, "inference_time_s", secs,
                                             "peak_memory_mb", peak, "usage", "total_tokens", 0, "input_tokens", 0,
                                             "output_tokens", 0));
}

static enum MHD_Result list_models(kiln_req *r) {
    json_t *list = kiln_models_list(r->srv->cfg.models_dir, KILN_MODELS_DIFFUSION);
    json_t *data = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v) {
        json_array_append_new(data, json_pack("{s:s, s:s, s:I, s:s}", "id", json_string_value(v), "object", "model",
                                              "created", (json_int_t)r->srv->started_s, "owned_by", "kiln"));
    }
    json_decref(list);
    return kiln_reply_json(r, 200, json_pack("{s:s, s:o}", "object", "list", "data", data));
}

/* Readiness: the server can take work (store answers, an engine and models are configured). It does not run a
 * generation (that would queue behind user work). */
static enum MHD_Result health_generate(kiln_req *r) {
    char unet[256];
    bool have = default_model(r->srv, KILN_MODELS_DIFFUSION, r->srv->default_unet, unet, sizeof unet);
    if (!r->srv->cfg.engine)
        return kiln_reply_json(r, 503, json_pack("{s:s, s:s}", "status", "unavailable", "reason", "no engine"));
    if (!have)
        return kiln_reply_json(r, 503, json_pack("{s:s, s:s}", "status", "unavailable", "reason", "no model files"));
    return kiln_reply_json(r, 200, json_pack("{s:s, s:s}", "status", "ok", "model", unet));
}

bool kiln_routes_openai(kiln_req *r, enum MHD_Result *res) {
    if (!strcmp(r->url, "/v1/images/generations")) {
        *res = strcmp(r->method, "POST") ? kiln_reply_openai_error(r, 405, "use POST", "invalid_request_error", NULL,
                                                                    "method_not_allowed")
                                         : generations(r);
    } else if (!strcmp(r->url, "/v1/models") && !strcmp(r->method, "GET")) {
        *res = list_models(r);
    } else if (!strcmp(r->url, "/health_generate") && !strcmp(r->method, "GET")) {
        *res = health_generate(r);
    } else {
        return false;
    }
    return true;
}

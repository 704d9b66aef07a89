/* openai_params.c - the images API's request fields, validated one by one into kiln_oai_params with OpenAI's
 * error shape: a readable message, the offending `param`, `x-should-retry: false` (the same body fails the same
 * way every time). Unknown fields are refused by name, as the API does. */
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/openai.h"

#define MAX_PROMPT_BYTES 32000 /* gpt-image's prompt limit */

enum MHD_Result kiln_oai_error(kiln_req *r, unsigned status, bool retry, const char *type, const char *param,
                               const char *code, const char *fmt, ...) {
    char msg[1200], clean[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    kiln_scrub_paths(msg, clean, sizeof clean);
    json_t *e = json_pack("{s:s, s:s, s:o, s:o}", "message", clean, "type", type, "param",
                          param ? json_string(param) : json_null(), "code", code ? json_string(code) : json_null());
    const char *hdr[] = {"x-should-retry", retry ? "true" : "false", NULL};
    return kiln_reply_json_headers(r, status, json_pack("{s:o}", "error", e), hdr);
}

#define BAD(param, ...) kiln_oai_error(r, 400, false, "invalid_request_error", (param), "invalid_value", __VA_ARGS__)

static const char *const gen_fields[] = {
    "prompt", "model", "n", "size", "response_format", "output_format", "output_compression", "stream",
    "partial_images", "user", "quality", "background", "moderation", "style", "num_inference_steps",
    "guidance_scale", "seed", "negative_prompt", "lora", NULL};
/* images/edits: the images arrive as files (openai_form.c); input_fidelity is accepted (klein keeps the
 * references at full weight); mask is refused below, by name */
static const char *const edit_fields[] = {
    "prompt", "model", "n", "size", "response_format", "output_format", "output_compression", "stream",
    "partial_images", "user", "quality", "background", "input_fidelity", "num_inference_steps", "guidance_scale",
    "seed", "negative_prompt", "lora", NULL};

static bool one_of(const char *s, const char *const *list) {
    for (; *list; list++)
        if (!strcmp(s, *list)) return true;
    return false;
}

/* A string field that must be one of list (or absent/null). *out keeps its default when absent. */
static bool enum_field(json_t *body, const char *name, const char *const *list, const char **out) {
    json_t *v = json_object_get(body, name);
    if (!v || json_is_null(v)) return true;
    if (!json_is_string(v) || !one_of(json_string_value(v), list)) return false;
    *out = json_string_value(v);
    return true;
}

static void join(const char *const *list, char *out, size_t cap) {
    size_t o = 0;
    out[0] = 0;
    for (int i = 0; list[i] && o < cap; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s'%s'", i ? (list[i + 1] ? ", " : " and ") : "", list[i]);
}

/* An integer field in [lo, hi] (absent/null: *out unchanged). */
static int int_field(json_t *body, const char *name, json_int_t lo, json_int_t hi, json_int_t *out) {
    json_t *v = json_object_get(body, name);
    if (!v || json_is_null(v)) return 1;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) return 0;
    *out = json_integer_value(v);
    return 1;
}

/* "WxH": digits, 'x', digits, nothing else. */
static bool parse_size(const char *s, int *w, int *h) {
    long a = 0, b = 0;
    const char *p = s;
    int nd = 0;
    while (isdigit((unsigned char)*p) && nd < 6) a = a * 10 + (*p++ - '0'), nd++;
    if (!nd || *p++ != 'x') return false;
    nd = 0;
    while (isdigit((unsigned char)*p) && nd < 6) b = b * 10 + (*p++ - '0'), nd++;
    if (!nd || *p) return false;
    *w = (int)a;
    *h = (int)b;
    return true;
}

/* The LoRA files installed (models/loras), "'a', 'b'" for messages; *hit when name is one of them. */
static void loras_installed(kiln_server *srv, const char *name, bool *hit, char *all, size_t cap) {
    json_t *list = kiln_models_list(srv->cfg.models_dir, KILN_MODELS_LORA);
    size_t i, o = 0;
    json_t *v;
    all[0] = 0;
    *hit = false;
    json_array_foreach(list, i, v) {
        const char *f = json_string_value(v);
        if (!strcmp(f, name)) *hit = true;
        if (o < cap) o += (size_t)snprintf(all + o, cap - o, "%s'%s'", o ? ", " : "", f);
    }
    json_decref(list);
}

/* kiln's `lora` extension: "file.safetensors", {"name": ..., "strength": ...} or a list of either (at most
 * KILN_OAI_MAX_LORAS); names are files of models/loras, never paths; strength as LoraLoaderModelOnly takes it. */
static bool lora_field(kiln_req *r, json_t *v, kiln_oai_params *p, enum MHD_Result *res) {
    if (!v || json_is_null(v)) return true;
    json_t *one = json_array();
    if (!json_is_array(v)) json_array_append(one, v);
    json_t *list = json_is_array(v) ? v : one;
    size_t i;
    json_t *e;
    bool ok = json_array_size(list) <= KILN_OAI_MAX_LORAS;
    if (!ok)
        *res = BAD("lora", "lora takes at most %d adapters", KILN_OAI_MAX_LORAS);
    json_array_foreach(list, i, e) {
        if (!ok) break;
        json_t *name = json_is_object(e) ? json_object_get(e, "name") : e;
        json_t *st = json_is_object(e) ? json_object_get(e, "strength") : NULL;
        const char *key;
        json_t *x;
        json_object_foreach(json_is_object(e) ? e : NULL, key, x) {
            if (strcmp(key, "name") && strcmp(key, "strength")) {
                *res = BAD("lora", "lora entries have a name and a strength; '%.60s' is not one of them", key);
                ok = false;
                break;
            }
        }
        if (!ok) break;
        if (!json_is_string(name) || !kiln_model_name_ok(json_string_value(name))) {
            *res = BAD("lora", "lora must be a file name from models/loras (no path), an object {\"name\": ..., "
                       "\"strength\": ...} or a list of them");
            ok = false;
            break;
        }
        if (st && !json_is_null(st) &&
            (!json_is_number(st) || !isfinite(json_number_value(st)) || fabs(json_number_value(st)) > 100)) {
            *res = BAD("lora", "lora strength must be a number from -100 to 100");
            ok = false;
            break;
        }
        bool hit;
        char all[600];
        loras_installed(r->srv, json_string_value(name), &hit, all, sizeof all);
        if (!hit) {
            *res = BAD("lora", "lora '%.100s' is not installed (models/loras has %s)", json_string_value(name),
                       all[0] ? all : "no files");
            ok = false;
            break;
        }
        kiln_oai_lora *l = &p->loras[p->n_loras++];
        snprintf(l->name, sizeof l->name, "%s", json_string_value(name));
        l->strength = st && !json_is_null(st) ? json_number_value(st) : 1.0;
    }
    json_decref(one);
    return ok;
}

bool kiln_oai_parse(kiln_req *r, json_t *body, kiln_oai_route route, kiln_oai_params *p, enum MHD_Result *res) {
    kiln_server *srv = r->srv;
    kiln_graph_limits def = kiln_graph_limits_default(), lim = srv->cfg.limits;
    int max_side = lim.max_side > 0 ? lim.max_side : def.max_side;
    int max_batch = lim.max_batch > 0 ? lim.max_batch : def.max_batch;
    int max_steps = lim.max_steps > 0 ? lim.max_steps : def.max_steps;
    int64_t max_pixels = lim.max_pixels > 0 ? lim.max_pixels : def.max_pixels;
    kiln_oai_params form = {0};
    if (route == KILN_OAI_EDITS) form = *p; /* the images kiln_oai_form found */
    memset(p, 0, sizeof *p);
    p->n_images = form.n_images;
    p->first_w = form.first_w;
    p->first_h = form.first_h;
    memcpy(p->images, form.images, sizeof p->images);
    p->n = 1;
    p->steps = 4;
    p->guidance = 1.0;
    p->compression = 100;
    p->width = srv->cfg.default_width > 0 ? srv->cfg.default_width : 1024;
    p->height = srv->cfg.default_height > 0 ? srv->cfg.default_height : 1024;

    const char *key;
    json_t *v;
    json_object_foreach(body, key, v) {
        if (route == KILN_OAI_EDITS && !strcmp(key, "mask")) {
            *res = kiln_oai_error(r, 400, false, "invalid_request_error", "mask", "unsupported_parameter",
                                  "mask is not supported: FLUX.2 [klein] edits from reference images (the prompt "
                                  "says what to change), it does not inpaint a masked area; send the image alone");
            return false;
        }
        if (!one_of(key, route == KILN_OAI_EDITS ? edit_fields : gen_fields)) {
            *res = kiln_oai_error(r, 400, false, "invalid_request_error", key, "unknown_parameter",
                                  "Unrecognized request argument supplied: %.100s", key);
            return false;
        }
    }
    v = json_object_get(body, "prompt");
    p->prompt = json_string_value(v);
    const char *q = p->prompt;
    while (q && isspace((unsigned char)*q)) q++;
    if (!v || json_is_null(v)) {
        *res = BAD("prompt", "prompt is required");
        return false;
    }
    if (!p->prompt) {
        *res = BAD("prompt", "prompt must be a string");
        return false;
    }
    if (!*q) {
        *res = kiln_oai_error(r, 400, false, "invalid_request_error", "prompt", "empty_prompt", "prompt must not be empty");
        return false;
    }
    if (strlen(p->prompt) > MAX_PROMPT_BYTES) {
        *res = BAD("prompt", "prompt is longer than %d bytes", MAX_PROMPT_BYTES);
        return false;
    }

    if (!kiln_oai_model(r, json_object_get(body, "model"), p, res)) return false;
    if (route == KILN_OAI_EDITS && p->family != KILN_OAI_FLUX2) {
        *res = BAD("model", "model '%s' is FLUX.1, which has no reference-image editing; edits need a FLUX.2 "
                   "[klein] model", p->model_name);
        return false;
    }
    if (p->family == KILN_OAI_FLUX1_DEV) { /* diffusers FluxPipeline's guidance_scale; ComfyUI's template steps */
        p->steps = 28;
        p->guidance = 3.5;
    }
    if (!lora_field(r, json_object_get(body, "lora"), p, res)) return false;

    json_int_t iv = p->n;
    if (!int_field(body, "n", 1, max_batch, &iv)) {
        *res = BAD("n", "n must be an integer from 1 to %d", max_batch);
        return false;
    }
    p->n = (int)iv;

    if (route == KILN_OAI_EDITS && p->n_images > 0) { /* auto: the first reference's size, as the pipeline does */
        p->width = p->first_w;
        p->height = p->first_h;
    }
    v = json_object_get(body, "size");
    if (v && !json_is_null(v) && !(json_is_string(v) && !strcmp(json_string_value(v), "auto"))) {
        int w = 0, h = 0;
        if (!json_is_string(v) || !parse_size(json_string_value(v), &w, &h) || w < 64 || h < 64 || w > max_side ||
            h > max_side || w % 16 || h % 16 || (int64_t)w * h > max_pixels) {
            *res = BAD("size", "size must be between 64x64 and %dx%d with both sides multiples of 16 (e.g. 1024x1024), "
                       "or auto; got %s%.40s%s", max_side, max_side, json_is_string(v) ? "'" : "",
                       json_is_string(v) ? json_string_value(v) : "a non-string", json_is_string(v) ? "'" : "");
            return false;
        }
        p->width = w;
        p->height = h;
    } else if (p->width > max_side || p->height > max_side || (int64_t)p->width * p->height > max_pixels) {
        *res = BAD("size", "size auto would be the first image's %dx%d, over this server's %dx%d; give a size",
                   p->width, p->height, max_side, max_side);
        return false;
    }

    static const char *const rfmts[] = {"b64_json", "url", NULL}, *const ofmts[] = {"png", "jpeg", "webp", NULL};
    static const char *const quality[] = {"auto", "low", "medium", "high", "standard", "hd", NULL};
    static const char *const background[] = {"auto", "opaque", NULL}, *const moderation[] = {"auto", "low", NULL};
    static const char *const style[] = {"vivid", "natural", NULL};
    const char *rf = "b64_json", *of = "png", *dummy = NULL;
    char list[200];
    if (!enum_field(body, "response_format", rfmts, &rf)) {
        join(rfmts, list, sizeof list);
        *res = BAD("response_format", "response_format must be one of %s", list);
        return false;
    }
    if (!enum_field(body, "output_format", ofmts, &of)) {
        join(ofmts, list, sizeof list);
        *res = BAD("output_format", "output_format must be one of %s", list);
        return false;
    }
    p->url = !strcmp(rf, "url");
    p->format = !strcmp(of, "jpeg") ? KILN_OAI_JPEG : !strcmp(of, "webp") ? KILN_OAI_WEBP : KILN_OAI_PNG;
    iv = 100;
    if (!int_field(body, "output_compression", 0, 100, &iv)) {
        *res = BAD("output_compression", "output_compression must be an integer from 0 to 100 (percent)");
        return false;
    }
    p->compression = (int)iv;
    if (!enum_field(body, "quality", quality, &dummy)) {
        join(quality, list, sizeof list);
        *res = BAD("quality", "quality must be one of %s", list);
        return false;
    }
    if (!enum_field(body, "background", background, &dummy)) {
        *res = BAD("background", "background must be 'auto' or 'opaque' (kiln makes no transparent images)");
        return false;
    }
    if (!enum_field(body, "moderation", moderation, &dummy) || !enum_field(body, "style", style, &dummy)) {
        *res = BAD(json_object_get(body, "style") ? "style" : "moderation",
                   "moderation must be 'auto' or 'low'; style 'vivid' or 'natural'");
        return false;
    }
    v = json_object_get(body, "stream");
    if (v && !json_is_null(v) && !json_is_boolean(v)) {
        *res = BAD("stream", "stream must be true or false");
        return false;
    }
    p->stream = json_is_true(v);
    iv = 0;
    if (!int_field(body, "partial_images", 0, 3, &iv)) {
        *res = BAD("partial_images", "partial_images must be an integer from 0 to 3");
        return false;
    }
    p->partial_images = (int)iv;
    if (p->stream && p->url) {
        *res = BAD("response_format", "a stream carries b64_json images; response_format url cannot be streamed");
        return false;
    }
    iv = p->steps;
    if (!int_field(body, "num_inference_steps", 1, max_steps, &iv)) {
        *res = BAD("num_inference_steps", "num_inference_steps must be an integer from 1 to %d", max_steps);
        return false;
    }
    p->steps = (int)iv;
    v = json_object_get(body, "guidance_scale");
    if (v && !json_is_null(v)) {
        if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < 0 ||
            json_number_value(v) > 100) {
            *res = BAD("guidance_scale", "guidance_scale must be a number from 0 to 100");
            return false;
        }
        p->guidance = json_number_value(v);
    }
    v = json_object_get(body, "seed");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 0) {
            *res = BAD("seed", "seed must be a non-negative integer");
            return false;
        }
        p->seed = json_integer_value(v);
    } else {
        uint32_t rnd = 0;
        RAND_bytes((unsigned char *)&rnd, sizeof rnd);
        p->seed = (json_int_t)rnd;
    }
    v = json_object_get(body, "negative_prompt");
    if (v && !json_is_null(v) && (!json_is_string(v) || strlen(json_string_value(v)) > MAX_PROMPT_BYTES)) {
        *res = BAD("negative_prompt", "negative_prompt must be a string of at most %d bytes", MAX_PROMPT_BYTES);
        return false;
    }
    p->negative = json_string_value(v);
    if (p->negative && p->family != KILN_OAI_FLUX2) {
        *res = BAD("negative_prompt", "negative_prompt needs CFG, which the FLUX.1 graphs do not run (FluxGuidance "
                   "is their guidance: use guidance_scale)");
        return false;
    }
    v = json_object_get(body, "user");
    if (v && !json_is_null(v) && (!json_is_string(v) || strlen(json_string_value(v)) > 100)) {
        *res = BAD("user", "user must be a string of at most 100 bytes");
        return false;
    }
    p->user = json_string_value(v);

    const char *key_hdr = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Idempotency-Key");
    if (key_hdr) {
        size_t n = strlen(key_hdr);
        bool ok = n > 0 && n < sizeof p->idem_key;
        for (size_t i = 0; ok && i < n; i++) ok = key_hdr[i] > 0x20 && key_hdr[i] < 0x7f;
        if (!ok) {
            *res = kiln_oai_error(r, 400, false, "invalid_request_error", NULL, "invalid_idempotency_key",
                                  "the Idempotency-Key header must be 1 to %zu printable ASCII characters",
                                  sizeof p->idem_key - 1);
            return false;
        }
        snprintf(p->idem_key, sizeof p->idem_key, "%s", key_hdr);
    }
    /* of the fields, not the bytes: the same request from another client (key order, spacing) is the same */
    unsigned char d[SHA256_DIGEST_LENGTH];
    char *canon = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS);
    SHA256((const unsigned char *)(canon ? canon : ""), canon ? strlen(canon) : 0, d);
    free(canon);
    for (int i = 0; i < SHA256_DIGEST_LENGTH; i++) snprintf(p->body_sha + 2 * i, 3, "%02x", d[i]);
    return true;
}

void kiln_oai_idem_id(const char *key, char out[37]) {
    char buf[300];
    int n = snprintf(buf, sizeof buf, "kiln-openai-idempotency\n%s", key);
    unsigned char b[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)buf, (size_t)n, b);
    b[6] = (b[6] & 0x0f) | 0x50; /* shaped as a version-5 (name-based) UUID */
    b[8] = (b[8] & 0x3f) | 0x80;
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
             b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

/* routes_openai.c - the OpenAI images API (spec server-api.md section 2) on the same queue as ComfyUI: a
 * generation request becomes the plain KSampler graph, is queued as a job of kind "openai", and the handler
 * waits for that job (the connection's own thread waits; the job does not depend on the connection).
 * The fields, errors, idempotency, formats and streaming every images route shares are in openai.h; a new route
 * (images/edits) parses with kiln_oai_parse, builds its graph and calls kiln_oai_run, and adds one line to
 * kiln_routes_openai. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "server/openai.h"

static json_t *t2i_graph(const kiln_oai_params *p) {
    json_t *neg = p->negative ? json_pack("{s:s, s:{s:s, s:[s,i]}}", "class_type", "CLIPTextEncode", "inputs", "text",
                                          p->negative, "clip", "2", 0)
                              : json_pack("{s:s, s:{s:[s,i]}}", "class_type", "ConditioningZeroOut", "inputs",
                                          "conditioning", "4", 0);
    return json_pack(
        "{s:{s:s, s:{s:s, s:s}}, s:{s:s, s:{s:s, s:s}}, s:{s:s, s:{s:s}}, s:{s:s, s:{s:s, s:[s,i]}}, s:o,"
        " s:{s:s, s:{s:i, s:i, s:i}},"
        " s:{s:s, s:{s:[s,i], s:I, s:i, s:f, s:s, s:s, s:[s,i], s:[s,i], s:[s,i], s:f}},"
        " s:{s:s, s:{s:[s,i], s:[s,i]}}, s:{s:s, s:{s:[s,i], s:s}}}",
        "1", "class_type", "UNETLoader", "inputs", "unet_name", p->unet, "weight_dtype", "default",
        "2", "class_type", "CLIPLoader", "inputs", "clip_name", p->clip, "type", "flux2",
        "3", "class_type", "VAELoader", "inputs", "vae_name", p->vae,
        "4", "class_type", "CLIPTextEncode", "inputs", "text", p->prompt, "clip", "2", 0,
        "5", neg,
        "6", "class_type", "EmptyFlux2LatentImage", "inputs", "width", p->width, "height", p->height, "batch_size", p->n,
        "7", "class_type", "KSampler", "inputs", "model", "1", 0, "seed", p->seed, "steps", p->steps, "cfg", p->guidance,
        "sampler_name", "euler", "scheduler", "simple", "positive", "4", 0, "negative", "5", 0, "latent_image", "6", 0,
        "denoise", 1.0,
        "8", "class_type", "VAEDecode", "inputs", "samples", "7", 0, "vae", "3", 0,
        "9", "class_type", "SaveImage", "inputs", "images", "8", 0, "filename_prefix", "openai/kiln");
}

static enum MHD_Result generations(kiln_req *r) {
    enum MHD_Result res;
    json_t *body = kiln_req_json(r, true, &res);
    if (!body) return res;
    kiln_oai_params p;
    if (kiln_oai_parse(r, body, KILN_OAI_GENERATIONS, &p, &res)) {
        json_t *graph = t2i_graph(&p);
        res = graph ? kiln_oai_run(r, &p, graph)
                    : kiln_oai_error(r, 500, true, "server_error", NULL, "out_of_memory", "out of memory");
        json_decref(graph);
    }
    json_decref(body);
    return res;
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
    json_t *list = kiln_models_list(r->srv->cfg.models_dir, KILN_MODELS_DIFFUSION);
    const char *first = r->srv->default_unet[0] ? r->srv->default_unet : json_string_value(json_array_get(list, 0));
    json_t *body = !r->srv->cfg.engine ? json_pack("{s:s, s:s}", "status", "unavailable", "reason", "no engine")
                   : !first ? json_pack("{s:s, s:s}", "status", "unavailable", "reason", "no model files")
                            : json_pack("{s:s, s:s}", "status", "ok", "model", first);
    unsigned code = r->srv->cfg.engine && first ? 200 : 503;
    json_decref(list);
    return kiln_reply_json(r, code, body);
}

bool kiln_routes_openai(kiln_req *r, enum MHD_Result *res) {
    if (!strcmp(r->url, "/v1/images/generations")) {
        *res = strcmp(r->method, "POST") ? kiln_oai_error(r, 405, false, "invalid_request_error", NULL,
                                                          "method_not_allowed", "use POST")
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

/* routes_openai.c - the OpenAI images API (spec server-api.md section 2) on the same queue as ComfyUI: a
 * generation or edit request becomes the ComfyUI graph of its model (openai_graph.c), is queued as a job of
 * kind "openai", and the handler waits for that job (the connection's own thread waits; the job does not depend
 * on the connection). The fields, errors, idempotency, formats and streaming every images route shares are in
 * openai.h; /v1/images/edits reads its multipart form with openai_form.c first. */
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "server/openai.h"

static enum MHD_Result generations(kiln_req *r) {
    enum MHD_Result res;
    json_t *body = kiln_req_json(r, true, &res);
    if (!body) return res;
    kiln_oai_params p;
    if (kiln_oai_parse(r, body, KILN_OAI_GENERATIONS, &p, &res)) {
        json_t *graph = kiln_oai_graph(&p);
        res = graph ? kiln_oai_run(r, &p, graph)
                    : kiln_oai_error(r, 500, true, "server_error", NULL, "out_of_memory", "out of memory");
        json_decref(graph);
    }
    json_decref(body);
    return res;
}

/* A multipart edit: the images are checked and saved first (nothing is written when any is bad), then the
 * fields are validated as /generations validates them, and the idempotency digest covers the images too. */
static enum MHD_Result edits(kiln_req *r) {
    enum MHD_Result res;
    kiln_oai_params p;
    char sha[65];
    memset(&p, 0, sizeof p);
    kiln_oai_uploads *up = NULL;
    json_t *body = kiln_oai_form(r, &p, sha, &up, &res);
    if (!body) return res;
    if (kiln_oai_parse(r, body, KILN_OAI_EDITS, &p, &res) && kiln_oai_form_save(r, up, &p, &res)) {
        unsigned char d[SHA256_DIGEST_LENGTH];
        char both[140];
        snprintf(both, sizeof both, "%s\n%s", p.body_sha, sha);
        SHA256((const unsigned char *)both, strlen(both), d);
        for (int i = 0; i < SHA256_DIGEST_LENGTH; i++) snprintf(p.body_sha + 2 * i, 3, "%02x", d[i]);
        json_t *graph = kiln_oai_graph(&p);
        res = graph ? kiln_oai_run(r, &p, graph)
                    : kiln_oai_error(r, 500, true, "server_error", NULL, "out_of_memory", "out of memory");
        json_decref(graph);
    }
    kiln_oai_uploads_free(up);
    json_decref(body);
    return res;
}

static enum MHD_Result list_models(kiln_req *r) {
    return kiln_reply_json(r, 200, json_pack("{s:s, s:o}", "object", "list", "data", kiln_oai_model_list(r->srv)));
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
    } else if (!strcmp(r->url, "/v1/images/edits")) {
        *res = strcmp(r->method, "POST") ? kiln_oai_error(r, 405, false, "invalid_request_error", NULL,
                                                          "method_not_allowed", "use POST")
                                         : edits(r);
    } else if (!strcmp(r->url, "/v1/models") && !strcmp(r->method, "GET")) {
        *res = list_models(r);
    } else if (!strcmp(r->url, "/health_generate") && !strcmp(r->method, "GET")) {
        *res = health_generate(r);
    } else {
        return false;
    }
    return true;
}

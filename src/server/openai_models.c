/* openai_models.c - which model a request's `model` names and the files its graph loads. The server knows what
 * its model folders hold from the files' tensors (io/detect.h, what `kiln inspect` prints), never from their
 * names: a FLUX.2 DiT is "flux.2-klein-4b" (or -9b, by its text width), a FLUX.1 DiT "flux.1-dev" when it has
 * the guidance embedder and "flux.1-schnell" when not. Each family then gets the text encoders and the VAE it
 * needs (FLUX.2: the Qwen3 whose width the DiT reads; FLUX.1: CLIP-L + T5 and the 16-channel autoencoder),
 * preferring the files given to `kiln serve` (--unet/--clip/--vae) when they fit. A file name or its stem
 * still selects that file, as before. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/detect.h"
#include "server/openai.h"

#define MAX_FILES 64 /* per folder; enough for any real models folder, bounded per request */

typedef struct probed {
    char name[256];
    kiln_family fam;
    int64_t hidden, context;
    bool guidance; /* FLUX.1 DiT: the guidance embedder ([dev]) */
} probed;

static bool gguf_has(const kiln_gguf_file *g, const char *name) {
    char pre[300];
    snprintf(pre, sizeof pre, "model.diffusion_model.%s", name);
    return kiln_gguf_find(g, name) || kiln_gguf_find(g, pre);
}

/* Detects one file (header only: the tensors are mapped, not read). An unreadable file is UNKNOWN. */
static void probe(const char *root, kiln_model_kind kind, const char *name, probed *out) {
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", name);
    char path[4096];
    kiln_err err = {0};
    if (kiln_models_resolve(root, kind, name, path, sizeof path, &err) != KILN_OK) return;
    kiln_detect_result d = {0};
    size_t n = strlen(name);
    if (n > 5 && !strcmp(name + n - 5, ".gguf")) {
        kiln_gguf_file *g = NULL;
        if (kiln_gguf_open(path, &g, &err) != KILN_OK) return;
        kiln_detect_gguf(g, &d);
        out->guidance = gguf_has(g, "guidance_in.in_layer.weight");
        kiln_gguf_close(g);
    } else {
        kiln_st_file *f = NULL;
        if (kiln_st_open(path, &f, &err) != KILN_OK) return;
        kiln_detect(f, &d);
        out->guidance = kiln_st_find(f, "guidance_in.in_layer.weight") ||
                        kiln_st_find(f, "time_text_embed.guidance_embedder.linear_1.weight");
        kiln_st_close(f);
    }
    out->fam = d.family;
    out->hidden = d.hidden;
    out->context = d.context;
}

static int probe_all(kiln_server *srv, kiln_model_kind kind, probed *out, int cap) {
    json_t *list = kiln_models_list(srv->cfg.models_dir, kind);
    int n = 0;
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v) {
        if (n == cap) break;
        probe(srv->cfg.models_dir, kind, json_string_value(v), &out[n++]);
    }
    json_decref(list);
    return n;
}

/* The kiln model id a diffusion model file serves, or NULL (not a DiT kiln knows). */
static const char *model_id(const probed *p, kiln_oai_family *fam) {
    if (p->fam == KILN_FAMILY_FLUX2_DIT) {
        *fam = KILN_OAI_FLUX2;
        return p->context == 12288 ? "flux.2-klein-9b" : "flux.2-klein-4b"; /* Qwen3-8B's 3 x 4096 */
    }
    if (p->fam == KILN_FAMILY_FLUX1_DIT) {
        *fam = p->guidance ? KILN_OAI_FLUX1_DEV : KILN_OAI_FLUX1_SCHNELL;
        return p->guidance ? "flux.1-dev" : "flux.1-schnell";
    }
    return NULL;
}

static void stem(const char *file, char *out, size_t cap) {
    const char *dot = strrchr(file, '.');
    snprintf(out, cap, "%.*s", dot ? (int)(dot - file) : (int)strlen(file), file);
}

/* A file of family fam (and, for a Qwen3, width*3 == context when context is known): the configured one first. */
static bool pick(const probed *list, int n, kiln_family fam, int64_t context, const char *configured, char *out,
                 size_t cap) {
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++) {
            if (pass == 0 && (!configured || strcmp(list[i].name, configured))) continue;
            if (list[i].fam != fam || (fam == KILN_FAMILY_QWEN3 && context > 0 && list[i].hidden * 3 != context))
                continue;
            snprintf(out, cap, "%s", list[i].name);
            return true;
        }
    return false;
}

/* Today's rule for files kiln cannot classify: the configured file, else the folder's first. */
static bool first_file(kiln_server *srv, kiln_model_kind k, const char *configured, char *out, size_t cap) {
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

#define BAD(param, ...) kiln_oai_error(r, 400, false, "invalid_request_error", (param), "invalid_value", __VA_ARGS__)

/* "'flux.2-klein-4b', 'broken', 'flux-2-klein-4b'": the ids, then the file stems. */
static void supported(const probed *dits, int n, char *all, size_t cap) {
    size_t o = 0;
    all[0] = 0;
    const char *ids[4] = {0};
    int n_ids = 0;
    for (int i = 0; i < n; i++) {
        kiln_oai_family f;
        const char *id = model_id(&dits[i], &f);
        bool dup = !id;
        for (int k = 0; k < n_ids && !dup; k++) dup = !strcmp(ids[k], id);
        if (!dup && n_ids < 4) ids[n_ids++] = id;
    }
    for (int k = 0; k < n_ids && o < cap; k++) o += (size_t)snprintf(all + o, cap - o, "%s'%s'", o ? ", " : "", ids[k]);
    for (int i = 0; i < n && o < cap; i++) {
        char s[256];
        stem(dits[i].name, s, sizeof s);
        o += (size_t)snprintf(all + o, cap - o, "%s'%s'", o ? ", " : "", s);
    }
}

bool kiln_oai_model(kiln_req *r, json_t *model, kiln_oai_params *p, enum MHD_Result *res) {
    kiln_server *srv = r->srv;
    static probed dits[MAX_FILES], encs[MAX_FILES], vaes[MAX_FILES]; /* too big for a connection's stack */
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&mu);
    int nd = probe_all(srv, KILN_MODELS_DIFFUSION, dits, MAX_FILES);
    int hit = -1;
    const char *want = json_string_value(model);
    bool by_id = false;
    if (model && !json_is_null(model)) {
        for (int i = 0; want && i < nd; i++) { /* an id: the configured file when it serves it, else the first */
            kiln_oai_family f;
            const char *id = model_id(&dits[i], &f);
            if (id && !strcmp(id, want) && (hit < 0 || !strcmp(dits[i].name, srv->default_unet))) hit = i;
        }
        by_id = hit >= 0;
        for (int i = 0; want && i < nd && hit < 0; i++) {
            char s[256];
            stem(dits[i].name, s, sizeof s);
            if (!strcmp(want, dits[i].name) || !strcmp(want, s)) hit = i;
        }
        if (hit < 0) {
            char all[800];
            supported(dits, nd, all, sizeof all);
            pthread_mutex_unlock(&mu);
            *res = !want ? BAD("model", "model must be a string")
                         : BAD("model", "Invalid value: '%.100s'. Supported values are: %s.", want,
                               all[0] ? all : "(no model files are installed)");
            return false;
        }
    } else {
        for (int i = 0; i < nd && hit < 0; i++)
            if (!strcmp(dits[i].name, srv->default_unet)) hit = i;
        if (hit < 0 && nd > 0) hit = 0;
        if (hit < 0 && srv->default_unet[0]) { /* configured but not in the folder listing: as before */
            probe(srv->cfg.models_dir, KILN_MODELS_DIFFUSION, srv->default_unet, &dits[0]);
            hit = 0;
        }
        if (hit < 0) {
            pthread_mutex_unlock(&mu);
            *res = kiln_oai_error(r, 503, true, "server_error", "model", "model_not_found",
                                  "no diffusion model is installed on this server");
            return false;
        }
    }
    const probed *dit = &dits[hit];
    snprintf(p->unet, sizeof p->unet, "%s", dit->name);
    const char *id = model_id(dit, &p->family);
    if (!id) p->family = KILN_OAI_FLUX2; /* a file kiln cannot classify runs as today; the engine says why not */
    if (by_id)
        snprintf(p->model_name, sizeof p->model_name, "%s", want);
    else
        stem(dit->name, p->model_name, sizeof p->model_name);
    int ne = probe_all(srv, KILN_MODELS_TEXT_ENCODER, encs, MAX_FILES);
    int nv = probe_all(srv, KILN_MODELS_VAE, vaes, MAX_FILES);
    bool ok;
    if (p->family == KILN_OAI_FLUX2) {
        ok = (pick(encs, ne, KILN_FAMILY_QWEN3, dit->context, srv->default_clip, p->clip, sizeof p->clip) ||
              first_file(srv, KILN_MODELS_TEXT_ENCODER, srv->default_clip, p->clip, sizeof p->clip)) &&
             (pick(vaes, nv, KILN_FAMILY_FLUX2_VAE, 0, srv->default_vae, p->vae, sizeof p->vae) ||
              first_file(srv, KILN_MODELS_VAE, srv->default_vae, p->vae, sizeof p->vae));
        pthread_mutex_unlock(&mu);
        if (!ok)
            *res = kiln_oai_error(r, 503, true, "server_error", NULL, "model_not_found",
                                  "no text encoder or VAE is installed on this server");
        return ok;
    }
    ok = pick(encs, ne, KILN_FAMILY_CLIP_TEXT, 0, srv->default_clip, p->clip, sizeof p->clip) &&
         pick(encs, ne, KILN_FAMILY_T5, 0, srv->default_clip, p->clip2, sizeof p->clip2) &&
         pick(vaes, nv, KILN_FAMILY_FLUX1_VAE, 0, srv->default_vae, p->vae, sizeof p->vae);
    pthread_mutex_unlock(&mu);
    if (!ok)
        *res = BAD("model", "model '%s' is FLUX.1, which needs a CLIP-L and a T5 text encoder in text_encoders/ and "
                   "the FLUX.1 autoencoder (ae) in vae/; this server lacks %s", p->model_name,
                   !p->clip[0] ? "the CLIP-L encoder" : !p->clip2[0] ? "the T5 encoder" : "the FLUX.1 autoencoder");
    return ok;
}

json_t *kiln_oai_model_list(kiln_server *srv) {
    static probed dits[MAX_FILES];
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    json_t *data = json_array();
    pthread_mutex_lock(&mu);
    int nd = probe_all(srv, KILN_MODELS_DIFFUSION, dits, MAX_FILES);
    for (int pass = 0; pass < 2; pass++) /* the ids, then every file by its name (both are accepted) */
        for (int i = 0; i < nd; i++) {
            kiln_oai_family f;
            const char *id = pass ? dits[i].name : model_id(&dits[i], &f);
            bool dup = !id;
            for (int k = 0; k < i && !dup && !pass; k++) dup = model_id(&dits[k], &f) && !strcmp(model_id(&dits[k], &f), id);
            if (dup) continue;
            json_array_append_new(data, json_pack("{s:s, s:s, s:I, s:s}", "id", id, "object", "model", "created",
                                                  (json_int_t)srv->started_s, "owned_by", "kiln"));
        }
    pthread_mutex_unlock(&mu);
    return data;
}

/* nodes.c - what each node class does when the executor runs it (the table is in node_table.c). Inputs arrive
 * already validated against the table, so these functions check only what validation cannot know (files that
 * vanished since, a latent that is not a sampler's, the engine's own errors). */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "graph/exec.h"
#include "graph/pixelize.h"
#include "io/image_png.h"

void kiln_value_clear(kiln_value *v) {
    if (!v) return;
    kiln_free(v->str);
    kiln_free(v->str2);
    kiln_free(v->str3);
    kiln_free(v->latent.model_path);
    kiln_free(v->latent.clip_path);
    kiln_free(v->latent.prompt);
    kiln_free(v->latent.negative);
    kiln_free(v->latent.sampler);
    kiln_free(v->pixels);
    memset(v, 0, sizeof *v);
}

static char *dup_or_null(const char *s) { return s ? kiln_strdup(s) : NULL; }

static kiln_status nomem(kiln_exec *ex) { return KILN_FAIL(ex->err, KILN_E_NOMEM, "out of memory"); }

static int load_model(kiln_exec *ex, kiln_model_kind k, kiln_value_kind vk, const kiln_value *name,
                      kiln_value *out) {
    char path[4096];
    KILN_TRY(kiln_models_resolve(ex->env->models_root, k, name->str, path, sizeof path, ex->err));
    out->kind = vk;
    if (!(out->str = kiln_strdup(path))) return nomem(ex);
    return KILN_OK;
}

int kiln_node_unet_loader(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    return load_model(ex, KILN_MODELS_DIFFUSION, KILN_V_MODEL, in[0], out);
}

int kiln_node_clip_loader(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    if (strcmp(in[1]->str, "flux2") != 0)
        return KILN_FAIL(ex->err, KILN_E_UNSUPPORTED, "CLIPLoader type %s: kiln runs flux2 only", in[1]->str);
    return load_model(ex, KILN_MODELS_TEXT_ENCODER, KILN_V_CLIP, in[0], out);
}

int kiln_node_vae_loader(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    return load_model(ex, KILN_MODELS_VAE, KILN_V_VAE, in[0], out);
}

int kiln_node_clip_text_encode(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    out->kind = KILN_V_CONDITIONING;
    out->str = kiln_strdup(in[0]->str ? in[0]->str : "");
    out->str2 = kiln_strdup(in[1]->str);
    return out->str && out->str2 ? KILN_OK : nomem(ex);
}

int kiln_node_conditioning_zero_out(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    out->kind = KILN_V_CONDITIONING;
    out->zero = true;
    out->str2 = dup_or_null(in[0]->str2);
    return KILN_OK;
}

int kiln_node_empty_flux2_latent(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    out->kind = KILN_V_LATENT;
    out->latent.width = (int)(in[0]->i / 16 * 16); /* ComfyUI floors to the latent grid */
    out->latent.height = (int)(in[1]->i / 16 * 16);
    out->latent.batch = (int)in[2]->i;
    return KILN_OK;
}

int kiln_node_random_noise(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    out->kind = KILN_V_NOISE;
    out->i = in[0]->i;
    return KILN_OK;
}

int kiln_node_ksampler_select(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    out->kind = KILN_V_SAMPLER;
    return (out->str = kiln_strdup(in[0]->str)) ? KILN_OK : nomem(ex);
}

int kiln_node_flux2_scheduler(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    out->kind = KILN_V_SIGMAS;
    out->i = in[0]->i;
    out->width = (int)in[1]->i;
    out->height = (int)in[2]->i;
    return KILN_OK;
}

/* Fills the model/conditioning half of a recipe. */
static int recipe_guidance(kiln_exec *ex, kiln_latent *r, const kiln_value *model, const kiln_value *pos,
                           const kiln_value *neg, double cfg) {
    r->model_path = kiln_strdup(model->str);
    r->clip_path = dup_or_null(pos->str2 ? pos->str2 : neg->str2);
    if (pos->zero)
        return KILN_FAIL(ex->err, KILN_E_UNSUPPORTED, "a zeroed positive conditioning is not supported");
    r->prompt = kiln_strdup(pos->str ? pos->str : "");
    r->negative = neg->zero ? NULL : kiln_strdup(neg->str ? neg->str : "");
    r->cfg = cfg;
    if (!r->model_path || !r->prompt || (!neg->zero && !r->negative)) return nomem(ex);
    if (!r->clip_path) return KILN_FAIL(ex->err, KILN_E_INVALID, "the conditioning names no text encoder");
    return KILN_OK;
}

int kiln_node_cfg_guider(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    out->kind = KILN_V_GUIDER;
    return recipe_guidance(ex, &out->latent, in[0], in[1], in[2], in[3]->f);
}

static int recipe_latent(kiln_exec *ex, const char *id, kiln_latent *r, const kiln_value *latent) {
    if (latent->latent.sampled)
        return KILN_FAIL(ex->err, KILN_E_UNSUPPORTED,
                         "node %s: sampling an already sampled latent (img2img) is not supported yet", id);
    r->width = latent->latent.width;
    r->height = latent->latent.height;
    r->batch = latent->latent.batch;
    r->sampled = true;
    snprintf(r->sampler_node, sizeof r->sampler_node, "%s", id);
    return KILN_OK;
}

int kiln_node_sampler_custom_advanced(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    /* in: noise, guider, sampler, sigmas, latent_image */
    const kiln_latent *g = &in[1]->latent;
    for (int k = 0; k < 2; k++) {
        kiln_value *o = &out[k];
        o->kind = KILN_V_LATENT;
        kiln_latent *r = &o->latent;
        r->model_path = kiln_strdup(g->model_path);
        r->clip_path = kiln_strdup(g->clip_path);
        r->prompt = kiln_strdup(g->prompt);
        r->negative = dup_or_null(g->negative);
        r->cfg = g->cfg;
        r->seed = (uint64_t)in[0]->i;
        r->sampler = kiln_strdup(in[2]->str);
        r->steps = (int)in[3]->i;
        if (!r->model_path || !r->clip_path || !r->prompt || !r->sampler || (g->negative && !r->negative))
            return nomem(ex);
        KILN_TRY(recipe_latent(ex, id, r, in[4]));
    }
    return KILN_OK;
}

int kiln_node_ksampler(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    /* in: model, seed, steps, cfg, sampler_name, scheduler, positive, negative, latent_image, denoise */
    if (in[9]->f != 1.0)
        return KILN_FAIL(ex->err, KILN_E_UNSUPPORTED, "node %s: denoise %g: only 1.0 (text to image) is supported",
                         id, in[9]->f);
    out->kind = KILN_V_LATENT;
    kiln_latent *r = &out->latent;
    KILN_TRY(recipe_guidance(ex, r, in[0], in[6], in[7], in[3]->f));
    r->seed = (uint64_t)in[1]->i;
    r->steps = (int)in[2]->i;
    if (!(r->sampler = kiln_strdup(in[4]->str))) return nomem(ex);
    return recipe_latent(ex, id, r, in[8]);
}

typedef struct progress_ctx {
    kiln_exec *ex;
    const char *node;
} progress_ctx;

static bool on_step(void *ctx, int step, int n_steps) {
    progress_ctx *pc = ctx;
    const kiln_exec_hooks *h = pc->ex->hooks;
    if (h && h->progress) h->progress(h->ctx, pc->node, step, n_steps);
    return !(h && h->should_stop && h->should_stop(h->ctx));
}

static void on_latent(void *ctx, const float *latent, int h16, int w16) {
    progress_ctx *pc = ctx;
    const kiln_exec_hooks *h = pc->ex->hooks;
    h->latent_preview(h->ctx, pc->node, latent, h16, w16);
}

int kiln_node_vae_decode(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    const kiln_latent *r = &in[0]->latent;
    if (!r->sampled)
        return KILN_FAIL(ex->err, KILN_E_UNSUPPORTED,
                         "node %s: VAEDecode of an empty latent: kiln decodes only a sampler's output", id);
    if (!ex->env->engine || !ex->env->engine->generate)
        return KILN_FAIL(ex->err, KILN_E_UNSUPPORTED, "no image engine is configured in this server");
    kiln_gen_params p = {
        .unet_path = r->model_path, .clip_path = r->clip_path, .vae_path = in[1]->str, .prompt = r->prompt,
        .negative_prompt = r->negative, .width = r->width, .height = r->height, .steps = r->steps,
        .batch = r->batch, .seed = r->seed, .cfg = (float)r->cfg, .sampler = r->sampler,
        .request_id = ex->env->prompt_id,
        .latent = ex->hooks && ex->hooks->latent_preview ? on_latent : NULL,
    };
    progress_ctx pc = {ex, r->sampler_node};
    kiln_gen_images imgs = {0};
    kiln_status s = ex->env->engine->generate(ex->env->engine->self, &p, on_step, &pc, &imgs, ex->err);
    if (s != KILN_OK) {
        kiln_free(imgs.pixels);
        return s;
    }
    if (!imgs.pixels || imgs.n <= 0 || imgs.width <= 0 || imgs.height <= 0) {
        kiln_free(imgs.pixels);
        return KILN_FAIL(ex->err, KILN_E_INTERNAL, "the engine returned no images");
    }
    const kiln_exec_hooks *h = ex->hooks;
    if (imgs.warnings[0] && h && h->warning) h->warning(h->ctx, id, imgs.warnings);
    if (ex->env->engine_ms) *ex->env->engine_ms += imgs.engine_ms;
    if (ex->env->peak_memory_bytes && imgs.peak_memory_bytes > *ex->env->peak_memory_bytes)
        *ex->env->peak_memory_bytes = imgs.peak_memory_bytes;
    out->kind = KILN_V_IMAGE;
    out->n_images = imgs.n;
    out->width = imgs.width;
    out->height = imgs.height;
    out->pixels = imgs.pixels;
    return KILN_OK;
}

int kiln_node_pixelize(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    const kiln_value *img = in[0];
    size_t one = (size_t)img->width * (size_t)img->height * 3, all;
    if (!kiln_mul_size(one, (size_t)img->n_images, &all)) return nomem(ex);
    out->kind = KILN_V_IMAGE;
    out->n_images = img->n_images;
    out->width = img->width;
    out->height = img->height;
    if (!(out->pixels = kiln_malloc(all))) return nomem(ex);
    memcpy(out->pixels, img->pixels, all);
    for (int i = 0; i < img->n_images; i++)
        KILN_TRY(kiln_pixelize(out->pixels + one * (size_t)i, img->width, img->height, 3, (int)in[1]->i, ex->err));
    return KILN_OK;
}

/* ---- SaveImage ---------------------------------------------------------------------------------------------- */

/* Splits "sub/dir/name" into subfolder and file prefix; refuses anything that could leave the output folder. */
static kiln_status split_prefix(kiln_exec *ex, const char *prefix, char *sub, size_t subcap, char *name,
                                size_t namecap) {
    if (!*prefix) prefix = "ComfyUI";
    if (prefix[0] == '/' || strchr(prefix, '\\') || strlen(prefix) > 200)
        return KILN_FAIL(ex->err, KILN_E_INVALID, "filename_prefix must be a relative name of at most 200 bytes");
    for (const char *p = prefix; *p; p++)
        if ((unsigned char)*p < 0x20) return KILN_FAIL(ex->err, KILN_E_INVALID, "filename_prefix has a control character");
    /* every path component must be a plain name */
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s", prefix);
    for (char *save = NULL, *c = strtok_r(tmp, "/", &save); c; c = strtok_r(NULL, "/", &save))
        if (!strcmp(c, "..") || !strcmp(c, "."))
            return KILN_FAIL(ex->err, KILN_E_INVALID, "filename_prefix must not contain . or .. components");
    const char *slash = strrchr(prefix, '/');
    if (slash) {
        snprintf(sub, subcap, "%.*s", (int)(slash - prefix), prefix);
        snprintf(name, namecap, "%s", slash + 1);
    } else {
        sub[0] = 0;
        snprintf(name, namecap, "%s", prefix);
    }
    if (!name[0]) snprintf(name, namecap, "ComfyUI");
    return KILN_OK;
}

static kiln_status mkdirs(kiln_exec *ex, const char *path) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return KILN_FAIL(ex->err, KILN_E_IO, "mkdir %s: %s", tmp, strerror(errno));
        *p = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return KILN_FAIL(ex->err, KILN_E_IO, "mkdir %s: %s", tmp, strerror(errno));
    return KILN_OK;
}

/* The next counter for name in dir: one more than the largest {name}_{NNNNN}_.png present (ComfyUI's rule). */
static int next_counter(const char *dir, const char *name) {
    int best = 0;
    DIR *d = opendir(dir);
    if (!d) return 1;
    size_t nl = strlen(name);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, name, nl) != 0 || e->d_name[nl] != '_') continue;
        char *end;
        long c = strtol(e->d_name + nl + 1, &end, 10);
        if (end != e->d_name + nl + 1 && !strcmp(end, "_.png") && c > best && c < 10000000) best = (int)c;
    }
    closedir(d);
    return best + 1;
}

/* Writes img as PNGs {prefix}_{counter:05}_.png under base (SaveImage: output/, PreviewImage: temp/) and
 * reports them as the node's ui {"images": [{filename, subfolder, type}]}. */
static int save_pngs(kiln_exec *ex, const char *id, const kiln_value *img, const char *base, const char *prefix,
                     const char *type) {
    char sub[256], name[256], dir[4096];
    KILN_TRY(split_prefix(ex, prefix, sub, sizeof sub, name, sizeof name));
    snprintf(dir, sizeof dir, "%s%s%s", base, sub[0] ? "/" : "", sub);
    KILN_TRY(mkdirs(ex, dir));

    char *prompt_txt = json_dumps(ex->g->root, JSON_COMPACT | JSON_SORT_KEYS);
    kiln_png_text texts[4] = {{"prompt", prompt_txt}};
    int nt = 1;
    char *extra_txt[3] = {0};
    const char *key;
    json_t *val;
    if (json_is_object(ex->env->extra_pnginfo)) {
        json_object_foreach(ex->env->extra_pnginfo, key, val) {
            if (nt >= 4) break;
            extra_txt[nt - 1] = json_dumps(val, JSON_COMPACT | JSON_ENCODE_ANY);
            texts[nt].key = key;
            texts[nt].value = extra_txt[nt - 1];
            nt++;
        }
    }
    json_t *images = json_array();
    kiln_status s = KILN_OK;
    size_t one = (size_t)img->width * (size_t)img->height * 3;
    int counter = next_counter(dir, name);
    for (int i = 0; i < img->n_images && s == KILN_OK; i++) {
        uint8_t *png = NULL;
        size_t len = 0;
        s = kiln_png_encode(img->pixels + one * (size_t)i, img->width, img->height, texts, (size_t)nt, &png, &len,
                            ex->err);
        if (s != KILN_OK) break;
        int fd = -1;
        char file[300], path[4400];
        for (int tries = 0; tries < 1000 && fd < 0; tries++, counter++) {
            snprintf(file, sizeof file, "%s_%05d_.png", name, counter);
            snprintf(path, sizeof path, "%s/%s", dir, file);
            fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
            if (fd < 0 && errno != EEXIST) break;
        }
        if (fd < 0) {
            s = KILN_FAIL(ex->err, KILN_E_IO, "cannot create %s: %s", path, strerror(errno));
        } else {
            size_t off = 0;
            while (off < len) {
                ssize_t w = write(fd, png + off, len - off);
                if (w < 0 && errno == EINTR) continue;
                if (w <= 0) break;
                off += (size_t)w;
            }
            if (off != len || close(fd) != 0) {
                s = KILN_FAIL(ex->err, KILN_E_IO, "writing %s: %s", path, strerror(errno));
                unlink(path);
            } else {
                json_array_append_new(images, json_pack("{s:s, s:s, s:s}", "filename", file, "subfolder", sub,
                                                        "type", type));
            }
        }
        kiln_free(png);
    }
    free(prompt_txt);
    for (int k = 0; k < 3; k++) free(extra_txt[k]);
    json_t *ui = json_pack("{s:o}", "images", images);
    json_object_set(ex->outputs, id, ui);
    if (ex->hooks && ex->hooks->executed && s == KILN_OK) ex->hooks->executed(ex->hooks->ctx, id, ui);
    json_decref(ui);
    return s;
}

int kiln_node_save_image(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    (void)out;
    if (!ex->env->output_dir) return KILN_FAIL(ex->err, KILN_E_INVALID, "no output folder configured");
    return save_pngs(ex, id, in[0], ex->env->output_dir, in[1]->str ? in[1]->str : "", "output");
}

/* ---- PreviewImage, SaveImageWebsocket, Primitive* ------------------------------------------------------- */

int kiln_node_preview_image(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    (void)out;
    if (!ex->env->temp_dir) return KILN_FAIL(ex->err, KILN_E_INVALID, "no temp folder configured");
    /* ComfyUI's name: ComfyUI_temp_ and five random letters, so previews of different prompts never collide */
    char prefix[32] = "ComfyUI_temp_";
    uint64_t t = (uint64_t)kiln_clock_ns() ^ ((uint64_t)(uintptr_t)ex << 7);
    for (int i = 0; i < 5; i++, t /= 26) prefix[13 + i] = (char)('a' + (int)(t % 26));
    prefix[18] = 0;
    mkdirs(ex, ex->env->temp_dir);
    return save_pngs(ex, id, in[0], ex->env->temp_dir, prefix, "temp");
}

int kiln_node_save_image_websocket(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    (void)out;
    const kiln_value *img = in[0];
    size_t one = (size_t)img->width * (size_t)img->height * 3;
    for (int i = 0; i < img->n_images; i++) {
        uint8_t *png = NULL;
        size_t len = 0;
        KILN_TRY(kiln_png_encode(img->pixels + one * (size_t)i, img->width, img->height, NULL, 0, &png, &len, ex->err));
        if (ex->hooks && ex->hooks->image_frame) ex->hooks->image_frame(ex->hooks->ctx, id, png, len);
        kiln_free(png);
    }
    return KILN_OK;
}

int kiln_node_primitive(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    (void)id;
    *out = *in[0]; /* the literal's value, taken over */
    if (in[0]->str && !(out->str = kiln_strdup(in[0]->str))) return nomem(ex);
    out->str2 = out->str3 = NULL;
    return KILN_OK;
}

/* engine.c - opening a FLUX.2 [klein] engine (FLUX.1 files: engine_flux1.c): find the files of a diffusers folder or three single files,
 * memory-map them, load the three models (shapes checked), the tokenizer and the compute backend (kiln.h). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "base/log.h"
#include "compute/comm_nccl.h"
#include "models/config.h"
#include "pipeline/engine_flux1.h"
#include "pipeline/engine_internal.h"

kiln_engine_config kiln_engine_config_default(void) {
    kiln_engine_config c;
    memset(&c, 0, sizeof c);
    c.variant = KILN_VARIANT_AUTO;
    c.device = KILN_DEVICE_CPU;
    return c;
}

kiln_request kiln_request_default(void) {
    kiln_request r;
    memset(&r, 0, sizeof r);
    r.prompt = "";
    r.width = 512;
    r.height = 512;
    r.batch = 1;
    return r;
}

const char *kiln_stage_name(kiln_stage s) {
    static const char *names[KILN_STAGE_COUNT] = {"InputValidation",     "TextEncoding", "LatentPreparation",
                                                   "TimestepPreparation", "Denoising",    "Decoding",
                                                   "Output"};
    return (unsigned)s < KILN_STAGE_COUNT ? names[s] : "?";
}

bool kiln_engine_is_dir(const char *p) {
    struct stat st;
    return p && stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

bool kiln_engine_exists(const char *p) {
    struct stat st;
    return p && stat(p, &st) == 0;
}

static char *dup_or_null(const char *s) { return s ? kiln_strdup(s) : NULL; }

size_t kiln_engine_weight_bytes(const kiln_st_file *ck, int skip_from) {
    size_t total = 0;
    for (size_t i = 0; i < kiln_st_count(ck); i++) {
        const kiln_st_tensor *t = kiln_st_at(ck, i);
        const char *p = strstr(t->name, "model.layers.");
        if (skip_from > 0 && p && atoi(p + 13) >= skip_from) continue;
        if (strstr(t->name, "lm_head")) continue;
        total += t->nbytes;
    }
    return total;
}

/* model_index.json: the pipeline class, the scheduler class and is_distilled (absent: false, i.e. klein base,
 * as Flux2KleinPipeline's __init__ defaults it). Flux2KleinKVPipeline (klein 9B-KV) takes is_distilled but never
 * reads it: it has no guidance and no negative prompt, so it runs as the distilled klein (4 steps, no CFG), with
 * its reference cache (models/dit_kv.h); its schedule helper compute_empirical_mu is klein's formula. */
static kiln_status read_model_index(kiln_engine *e, kiln_err *err) {
    char mi[4200];
    snprintf(mi, sizeof mi, "%s/model_index.json", e->model_dir);
    json_t *c;
    KILN_TRY(kiln_config_open(mi, &c, err));
    kiln_status s = KILN_OK;
    const char *cls = kiln_cfg_str(c, "_class_name");
    e->kv = cls && !strcmp(cls, "Flux2KleinKVPipeline");
    if (cls && strcmp(cls, "Flux2KleinPipeline") && !e->kv)
        s = KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: _class_name \"%s\" is not supported (kiln runs "
                      "Flux2KleinPipeline and Flux2KleinKVPipeline)", mi, cls);
    const json_t *sch = kiln_cfg_get(c, "scheduler");
    const char *scls = json_is_array(sch) ? json_string_value(json_array_get(sch, 1)) : NULL;
    if (s == KILN_OK && scls && strcmp(scls, "FlowMatchEulerDiscreteScheduler"))
        s = KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: scheduler \"%s\" is not supported (kiln implements "
                      "FlowMatchEulerDiscreteScheduler)", mi, scls);
    bool distilled = false;
    if (s == KILN_OK) s = kiln_cfg_boolean(c, mi, "is_distilled", &distilled, err);
    if (s == KILN_OK && e->kv && e->variant == KILN_VARIANT_BASE)
        s = KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: the klein base variant (CFG) with Flux2KleinKVPipeline, which has "
                      "no classifier-free guidance", mi);
    if (s == KILN_OK && e->kv) e->variant = KILN_VARIANT_DISTILLED;
    if (s == KILN_OK && e->variant == KILN_VARIANT_AUTO) {
        e->variant = distilled ? KILN_VARIANT_DISTILLED : KILN_VARIANT_BASE;
        if (!kiln_cfg_get(c, "is_distilled"))
            log_info("%s has no is_distilled: klein base (CFG), as the official pipeline defaults it", mi);
    }
    json_decref(c);
    return s;
}

static kiln_status find_files(kiln_engine *e, kiln_err *err) {
    if (e->model_dir) {
        if (!kiln_engine_is_dir(e->model_dir))
            return KILN_FAIL(err, KILN_E_NOT_FOUND, "--model %s: not a folder (a diffusers FLUX.2 [klein] folder "
                             "with model_index.json, transformer/, text_encoder/, vae/)", e->model_dir);
        const char *sub[3] = {"transformer", "text_encoder", "vae"};
        char *dst[3] = {e->dit_path, e->te_path, e->vae_file};
        for (int i = 0; i < 3; i++) {
            snprintf(dst[i], 4096, "%s/%s", e->model_dir, sub[i]);
            if (!kiln_engine_is_dir(dst[i]))
                return KILN_FAIL(err, KILN_E_NOT_FOUND, "%s/%s: missing (a diffusers FLUX.2 [klein] folder has "
                                 "transformer/, text_encoder/ and vae/)", e->model_dir, sub[i]);
        }
        snprintf(e->dit_config, sizeof e->dit_config, "%s/transformer/config.json", e->model_dir);
        snprintf(e->te_config, sizeof e->te_config, "%s/text_encoder/config.json", e->model_dir);
        snprintf(e->vae_config, sizeof e->vae_config, "%s/vae/config.json", e->model_dir);
        snprintf(e->sched_config, sizeof e->sched_config, "%s/scheduler/scheduler_config.json", e->model_dir);
        KILN_TRY(read_model_index(e, err));
        return KILN_OK;
    }
    if (!e->unet_path || !e->clip_path || !e->vae_path)
        return KILN_FAIL(err, KILN_E_INVALID, "give either a diffusers folder (--model DIR) or all three single "
                         "files (--unet, --clip, --vae)");
    const char *src[3] = {e->unet_path, e->clip_path, e->vae_path};
    const char *what[3] = {"--unet", "--clip", "--vae"};
    char *dst[3] = {e->dit_path, e->te_path, e->vae_file};
    for (int i = 0; i < 3; i++) {
        if (!kiln_engine_exists(src[i])) return KILN_FAIL(err, KILN_E_NOT_FOUND, "%s %s: no such file", what[i], src[i]);
        snprintf(dst[i], 4096, "%s", src[i]);
    }
    e->dit_config[0] = e->te_config[0] = e->vae_config[0] = e->sched_config[0] = 0;
    /* single files carry no model_index.json: the distilled klein unless the caller says base */
    if (e->variant == KILN_VARIANT_AUTO) e->variant = KILN_VARIANT_DISTILLED;
    return KILN_OK;
}

kiln_status kiln_engine_open_text_encoder(kiln_engine *e, kiln_err *err) {
    if (e->te) return KILN_OK;
    kiln_status s = kiln_st_open(e->te_path, &e->te_ck, err);
    if (s != KILN_OK) return kiln_err_prefix(err, "text encoder");
    s = kiln_qwen3_load(e->te_ck, e->te_config[0] ? e->te_config : NULL, &e->te, err);
    /* Reopened after a release (generate.c): placed again, at once (open_all places the first one). */
    if (s == KILN_OK && e->be) s = kiln_wset_place(&e->te->ws, e->be, err);
    if (s != KILN_OK) {
        kiln_qwen3_free(e->te);
        e->te = NULL;
        kiln_st_close(e->te_ck);
        e->te_ck = NULL;
        return kiln_err_prefix(err, "%s", e->te_path);
    }
    return KILN_OK;
}

void kiln_engine_close_text_encoder(kiln_engine *e) {
    kiln_qwen3_free(e->te);
    e->te = NULL;
    kiln_st_close(e->te_ck);
    e->te_ck = NULL;
}

static kiln_status open_all(kiln_engine *e, kiln_err *err) {
    bool flux1 = false;
    KILN_TRY(kiln_engine_is_flux1(&e->cfg, &flux1, err));
    if (flux1 && e->cfg.tp > 1)
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "--tp %d: tensor parallelism is implemented for FLUX.2 only",
                         e->cfg.tp);
    if (flux1) return kiln_engine_open_flux1(e, err); /* engine_flux1.c */
    KILN_TRY(find_files(e, err));
    if (kiln_sched_config_read(e->sched_config, &e->sched, err) != KILN_OK) return kiln_err_prefix(err, "%s", e->model_dir);
    if (kiln_st_open(e->dit_path, &e->dit_ck, err) != KILN_OK) return kiln_err_prefix(err, "DiT");
    if (kiln_flux2_dit_load(e->dit_ck, e->dit_config[0] ? e->dit_config : NULL, &e->dit, err) != KILN_OK)
        return kiln_err_prefix(err, "%s", e->dit_path);
    if (kiln_st_open(e->vae_file, &e->vae_ck, err) != KILN_OK) return kiln_err_prefix(err, "VAE");
    if (kiln_flux2_vae_load_config(e->vae_ck, e->vae_config[0] ? e->vae_config : NULL, &e->vae, err) != KILN_OK)
        return kiln_err_prefix(err, "%s", e->vae_file);
    KILN_TRY(kiln_engine_open_text_encoder(e, err));

    /* The three must fit together (spec 1.1: context = 3 x Qwen hidden; 128 tokens channels = 4 x VAE z). */
    if (e->dit->ctx_dim != KILN_QWEN3_N_OUT * e->te->hidden)
        return KILN_FAIL(err, KILN_E_FORMAT, "mismatched models: the DiT expects %d-wide text features, the text "
                         "encoder gives 3 x %d = %d", e->dit->ctx_dim, e->te->hidden, 3 * e->te->hidden);
    if (e->dit->in_ch != 4 * e->vae->z_ch || e->dit->out_ch != e->dit->in_ch)
        return KILN_FAIL(err, KILN_E_FORMAT, "mismatched models: the DiT works on %d-channel tokens (out %d), the "
                         "VAE latent has %d channels (needs 4 x %d)", e->dit->in_ch, e->dit->out_ch, e->vae->z_ch,
                         e->vae->z_ch);
    if (e->dit->in_ch != 128) /* the latent is 32 VAE channels x 2x2 patches; noise and ids assume it */
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "DiT: %d input channels (in_channels; FLUX.2 [klein] has 128)",
                         e->dit->in_ch);
    e->te_bytes = kiln_engine_weight_bytes(e->te_ck, e->te->n_layers);
    int scale = kiln_flux2_vae_scale(e->vae);
    if (scale != 8)
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "VAE: upscales by %d (%d decoder levels: block_out_channels; "
                         "FLUX.2's VAE upscales by 8, which with the 2x2 patches makes one token 16x16 pixels)", scale,
                         e->vae->n_levels);
    e->dit_bytes = kiln_engine_weight_bytes(e->dit_ck, 0);
    e->vae_bytes = kiln_engine_weight_bytes(e->vae_ck, 0);

    const char *tdir = e->tokenizer_dir ? e->tokenizer_dir : e->model_dir;
    kiln_status s;
    if (e->tokenizer_dir) {
        char p[4200];
        snprintf(p, sizeof p, "%s/tokenizer.json", e->tokenizer_dir);
        s = kiln_tokenizer_load(kiln_engine_exists(p) ? p : e->tokenizer_dir, &e->tok, err);
    } else {
        s = kiln_tokenizer_load_default(tdir, &e->tok, err);
    }
    if (s != KILN_OK) return kiln_err_prefix(err, "tokenizer");

    KILN_TRY(kiln_comm_open(&e->comm, err));
    /* several ranks on one host: rank k takes GPU device_index + (its local rank) */
    int dev = e->cfg.device_index, ngpu = e->cfg.device == KILN_DEVICE_CUDA ? kiln_nccl_gpu_count() : -1;
    if (e->comm->size > 1 && e->cfg.device == KILN_DEVICE_CUDA)
        KILN_TRY(kiln_nccl_local_device(e->cfg.device_index, getenv("OMPI_COMM_WORLD_LOCAL_RANK"),
                                        ngpu < 0 ? INT_MAX : ngpu, &dev, err));
    if (e->cfg.device == KILN_DEVICE_CUDA) KILN_TRY(kiln_backend_open_cuda(dev, &e->be, err));
    else KILN_TRY(kiln_backend_open_cpu(e->cfg.n_threads, &e->be, err));
    if (e->comm->size > 1 && e->cfg.device == KILN_DEVICE_CUDA) { /* GPUs talk over NCCL when kiln has it */
        kiln_comm *nc;
        kiln_err why = {0};
        kiln_status ns = kiln_comm_open_nccl(e->comm, e->be, &nc, &why);
        if (ns == KILN_E_UNSUPPORTED) log_info("%s; the MPI communicator stages device buffers through the host", why.msg);
        else if (ns != KILN_OK) {
            e->comm = NULL; /* closed by the failed open */
            *err = why;
            return ns;
        } else e->comm = nc;
    }
    e->be->precision = e->cfg.exact ? KILN_PREC_EXACT : KILN_PREC_FAST;
    e->te_ws_seq = kiln_qwen3_workspace(e->te, 1, KILN_TOK_DEFAULT_MAX_LEN,
                                        e->cfg.tp > 1 ? KILN_DT_F32 : kiln_backend_act_dtype(e->be));
    if (e->cfg.tp > 1 && e->kv)
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "--tp %d with Flux2KleinKVPipeline: its reference cache is not "
                         "implemented with tensor parallelism", e->cfg.tp);
    if (e->cfg.tp > 1) { /* after NCCL: the groups are split from the communicator the GPUs use */
        KILN_TRY(kiln_comm_grid(e->comm, e->cfg.tp, &e->grid_sp, &e->grid_tp, err));
        KILN_TRY(kiln_flux2_dit_tp_check(e->dit, e->cfg.tp, err));
        KILN_TRY(kiln_qwen3_tp_check(e->te, e->cfg.tp, err));
    }
    /* Placement (compute/ops.h): the weights become the backend's now, once; ops never see the mapping. */
    KILN_TRY(kiln_wset_place(&e->dit->ws, e->be, err));
    KILN_TRY(kiln_wset_place(&e->vae->ws, e->be, err));
    KILN_TRY(kiln_wset_place(&e->te->ws, e->be, err));

    snprintf(e->describe, sizeof e->describe,
             "FLUX.2 [klein] %s%s; DiT %s %dx(%d double + %d single), %d heads; Qwen3 %d hidden x %d layers used; "
             "VAE %d latent channels, %d levels; %s backend%s",
             e->variant == KILN_VARIANT_BASE ? "base" : "distilled", e->kv ? " KV (Flux2KleinKVPipeline)" : "",
             e->dit->layout == KILN_LAYOUT_BFL ? "BFL" : "diffusers", e->dit->hidden, e->dit->n_double,
             e->dit->n_single, e->dit->heads, e->te->hidden, e->te->n_layers, e->vae->z_ch, e->vae->n_levels,
             e->be->ops->name, e->cfg.exact ? " (exact f32)" : "");
    return KILN_OK;
}

kiln_status kiln_engine_open(const kiln_engine_config *cfg, kiln_engine **out, kiln_err *err) {
    *out = NULL;
    if (!cfg) return KILN_FAIL(err, KILN_E_INVALID, "kiln_engine_open: no config");
    kiln_engine *e = kiln_calloc(1, sizeof *e);
    if (!e) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
    pthread_mutex_init(&e->lock, NULL);
    e->cfg = *cfg;
    e->model_dir = dup_or_null(cfg->model_dir);
    e->unet_path = dup_or_null(cfg->unet_path);
    e->clip_path = dup_or_null(cfg->clip_path);
    e->vae_path = dup_or_null(cfg->vae_path);
    e->tokenizer_dir = dup_or_null(cfg->tokenizer_dir);
    e->clip2_path = dup_or_null(cfg->clip2_path);
    e->cfg.clip2_path = e->clip2_path;
    const char *commit = cfg->commit ? cfg->commit : getenv("KILN_COMMIT");
    e->commit = kiln_strdup(commit ? commit : "unknown");
    e->variant = cfg->variant;
    e->cfg.model_dir = e->model_dir;
    e->cfg.unet_path = e->unet_path;
    e->cfg.clip_path = e->clip_path;
    e->cfg.vae_path = e->vae_path;
    e->cfg.tokenizer_dir = e->tokenizer_dir;
    e->cfg.commit = e->commit;
    kiln_status s = e->commit ? open_all(e, err) : KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
    if (s != KILN_OK) {
        kiln_engine_close(e);
        return s;
    }
    log_info("engine: %s", e->describe);
    *out = e;
    return KILN_OK;
}

void kiln_engine_close(kiln_engine *e) {
    if (!e) return;
    kiln_engine_close_flux1(e);
    kiln_engine_close_text_encoder(e);
    kiln_flux2_dit_free(e->dit);
    kiln_flux2_vae_free(e->vae);
    kiln_st_close(e->dit_ck);
    kiln_st_close(e->vae_ck);
    kiln_tokenizer_free(e->tok);
    if (e->be) kiln_backend_close(e->be);
    kiln_comm_close(e->grid_sp);
    kiln_comm_close(e->grid_tp);
    kiln_comm_close(e->comm);
    kiln_free(e->model_dir);
    kiln_free(e->unet_path);
    kiln_free(e->clip_path);
    kiln_free(e->vae_path);
    kiln_free(e->tokenizer_dir);
    kiln_free(e->clip2_path);
    kiln_free(e->commit);
    pthread_mutex_destroy(&e->lock);
    kiln_free(e);
}

const char *kiln_engine_describe(const kiln_engine *e) { return e->describe; }
kiln_variant kiln_engine_variant(const kiln_engine *e) { return e->variant; }
int kiln_engine_rank(const kiln_engine *e) { return e->comm ? e->comm->rank : 0; }
int kiln_engine_latent_channels(const kiln_engine *e) { return e->f1 ? e->f1->dit->in_ch : 128; }

/* engine_flux1.c - opening a FLUX.1 [dev] / [schnell] engine (engine_flux1.h): find the files of a diffusers
 * folder or four single files, memory-map them, load CLIP-L, T5, the DiT and the VAE (shapes checked against each
 * other), the two tokenizers, the scheduler config and the backend. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/alloc.h"
#include "base/log.h"
#include "compute/comm_nccl.h"
#include "models/config.h"
#include "models/flux1_vae.h"
#include "pipeline/engine_flux1.h"
#include "pipeline/engine_internal.h"

kiln_status kiln_engine_is_flux1(const kiln_engine_config *cfg, bool *yes, kiln_err *err) {
    *yes = false;
    if (cfg->model_dir) {
        char mi[4200];
        snprintf(mi, sizeof mi, "%s/model_index.json", cfg->model_dir);
        json_t *c;
        KILN_TRY(kiln_config_open(mi, &c, err));
        const char *cls = c ? kiln_cfg_str(c, "_class_name") : NULL;
        *yes = cls && !strcmp(cls, "FluxPipeline");
        json_decref(c);
        return KILN_OK;
    }
    if (cfg->clip2_path) {
        *yes = true; /* a second text encoder is FLUX.1's T5 */
        return KILN_OK;
    }
    if (!cfg->unet_path || !kiln_engine_exists(cfg->unet_path)) return KILN_OK; /* the FLUX.2 path reports what is missing */
    kiln_st_file *ck = NULL;
    kiln_err e2 = {0};
    if (kiln_st_open_part(cfg->unet_path, KILN_CKPT_DIT, &ck, &e2) != KILN_OK) return KILN_OK; /* ditto */
    /* io/detect.c's FLUX.1 DiT rule (BFL names; diffusers names with FLUX.1's per-block norm1) */
    *yes = kiln_st_find(ck, "double_blocks.0.img_mod.lin.weight") ||
           (kiln_st_find(ck, "transformer_blocks.0.norm1.linear.weight") && kiln_st_find(ck, "x_embedder.weight"));
    kiln_st_close(ck);
    return KILN_OK;
}

/* model_index.json of a FluxPipeline folder: the scheduler class and the component classes kiln implements. */
static kiln_status check_model_index(const char *dir, kiln_err *err) {
    char mi[4200];
    snprintf(mi, sizeof mi, "%s/model_index.json", dir);
    json_t *c;
    KILN_TRY(kiln_config_open(mi, &c, err));
    static const char *const want[][2] = {{"scheduler", "FlowMatchEulerDiscreteScheduler"},
                                          {"transformer", "FluxTransformer2DModel"},
                                          {"vae", "AutoencoderKL"},
                                          {"text_encoder", "CLIPTextModel"},
                                          {"text_encoder_2", "T5EncoderModel"}};
    kiln_status s = KILN_OK;
    for (size_t i = 0; i < sizeof want / sizeof want[0] && s == KILN_OK; i++) {
        const json_t *a = kiln_cfg_get(c, want[i][0]);
        const char *cls = json_is_array(a) ? json_string_value(json_array_get(a, 1)) : NULL;
        if (cls && strcmp(cls, want[i][1]))
            s = KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: %s \"%s\" is not supported (kiln implements %s)", mi,
                          want[i][0], cls, want[i][1]);
    }
    json_decref(c);
    return s;
}

static kiln_status find_files(kiln_engine *e, kiln_flux1_models *f, kiln_err *err) {
    if (e->model_dir) {
        const char *sub[4] = {"transformer", "text_encoder", "text_encoder_2", "vae"};
        char *dst[4] = {f->dit_path, f->clip_path, f->t5_path, f->vae_path};
        char *cfg[4] = {f->dit_config, f->clip_config, f->t5_config, f->vae_config};
        for (int i = 0; i < 4; i++) {
            snprintf(dst[i], 4096, "%s/%s", e->model_dir, sub[i]);
            if (!kiln_engine_is_dir(dst[i]))
                return KILN_FAIL(err, KILN_E_NOT_FOUND, "%s/%s: missing (a diffusers FLUX.1 folder has transformer/, "
                                 "text_encoder/, text_encoder_2/ and vae/)", e->model_dir, sub[i]);
            snprintf(cfg[i], 4096, "%s/%s/config.json", e->model_dir, sub[i]);
        }
        snprintf(f->sched_config, sizeof f->sched_config, "%s/scheduler/scheduler_config.json", e->model_dir);
        return check_model_index(e->model_dir, err);
    }
    if (!e->unet_path || !e->clip_path || !e->clip2_path || !e->vae_path)
        return KILN_FAIL(err, KILN_E_INVALID, "FLUX.1 single files: give all four (--unet flux1-dev.safetensors, --clip "
                         "clip_l.safetensors, --clip2 t5xxl_fp16.safetensors, --vae ae.safetensors), or --model DIR");
    const char *src[4] = {e->unet_path, e->clip_path, e->clip2_path, e->vae_path};
    const char *what[4] = {"--unet", "--clip", "--clip2", "--vae"};
    char *dst[4] = {f->dit_path, f->clip_path, f->t5_path, f->vae_path};
    for (int i = 0; i < 4; i++) {
        if (!kiln_engine_exists(src[i])) return KILN_FAIL(err, KILN_E_NOT_FOUND, "%s %s: no such file", what[i], src[i]);
        snprintf(dst[i], 4096, "%s", src[i]);
    }
    f->dit_config[0] = f->clip_config[0] = f->t5_config[0] = f->vae_config[0] = f->sched_config[0] = 0;
    return KILN_OK;
}

kiln_status kiln_flux1_open_t5(kiln_engine *e, kiln_err *err) {
    kiln_flux1_models *f = e->f1;
    if (f->t5) return KILN_OK;
    if (kiln_st_open_part(f->t5_path, KILN_CKPT_T5XXL, &f->t5_ck, err) != KILN_OK)
        return kiln_err_prefix(err, "T5 text encoder");
    kiln_status s = kiln_t5_encoder_load(f->t5_ck, f->t5_config[0] ? f->t5_config : NULL, &f->t5, err);
    if (s == KILN_OK && e->be) s = kiln_wset_place(&f->t5->ws, e->be, err); /* reopened after a release */
    if (s != KILN_OK) {
        kiln_flux1_close_t5(e);
        return kiln_err_prefix(err, "%s", f->t5_path);
    }
    return KILN_OK;
}

void kiln_flux1_close_t5(kiln_engine *e) {
    kiln_flux1_models *f = e->f1;
    if (!f) return;
    kiln_t5_encoder_free(f->t5);
    f->t5 = NULL;
    kiln_st_close(f->t5_ck);
    f->t5_ck = NULL;
}

static const char *cfg_or_null(const char *p) { return p[0] ? p : NULL; }

static kiln_status load_models(kiln_engine *e, kiln_flux1_models *f, kiln_err *err) {
    /* each file may be a ComfyUI all-in-one checkpoint (CheckpointLoaderSimple): then each model is its part */
    if (kiln_st_open_part(f->dit_path, KILN_CKPT_DIT, &f->dit_ck, err) != KILN_OK) return kiln_err_prefix(err, "DiT");
    if (kiln_flux1_dit_load(f->dit_ck, cfg_or_null(f->dit_config), &f->dit, err) != KILN_OK)
        return kiln_err_prefix(err, "%s", f->dit_path);
    f->dev = f->dit->guidance;
    if (kiln_sched_config_read_flux1(cfg_or_null(f->sched_config), f->dev, &f->sched, err) != KILN_OK)
        return kiln_err_prefix(err, "%s", e->model_dir);
    if (kiln_st_open_part(f->clip_path, KILN_CKPT_CLIP_L, &f->clip_ck, err) != KILN_OK)
        return kiln_err_prefix(err, "CLIP text encoder");
    if (kiln_clip_text_load(f->clip_ck, cfg_or_null(f->clip_config), &f->clip, err) != KILN_OK)
        return kiln_err_prefix(err, "%s", f->clip_path);
    KILN_TRY(kiln_flux1_open_t5(e, err));
    if (kiln_st_open_part(f->vae_path, KILN_CKPT_VAE, &f->vae_ck, err) != KILN_OK) return kiln_err_prefix(err, "VAE");
    if (kiln_flux1_vae_load_config(f->vae_ck, cfg_or_null(f->vae_config), &f->vae, err) != KILN_OK)
        return kiln_err_prefix(err, "%s", f->vae_path);

    /* The four must fit together: FluxPipeline's pooled CLIP vector, T5's width, 2x2-packed VAE latents. */
    if (f->dit->pooled_dim != f->clip->hidden)
        return KILN_FAIL(err, KILN_E_FORMAT, "mismatched models: the DiT expects a %d-wide pooled vector "
                         "(pooled_projection_dim), CLIP gives %d", f->dit->pooled_dim, f->clip->hidden);
    if (f->dit->ctx_dim != f->t5->d_model)
        return KILN_FAIL(err, KILN_E_FORMAT, "mismatched models: the DiT expects %d-wide text features "
                         "(joint_attention_dim), T5 gives %d", f->dit->ctx_dim, f->t5->d_model);
    if (f->dit->in_ch != 4 * f->vae->z_ch || f->dit->out_ch != f->dit->in_ch)
        return KILN_FAIL(err, KILN_E_FORMAT, "mismatched models: the DiT works on %d-channel tokens (out %d), the VAE "
                         "latent has %d channels (needs 4 x %d)", f->dit->in_ch, f->dit->out_ch, f->vae->z_ch,
                         f->vae->z_ch);
    if (f->clip->n_positions < 77)
        return KILN_FAIL(err, KILN_E_FORMAT, "CLIP: %lld positions; FluxPipeline feeds it 77 tokens",
                         (long long)f->clip->n_positions);
    int scale = kiln_flux2_vae_scale(f->vae);
    if (scale != 8)
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "VAE: upscales by %d (block_out_channels); FLUX.1's VAE upscales by "
                         "8, which with the 2x2 packing makes one token 16x16 pixels", scale);
    f->clip_bytes = kiln_engine_weight_bytes(f->clip_ck, 0);
    f->t5_bytes = kiln_engine_weight_bytes(f->t5_ck, 0);
    f->t5_d = f->t5->d_model;
    f->t5_heads = f->t5->n_heads;
    f->t5_dkv = f->t5->d_kv;
    f->t5_inner = f->t5->n_heads * f->t5->d_kv;
    f->t5_ff = f->t5->d_ff;
    f->dit_bytes = kiln_engine_weight_bytes(f->dit_ck, 0);
    f->vae_bytes = kiln_engine_weight_bytes(f->vae_ck, 0);
    return KILN_OK;
}

static kiln_status load_tokenizers(kiln_engine *e, kiln_flux1_models *f, kiln_err *err) {
    /* a --tokenizer folder is FLUX.2's option; FLUX.1 takes the folder's own tokenizer/ and tokenizer_2/, else
     * kiln's shipped copies */
    if (e->tokenizer_dir)
        log_info("--tokenizer %s ignored: FLUX.1 uses CLIP-L's and T5's (the folder's, else kiln's copies)",
                 e->tokenizer_dir);
    if (kiln_tokenizer_load_kind(KILN_TOK_CLIP, e->model_dir, &f->tok_clip, err) != KILN_OK)
        return kiln_err_prefix(err, "CLIP tokenizer");
    if (kiln_tokenizer_load_kind(KILN_TOK_T5, e->model_dir, &f->tok_t5, err) != KILN_OK)
        return kiln_err_prefix(err, "T5 tokenizer");
    return KILN_OK;
}

kiln_status kiln_engine_open_flux1(kiln_engine *e, kiln_err *err) {
    kiln_flux1_models *f = kiln_calloc(1, sizeof *f);
    if (!f) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
    e->f1 = f;
    KILN_TRY(find_files(e, f, err));
    KILN_TRY(load_models(e, f, err));
    KILN_TRY(load_tokenizers(e, f, err));
    e->variant = f->dev ? KILN_VARIANT_FLUX1_DEV : KILN_VARIANT_FLUX1_SCHNELL;
    /* under mpirun the ranks split the DiT's image tokens (sequence parallelism, generate_flux1.c); one GPU per
     * rank, the MPI communicator between them */
    KILN_TRY(kiln_comm_open(&e->comm, err));
    int dev = e->cfg.device_index;
    if (e->comm->size > 1 && e->cfg.device == KILN_DEVICE_CUDA)
        KILN_TRY(kiln_nccl_local_device(e->cfg.device_index, getenv("OMPI_COMM_WORLD_LOCAL_RANK"), INT_MAX, &dev, err));
    if (e->cfg.device == KILN_DEVICE_CUDA) KILN_TRY(kiln_backend_open_cuda(dev, &e->be, err));
    else KILN_TRY(kiln_backend_open_cpu(e->cfg.n_threads, &e->be, err));
    e->be->precision = e->cfg.exact ? KILN_PREC_EXACT : KILN_PREC_FAST;
    KILN_TRY(kiln_wset_place(&f->dit->ws, e->be, err));
    KILN_TRY(kiln_wset_place(&f->vae->ws, e->be, err));
    KILN_TRY(kiln_wset_place(&f->clip->ws, e->be, err));
    KILN_TRY(kiln_wset_place(&f->t5->ws, e->be, err));
    snprintf(e->describe, sizeof e->describe,
             "FLUX.1 [%s]; DiT %s %dx(%d double + %d single), %d heads; CLIP %d x %d layers; T5 %d x %d layers; VAE %d "
             "latent channels, %d levels; %s backend%s",
             f->dev ? "dev" : "schnell", f->dit->bfl ? "BFL" : "diffusers", f->dit->hidden, f->dit->n_double,
             f->dit->n_single, f->dit->heads, f->clip->hidden, f->clip->n_layers, f->t5->d_model, f->t5->n_layers,
             f->vae->z_ch, f->vae->n_levels, e->be->ops->name, e->cfg.exact ? " (exact f32)" : "");
    return KILN_OK;
}

void kiln_engine_close_flux1(kiln_engine *e) {
    kiln_flux1_models *f = e->f1;
    if (!f) return;
    kiln_flux1_close_t5(e);
    kiln_clip_text_free(f->clip);
    kiln_flux1_dit_free(f->dit);
    kiln_flux2_vae_free(f->vae);
    kiln_st_close(f->clip_ck);
    kiln_st_close(f->dit_ck);
    kiln_st_close(f->vae_ck);
    kiln_tokenizer_free(f->tok_clip);
    kiln_tokenizer_free(f->tok_t5);
    kiln_free(f);
    e->f1 = NULL;
}

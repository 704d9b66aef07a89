/* engine_flux1.h - the FLUX.1 [dev] / [schnell] half of a kiln_engine (not public): which files, the four models
 * (CLIP-L, T5, FLUX.1 DiT, FLUX.1 VAE), the two tokenizers and the scheduler config. engine.c opens it when the
 * files are FLUX.1's (kiln_engine_is_flux1); generate_flux1.c runs requests on it.
 *
 * Layouts: a diffusers folder (model_index.json _class_name "FluxPipeline": transformer/, text_encoder/ CLIP,
 * text_encoder_2/ T5, tokenizer/, tokenizer_2/, vae/, scheduler/) or ComfyUI single files (--unet
 * diffusion_models/flux1-dev.safetensors with BFL names, --clip text_encoders/clip_l.safetensors, --clip2
 * t5xxl_fp16.safetensors, --vae ae.safetensors; tokenizers from kiln's shipped copies). dev or schnell comes from
 * the DiT's guidance embedder (guidance_embeds), never from a file name.
 */
#ifndef KILN_PIPELINE_ENGINE_FLUX1_H
#define KILN_PIPELINE_ENGINE_FLUX1_H

#include <stdbool.h>

#include "kiln.h"
#include "io/safetensors.h"
#include "models/clip_text.h"
#include "models/flux1_dit.h"
#include "models/flux2_vae.h"
#include "models/t5_encoder.h"
#include "pipeline/schedule.h"
#include "pipeline/trace.h"
#include "text/tokenizer.h"

typedef struct kiln_flux1_models {
    bool dev;                     /* guidance embedder present */
    char clip_path[4096], clip_config[4096], t5_path[4096], t5_config[4096];
    char dit_path[4096], dit_config[4096], vae_path[4096], vae_config[4096], sched_config[4096]; /* "" = none */
    kiln_st_file *clip_ck, *t5_ck, *dit_ck, *vae_ck; /* t5_ck is closed between requests when memory is tight */
    kiln_clip_text *clip;
    kiln_t5_encoder *t5;
    kiln_flux1_dit *dit;
    kiln_flux2_vae *vae;          /* FLUX.1's AutoencoderKL (flux1_vae.h) */
    kiln_tokenizer *tok_clip, *tok_t5;
    kiln_sched_config sched;
    size_t clip_bytes, t5_bytes, dit_bytes, vae_bytes;
    int t5_d, t5_inner, t5_ff, t5_heads, t5_dkv; /* T5's sizes, kept for memory plans while T5 is released */
    bool t5_released;             /* the last request closed T5 to make room for the DiT */
} kiln_flux1_models;

/* True when the engine's files are FLUX.1's: a folder whose model_index.json names FluxPipeline, or a --unet file
 * with FLUX.1 DiT tensor names. Errors only for an unreadable model_index.json. */
kiln_status kiln_engine_is_flux1(const kiln_engine_config *cfg, bool *yes, kiln_err *err);

/* Finds, maps and loads everything (shapes checked against each other), the tokenizers and the backend; fills
 * eng->f1, eng->be, eng->variant and eng->describe. On failure the caller closes the engine. */
kiln_status kiln_engine_open_flux1(kiln_engine *eng, kiln_err *err);
void kiln_engine_close_flux1(kiln_engine *eng);

/* (Re)opens T5 after a release. */
kiln_status kiln_flux1_open_t5(kiln_engine *eng, kiln_err *err);
void kiln_flux1_close_t5(kiln_engine *eng);

/* generate_flux1.c: kiln_generate_traced and kiln_estimate_memory for a FLUX.1 engine. */
kiln_status kiln_generate_flux1(kiln_engine *eng, const kiln_request *req, kiln_trace_fn trace_fn, void *trace_ctx,
                                kiln_result **out, kiln_err *err);
kiln_status kiln_estimate_memory_flux1(kiln_engine *eng, const kiln_request *req, size_t *bytes, kiln_err *err);

#endif

/* kiln.h - the one public C API: open an engine on a FLUX.2 [klein] model, submit a text-to-image request,
 * follow its progress, get the images and the per-stage timings (the perf dump).
 *
 *     kiln_err err = {0};
 *     kiln_engine_config cfg = kiln_engine_config_default();
 *     cfg.model_dir = "FLUX.2-klein-4B";                  // a diffusers folder, or unet/clip/vae single files
 *     kiln_engine *eng;
 *     if (kiln_engine_open(&cfg, &eng, &err) != KILN_OK) { fprintf(stderr, "%s\n", err.msg); return 1; }
 *
 *     kiln_request req = kiln_request_default();           // 512x512, 4 steps (distilled) or 50 (base)
 *     req.prompt = "a red fox in the snow";
 *     req.seed = 42;
 *     kiln_result *res;
 *     if (kiln_generate(eng, &req, &res, &err) != KILN_OK) { ... err.msg ... }
 *     // res->images[i].pixels: RGB8, row-major, width*height*3 bytes
 *     char *json = kiln_result_perf_json(res, NULL);       // the perf dump (server-api.md section 3); free()
 *     kiln_result_free(res);
 *     kiln_engine_close(eng);
 *
 * Errors: every function returning kiln_status fills the caller's kiln_err (base/status.h) with a message;
 * KILN_E_INVALID for a bad request (size not a multiple of 16, zero steps...), KILN_E_NOT_FOUND
 * / KILN_E_FORMAT for missing or mismatched model files, KILN_E_LIMIT when the request cannot fit in memory
 * (refused before any work starts), KILN_E_CANCELLED when the progress callback asked to stop.
 *
 * Threads: one engine runs one request at a time (kiln_generate holds the engine's lock); several engines may
 * run side by side. The progress callback runs on the generating thread. Nothing is process-global.
 *
 * Ownership: the engine copies every string of the config it keeps; the request's strings and noise buffer
 * are read only during kiln_generate. A kiln_result and its images belong to the caller until
 * kiln_result_free.
 */
#ifndef KILN_H
#define KILN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_API_VERSION 1

/* ---- engine ---------------------------------------------------------------------------------------------- */

typedef struct kiln_engine kiln_engine;

typedef enum kiln_variant {
    KILN_VARIANT_AUTO = 0,  /* diffusers folder: model_index.json "is_distilled" (absent: base, as the official
                             * pipeline defaults it); single files: distilled */
    KILN_VARIANT_DISTILLED, /* FLUX.2 [klein]: 4 steps, no CFG */
    KILN_VARIANT_BASE,      /* FLUX.2 [klein] base: CFG (guidance 4, > 1 needed) against the negative
                             * prompt ("" by default), 50 steps */
    KILN_VARIANT_FLUX1_DEV,     /* FLUX.1 [dev]: guidance-distilled (guidance 3.5 fed to the DiT), 28 steps;
                                 * set from the files (the DiT's guidance embedder), never chosen */
    KILN_VARIANT_FLUX1_SCHNELL, /* FLUX.1 [schnell]: timestep-distilled, 4 steps, guidance ignored */
} kiln_variant;

typedef enum kiln_device_kind { KILN_DEVICE_CPU = 0, KILN_DEVICE_CUDA = 1 } kiln_device_kind;

/* What happens to the text encoder (~6 GB of the 4B's weights) once a request's prompt is encoded. */
typedef enum kiln_te_policy {
    KILN_TE_AUTO = 0, /* keep it mapped, unless the request would not fit in memory with it (servers) */
    KILN_TE_RELEASE,  /* unmap it before the DiT runs, reopen on the next request: lowest peak RSS (the CLI) */
    KILN_TE_KEEP,     /* never release (a request that only fits with release is refused) */
} kiln_te_policy;

typedef struct kiln_engine_config {
    /* Either a diffusers folder (model_index.json, transformer/, text_encoder/, vae/, tokenizer/) ... */
    const char *model_dir;
    /* ... or three single files (BFL/ComfyUI layouts: flux-2-klein-4b.safetensors, qwen_3_4b.safetensors,
     * flux2-vae.safetensors). The layout of each is detected from its tensor names. */
    const char *unet_path, *clip_path, *vae_path;
    /* FLUX.1 single files: clip_path is CLIP-L (clip_l.safetensors), clip2_path the T5 (t5xxl_fp16.safetensors);
     * unet_path the BFL-named flux1-dev / flux1-schnell file, vae_path ae.safetensors. NULL for FLUX.2. */
    const char *clip2_path;
    /* Tokenizer folder with tokenizer.json; NULL: model_dir/tokenizer, else the copy shipped with kiln. */
    const char *tokenizer_dir;
    kiln_variant variant;
    kiln_device_kind device;
    int device_index;
    int n_threads;            /* CPU threads; 0 = KILN_THREADS or all cores */
    bool exact;               /* f32 matmuls (match fp32 references) instead of bf16 (fast) */
    size_t memory_limit;      /* bytes a request may use; 0 = available physical memory. Several ranks (mpirun):
                               * every rank plans with the tightest rank's (docs/parallel.md) */
    kiln_te_policy te_policy;
    /* VAE decode in tiles (models/vae_tiled.h): 0 = automatic (tiled, 128-latent-pixel tiles or smaller, only
     * when the untiled decode would not fit memory_limit), -1 = never, N > 0 = always, N x N latent tiles
     * (a multiple of 4, >= 8). Tiles differ from the untiled image: docs/parallel.md states by how much. */
    int vae_tile;
    /* Tensor-parallel degree under mpirun (docs/parallel.md): 0 or 1 = none; t > 1 splits the DiT's and the text
     * encoder's heads and MLP units over groups of t consecutive ranks (the rank count must be a multiple of t);
     * the groups themselves split the image tokens (sequence parallelism) when they divide the heads per rank.
     * FLUX.2 only. */
    int tp;
    const char *commit;       /* recorded in perf dumps; NULL = KILN_COMMIT from the environment or "unknown" */
} kiln_engine_config;

kiln_engine_config kiln_engine_config_default(void);

/* Opens the checkpoints (memory-mapped, shapes checked) and the tokenizer. Loads nothing else eagerly. */
kiln_status kiln_engine_open(const kiln_engine_config *cfg, kiln_engine **out, kiln_err *err);
void kiln_engine_close(kiln_engine *eng); /* NULL allowed */

/* What was opened: a short description for logs and /system_stats, e.g. "klein distilled, diffusers, DiT
 * 3072x(5+20), Qwen3 2560x36, VAE 32ch". Valid until kiln_engine_close. */
const char *kiln_engine_describe(const kiln_engine *eng);
kiln_variant kiln_engine_variant(const kiln_engine *eng);
/* This process's rank when started by mpirun with several ranks (docs/parallel.md), else 0. Only rank 0 holds
 * a request's images; the others compute their share and return a result whose pixels are not the image. */
int kiln_engine_rank(const kiln_engine *eng);
/* Channels of the latent tokens the DiT works on (kiln_request.noise): 128 for FLUX.2 [klein], the DiT's
 * in_channels for FLUX.1 (64). */
int kiln_engine_latent_channels(const kiln_engine *eng);

/* ---- requests -------------------------------------------------------------------------------------------- */

typedef enum kiln_stage {
    KILN_STAGE_INPUT_VALIDATION = 0,
    KILN_STAGE_TEXT_ENCODING,
    KILN_STAGE_LATENT_PREPARATION,
    KILN_STAGE_TIMESTEP_PREPARATION,
    KILN_STAGE_DENOISING,
    KILN_STAGE_DECODING,
    KILN_STAGE_OUTPUT,
    KILN_STAGE_COUNT
} kiln_stage;

/* "InputValidation", "TextEncoding", ... (the names of the perf dump). */
const char *kiln_stage_name(kiln_stage s);

typedef struct kiln_progress {
    kiln_stage stage;
    int step, n_steps;        /* denoising: steps done so far (0..n_steps); other stages: 0 and 0 */
    double elapsed_s;         /* since kiln_generate started */
    double eta_s;             /* estimated seconds left; < 0 when unknown */
    /* After a denoising step of a request with latent_preview set: image 0's latent, [h16*w16, 128] tokens
     * (patchified 2x2, batch-normalised, as the DiT sees it), host memory valid during the call. Else NULL. */
    const float *latent;
    int latent_h16, latent_w16;
} kiln_progress;

/* Called at every stage start and after every denoising step. Return false to cancel the request
 * (kiln_generate then returns KILN_E_CANCELLED). */
typedef bool (*kiln_progress_fn)(void *ctx, const kiln_progress *p);

typedef struct kiln_result kiln_result; /* below */

/* Who decides whether classifier-free guidance runs (kiln_request.cfg_rule). */
typedef enum kiln_cfg_rule {
    KILN_CFG_OFFICIAL = 0, /* diffusers' Flux2KleinPipeline: the base variant and guidance > 1 (0 = default 4.0) */
    KILN_CFG_COMFY,        /* ComfyUI's samplers (CFGGuider, KSampler): CFG whenever guidance is not close to 1
                            * (math.isclose), for any variant; guidance is taken as given (0 = the unconditional
                            * prediction alone), as cfg_function's uncond + (cond - uncond) * cfg */
} kiln_cfg_rule;

/* How a FLUX.1 prompt becomes its encoders' tokens (kiln_request.text_rule). */
typedef enum kiln_text_rule {
    KILN_TEXT_DIFFUSERS = 0, /* FluxPipeline: CLIP 77 tokens, T5 padded to 512 ([dev]) / 256 ([schnell]) and cut
                              * there, the prompt taken literally */
    KILN_TEXT_COMFY,         /* ComfyUI's graphs (text/comfy_prompt.h): "(word:1.2)" weights and escapes, T5 padded
                              * to 256 and never cut (the batch's prompts padded to the longest), CLIP-L's first
                              * 77-token chunk; a T5 token of weight w becomes (z - z_empty) * w + z_empty with
                              * z_empty the empty prompt's features, as encode_token_weights does */
} kiln_text_rule;

/* An input image (a reference or an init image): 8-bit RGB, row-major, width*height*3 bytes, read only during
 * kiln_generate. Decode files with io/image_load.h (kiln_image_load). */
typedef struct kiln_image_in {
    const uint8_t *pixels;
    int width, height;
} kiln_image_in;

#define KILN_MAX_REFS 10 /* reference images per request */

typedef struct kiln_request {
    const char *prompt;       /* UTF-8; required (may be "") */
    /* FLUX.1 only, optional: the T5 text when it differs from the CLIP text (diffusers' prompt_2, ComfyUI's
     * CLIPTextEncodeFlux t5xxl); NULL = prompt. Not with prompts. */
    const char *prompt_2;
    /* Optional: one prompt per image (batch entries), for a batch of different prompts in one forward.
     * When set, prompt is only used for the result's metadata. */
    const char *const *prompts;
    int width, height;        /* multiples of 16, 16..8192 (FLUX.2; FLUX.1 2048), within the memory estimate */
    int steps;                /* >= 1; 0 = the variant's default (4 distilled, 50 base; FLUX.1 28 dev, 4 schnell) */
    int batch;                /* images in one forward, 1..16 */
    uint64_t seed;            /* image i uses seed + i (so image i equals a batch-1 run with seed + i) */
    /* Optional: one seed per image (batch entries), replacing seed + i, so that images of different requests
     * batched into one forward each get exactly the noise they would get alone. NULL = seed + i. */
    const uint64_t *seeds;
    /* base only: CFG scale, 0 = default 4.0; CFG runs only when it is > 1 (as Flux2KleinPipeline decides), so 1
     * or less gives the conditional prediction alone. Ignored by the distilled model. Negative: refused. */
    /* FLUX.1 [dev]: the distilled guidance fed to the DiT (0 = the pipeline's 3.5); [schnell] ignores it. */
    float guidance;
    /* Optional, base with CFG only: the text of the unconditional branch (diffusers' negative_prompt, encoded
     * like the prompt). NULL or "" = the empty prompt, the official pipeline's default. One for the whole batch.
     * Ignored, with a warning in the result, when CFG does not run (distilled model, guidance <= 1). */
    const char *negative_prompt;
    kiln_cfg_rule cfg_rule;   /* KILN_CFG_OFFICIAL (the default) or KILN_CFG_COMFY (the server's graphs) */
    kiln_text_rule text_rule; /* FLUX.1: KILN_TEXT_DIFFUSERS (the default) or KILN_TEXT_COMFY; FLUX.2: must be
                               * KILN_TEXT_DIFFUSERS */
    /* The unconditional branch is all-zero text features (ComfyUI's ConditioningZeroOut), not an encoded text;
     * negative_prompt must then be NULL or "". */
    bool negative_zero;
    /* Optional injected initial noise, f32 [batch, 128, H/16, W/16] (the patchified, normalised latent
     * space the DiT works in; FLUX.1: [batch, 64, H/16, W/16], the packed 2x2 latent, channel c*4 + dy*2 + dx):
     * replaces the seeded generator, for comparisons with other implementations. */
    const float *noise;
    size_t noise_count;       /* elements in noise; must equal batch*128*(H/16)*(W/16) */
    const char *request_id;   /* recorded in the perf dump; NULL = generated */
    const char *tag;          /* recorded in the perf dump; NULL = "" */
    kiln_progress_fn progress;
    void *progress_ctx;
    bool latent_preview;      /* hand the progress callback image 0's latent after each step (one download) */
    /* Optional: reference images for editing, as Flux2KleinPipeline(image=[...]) takes them: each one checked
     * (sides >= 64, aspect <= 8), over 1024x1024 pixels resized to about that area (LANCZOS), center-cropped to
     * multiples of 16, VAE-encoded and appended after the noisy tokens with time id 10 + 10 k. With width and
     * height 0 the output takes the first reference's prepared size (the pipeline's default). */
    const kiln_image_in *refs;
    int n_refs;               /* 0..KILN_MAX_REFS */
    /* Optional: image-to-image. The init image is center-cropped to multiples of 16 (width/height 0: that size;
     * else it must be that size), encoded, and noised to the sigma that strength selects as diffusers'
     * img2img pipelines do (get_timesteps, scale_noise): of the `steps` schedule, steps from
     * s = int(steps - steps * strength) on run (refused when none would), starting from
     * sigma_s * noise + (1 - sigma_s) * latent. strength in (0, 1]; 1 = from pure noise. */
    const kiln_image_in *init_image;
    double strength;          /* double: get_timesteps' int(steps - steps * strength) is Python float maths */
    /* LoRA adapters for this request's DiT (src/models/lora.h: diffusers/PEFT lora_A/lora_B, kohya/ComfyUI
     * lora_down/lora_up/alpha, BFL/ai-toolkit diffusion_model.* names), applied at run time beside the base
     * matmuls and taken off when the request ends: no weight is copied, so requests can switch adapters. */
    /* Optional: the sigma schedule itself, as ComfyUI's samplers take it (BasicScheduler, ModelSamplingFlux,
     * KSampler's denoise): n_sigmas = steps + 1 values, sigmas[0] in (0, 1], strictly decreasing, the last 0.
     * Replaces the variant's schedule; steps must be 0 or n_sigmas - 1. The initial latent is noised to sigmas[0]
     * as ComfyUI's noise_scaling does (sigma * noise + (1 - sigma) * latent; an empty latent is 0), so with an
     * init image every step runs and strength must be 0. FLUX.1 and FLUX.2 text-to-image; FLUX.2 img2img. */
    const float *sigmas;
    int n_sigmas;
    const struct kiln_lora *loras;
    int n_loras;
    bool lora_merge;          /* merge them into copies of the adapted weights instead (models/lora.h) */
} kiln_request;

/* One adapter of a request: a .safetensors file and its strength (1 = as trained). */
typedef struct kiln_lora {
    const char *path;
    float strength;
} kiln_lora;

kiln_request kiln_request_default(void);

/* Runs one request to completion: validation, text encoding, noise, schedule, denoising, decoding. On success
 * *out holds the images and timings (free with kiln_result_free); on failure *out is NULL and err says why.
 * Errors: KILN_E_INVALID (bad request: size, steps, batch, noise size, guidance), KILN_E_LIMIT (will not fit in memory: refused before any work), KILN_E_CANCELLED, KILN_E_NOMEM. */
kiln_status kiln_generate(kiln_engine *eng, const kiln_request *req, kiln_result **out, kiln_err *err);

/* Bytes of memory the request will need beyond the memory-mapped weights (activations, text features,
 * latents, decoder buffers) and the resident weights it touches. kiln_generate refuses (KILN_E_LIMIT) a
 * request whose estimate exceeds the engine's memory limit. Reference and init images count (their prepared
 * sizes: reference tokens in the DiT, the encoder's activations) and, with width and height 0, set the size.
 * Against this rank's memory only (no collective: one rank may ask alone), where kiln_generate on several ranks
 * plans with the tightest rank's. */
kiln_status kiln_estimate_memory(kiln_engine *eng, const kiln_request *req, size_t *bytes, kiln_err *err);

/* ---- results --------------------------------------------------------------------------------------------- */

typedef struct kiln_image {
    int width, height;        /* channels = 3 (RGB), 8 bits */
    uint8_t *pixels;          /* width*height*3, row-major */
    uint64_t seed;
} kiln_image;

typedef struct kiln_stage_time {
    kiln_stage stage;
    double ms;
} kiln_stage_time;

struct kiln_result {
    int n_images;
    kiln_image *images;
    /* Timings, in milliseconds. stage_ms[s] for every stage that ran (0 for the others; OUTPUT is filled by
     * whoever encodes and saves: see kiln_result_set_output_ms). step_ms[i] for denoising step i. */
    double stage_ms[KILN_STAGE_COUNT];
    int n_steps;
    double *step_ms;
    double total_ms;          /* engine end-to-end: InputValidation .. Decoding (+ Output when set) */
    size_t peak_memory_bytes; /* peak resident set of the process during the request */
    /* The backend memory the request's activations took at their peak (what it allocated beyond what was live
     * when it began: the CPU's host buffers, the GPU's arena blocks), and what the memory plan counted for them
     * (the GPU arena is sized from the plan). */
    size_t act_peak_bytes, act_planned_bytes;
    double timestamp;         /* Unix seconds when the request started */
    char request_id[64];
    char tag[64];
    char commit[64];
    /* The parameters actually used (defaults resolved), for PNG text chunks and the perf dump. */
    char prompt_used[64];     /* first 63 bytes only; the full prompt stays with the caller */
    int width, height, steps, batch;
    float guidance;
    kiln_variant variant;
    double sigmas_first, sigmas_last_nonzero;
    /* CPU time of the whole process per stage (all threads), in ms: with wall time it shows how much of the
     * machine a stage got (a loaded machine stretches wall time, not CPU time). In the perf dump as cpu_ms. */
    double stage_cpu_ms[KILN_STAGE_COUNT];
    /* NULL, or what the caller should tell the user, one warning per '\n'-terminated line: a prompt truncated to
     * the template's 512 tokens (how many tokens were dropped), guidance or a negative prompt ignored. */
    char *warnings;
};

void kiln_result_free(kiln_result *res); /* NULL allowed */
/* Records the time spent encoding/saving the images (adds it to total_ms). */
void kiln_result_set_output_ms(kiln_result *res, double ms);

/* The perf dump: {timestamp, request_id, commit, tag, total_duration_ms, stages:[{name, duration_ms}],
 * denoise_steps_ms:[{step, duration_ms}], peak_memory_bytes, meta:{width, height, steps, batch, guidance,
 * variant, ...}}. meta_json: NULL or a JSON object text whose members are merged into meta. Returns a
 * malloc'd NUL-terminated string (free with free()), or NULL when out of memory or meta_json is not an object. */
char *kiln_result_perf_json(const kiln_result *res, const char *meta_json);

#ifdef __cplusplus
}
#endif

#endif

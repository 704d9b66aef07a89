/* engine.h - the one seam between the graph executor and the image engine.
 *
 * The executor never makes pixels itself: when a graph reaches a sampler whose latent is decoded, it fills a
 * kiln_gen_params from the node inputs and calls engine->generate. The real engine (include/kiln.h) sits behind
 * this table (see engine_kiln.c); unit tests of the plumbing plug in a clearly-named test double.
 *
 * generate fills *out with n_images RGB8 images of width x height (pixels: n*w*h*3 bytes from kiln_malloc,
 * freed by the caller with kiln_free). progress(ctx, step, n_steps) is called after each denoising step and
 * returns false to stop the work (generate then returns KILN_E_CANCELLED).
 */
#ifndef KILN_GRAPH_ENGINE_H
#define KILN_GRAPH_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct kiln_gen_lora {
    const char *path; /* resolved file under models/loras */
    float strength;
} kiln_gen_lora;

typedef struct kiln_gen_image {
    const uint8_t *pixels; /* RGB8, width*height*3 */
    int width, height;
} kiln_gen_image;

typedef struct kiln_gen_params {
    const char *unet_path, *clip_path, *vae_path; /* resolved files under the model folders */
    const char *clip2_path;                       /* FLUX.1's T5 (DualCLIPLoader); NULL for FLUX.2 */
    const char *prompt_2;                         /* FLUX.1's T5 text (CLIPTextEncodeFlux); NULL: prompt */
    float guidance; /* FLUX.1 [dev]'s distilled guidance (FluxGuidance; ComfyUI's default 3.5); 0 for FLUX.2 */
    /* ComfyUI's sigma schedule (n_sigmas = steps + 1: BasicScheduler, KSampler on FLUX.1, denoise < 1); NULL:
     * the engine's own (Flux2Scheduler) */
    const float *sigmas;
    int n_sigmas;
    const kiln_gen_lora *loras; /* LoraLoader(ModelOnly), applied to the DiT in order */
    int n_loras;
    const kiln_gen_image *refs; /* ReferenceLatent images of the positive conditioning */
    int n_refs;
    const kiln_gen_image *init_image; /* the sampled latent's VAEEncode'd image (sigmas then set); NULL: empty */
    const char *prompt;                           /* positive text ("" allowed) */
    const char *negative_prompt;                  /* NULL when the negative is ConditioningZeroOut */
    int width, height, steps, batch;
    uint64_t seed;
    /* ComfyUI's noise (comfy/sample.py prepare_noise): one torch.randn of the latent batch from seed, drawn by
     * pipeline/torch_randn.h. false: kiln's own generator, image i from seed + i (the OpenAI route, as kiln
     * generate). */
    bool comfy_noise;
    /* ComfyUI's FLUX.1 prompt tokenisation (kiln.h KILN_TEXT_COMFY: weights, T5 padded to 256 and never cut).
     * false: diffusers' (the OpenAI route, as kiln generate). FLUX.2 prompts are encoded as diffusers does. */
    bool comfy_text;
    float cfg;
    const char *sampler; /* "euler" */
    const char *request_id;
    /* Optional: after each step, image 0's latent (kiln_progress.latent's layout) for a live preview; called
     * with the progress context. NULL: no latent is downloaded. */
    void (*latent)(void *pctx, const float *latent, int h16, int w16);
} kiln_gen_params;

typedef struct kiln_gen_images {
    int n, width, height;
    uint8_t *pixels;
    /* what the engine measured (0 when it does not say): engine end-to-end and peak resident memory */
    double engine_ms;
    size_t peak_memory_bytes;
    /* the engine's wall ms per stage, in include/kiln.h's kiln_stage order (InputValidation .. Output); all 0 when
     * it does not say. The server reports them in /history (kiln bench variants' VAE stage records). */
    double stage_ms[7];
    char warnings[512]; /* what the user should be told ('\n'-terminated lines; "" none): a truncated prompt... */
} kiln_gen_images;

typedef bool (*kiln_gen_progress_fn)(void *ctx, int step, int n_steps);

typedef struct kiln_gen_engine {
    void *self;
    kiln_status (*generate)(void *self, const kiln_gen_params *p, kiln_gen_progress_fn progress, void *pctx,
                            kiln_gen_images *out, kiln_err *err);
    /* Optional: n requests that differ only in prompt, seed and batch, run as one forward (the server batches
     * compatible queued jobs); outs[i] receives request i's images, as generate would give them. NULL: the
     * server runs one job at a time. */
    kiln_status (*generate_batch)(void *self, const kiln_gen_params *ps, int n, kiln_gen_progress_fn progress,
                                  void *pctx, kiln_gen_images *outs, kiln_err *err);
    /* Optional: drop loaded weights (POST /free). */
    void (*unload)(void *self);
} kiln_gen_engine;

#endif

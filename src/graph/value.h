/* value.h - the values that flow along graph links while the executor runs.
 *
 * Loaders yield paths, not weights: the engine opens (and caches) the checkpoints when a sampler's latent is
 * decoded. A sampler yields a LATENT that holds the whole recipe; VAEDecode, which is the first node that knows
 * every model file, calls the engine (kiln.h generates and decodes in one call) and yields pixels.
 */
#ifndef KILN_GRAPH_VALUE_H
#define KILN_GRAPH_VALUE_H

#include <stdbool.h>
#include <stdint.h>

typedef enum kiln_value_kind {
    KILN_V_NONE = 0,
    KILN_V_INT,
    KILN_V_FLOAT,
    KILN_V_STRING,
    KILN_V_BOOL,
    KILN_V_MODEL,        /* str = resolved path, model */
    KILN_V_CLIP,         /* str = resolved path, str2 = FLUX.1's T5 (DualCLIPLoader) */
    KILN_V_VAE,          /* str = resolved path */
    KILN_V_CONDITIONING, /* str = text; zero = ConditioningZeroOut; str2 = clip path, str3 = T5 path; cond */
    KILN_V_LATENT,       /* empty (sampled = false) or a sampler's recipe (sampled = true) */
    KILN_V_NOISE,        /* i = seed */
    KILN_V_SAMPLER,      /* str = sampler name */
    KILN_V_SIGMAS,       /* sigmas/n_sigmas (BasicScheduler), or i = steps, width/height (Flux2Scheduler) */
    KILN_V_GUIDER,       /* str = model path, cond_pos/cond_neg, f = cfg */
    KILN_V_IMAGE,        /* batch of RGB8 images */
} kiln_value_kind;

#define KILN_GRAPH_MAX_LORAS 8
#define KILN_GRAPH_MAX_REFS 10 /* kiln.h's KILN_MAX_REFS */

typedef enum kiln_graph_family {
    KILN_GF_FLUX2 = 0,      /* FLUX.2 [klein] (and anything not recognised: the engine then says what it is) */
    KILN_GF_FLUX1_DEV,      /* a FLUX.1 DiT with a guidance embedder */
    KILN_GF_FLUX1_SCHNELL,  /* a FLUX.1 DiT without one */
} kiln_graph_family;

/* An owned RGB8 image (LoadImage's, a VAEEncode'd image, a reference). */
typedef struct kiln_rgb {
    uint8_t *pixels;
    int width, height;
} kiln_rgb;

/* What a MODEL carries besides its file (value str). */
typedef struct kiln_model_info {
    kiln_graph_family family;
    double shift; /* ComfyUI's model_sampling shift: flux_time_shift's mu (ModelSamplingFlux replaces it) */
    int n_loras;  /* LoraLoader / LoraLoaderModelOnly, in graph order */
    char *lora_path[KILN_GRAPH_MAX_LORAS];
    float lora_strength[KILN_GRAPH_MAX_LORAS];
} kiln_model_info;

/* What a CONDITIONING carries besides its text (value str) and encoders (str2 CLIP, str3 FLUX.1's T5). */
typedef struct kiln_cond_info {
    char *text2;       /* CLIPTextEncodeFlux's t5xxl text; NULL: the CLIP text */
    bool has_guidance; /* FluxGuidance / CLIPTextEncodeFlux; else ComfyUI's default 3.5 */
    double guidance;
    int n_refs;        /* ReferenceLatent, in graph order */
    kiln_rgb refs[KILN_GRAPH_MAX_REFS];
} kiln_cond_info;

typedef struct kiln_latent {
    int width, height, batch;
    bool sampled;
    kiln_rgb encoded; /* VAEEncode: the image this latent encodes (pixels NULL: an empty latent) */
    /* recipe, valid when sampled */
    char *model_path, *clip_path, *clip2_path;
    char *prompt, *negative; /* negative NULL = zeroed */
    kiln_model_info model;
    kiln_cond_info pos;
    int steps;
    float *sigmas; /* ComfyUI's schedule (n_sigmas = steps + 1); NULL: the engine's own */
    int n_sigmas;
    uint64_t seed;
    double cfg;
    char *sampler;
    char sampler_node[64]; /* node id the progress messages are reported for */
} kiln_latent;

typedef struct kiln_value {
    kiln_value_kind kind;
    int64_t i;
    double f;
    char *str, *str2, *str3;
    bool zero;
    kiln_latent latent;
    kiln_model_info model;
    kiln_cond_info cond;
    float *sigmas;
    int n_sigmas;
    /* IMAGE */
    int n_images, width, height;
    uint8_t *pixels; /* n*w*h*3 */
} kiln_value;

void kiln_value_clear(kiln_value *v);

/* Deep copies (dst is overwritten; on false, out of memory, dst holds what was copied: clear it as usual). */
bool kiln_rgb_copy(kiln_rgb *dst, const kiln_rgb *src);
bool kiln_model_info_copy(kiln_model_info *dst, const kiln_model_info *src);
bool kiln_cond_info_copy(kiln_cond_info *dst, const kiln_cond_info *src);
void kiln_model_info_clear(kiln_model_info *m);
void kiln_cond_info_clear(kiln_cond_info *c);

#endif

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
    KILN_V_MODEL,        /* str = resolved path */
    KILN_V_CLIP,         /* str = resolved path */
    KILN_V_VAE,          /* str = resolved path */
    KILN_V_CONDITIONING, /* str = text; zero = ConditioningZeroOut; str2 = clip path */
    KILN_V_LATENT,       /* empty (sampled = false) or a sampler's recipe (sampled = true) */
    KILN_V_NOISE,        /* i = seed */
    KILN_V_SAMPLER,      /* str = sampler name */
    KILN_V_SIGMAS,       /* i = steps, width/height as given */
    KILN_V_GUIDER,       /* str = model path, cond_pos/cond_neg, f = cfg */
    KILN_V_IMAGE,        /* batch of RGB8 images */
} kiln_value_kind;

typedef struct kiln_latent {
    int width, height, batch;
    bool sampled;
    /* recipe, valid when sampled */
    char *model_path, *clip_path;
    char *prompt, *negative; /* negative NULL = zeroed */
    int steps;
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
    /* IMAGE */
    int n_images, width, height;
    uint8_t *pixels; /* n*w*h*3 */
} kiln_value;

void kiln_value_clear(kiln_value *v);

#endif

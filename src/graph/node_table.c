/* node_table.c - the declarative table of node classes (see node_table.h). Bounds follow ComfyUI's where kiln
 * can honour them and kiln's engine limits (include/kiln.h: sides 64..2048, multiples of 16, batch 1..16)
 * where they are tighter: a value the engine would refuse is refused at submission, not half-way through. */
#include "graph/node_table.h"

#include <string.h>

#include "graph/exec.h"

static const char *const weight_dtypes[] = {"default", "fp8_e4m3fn", "fp8_e4m3fn_fast", "fp8_e5m2", NULL};
static const char *const clip_types[] = {"flux2", NULL};
static const char *const devices[] = {"default", "cpu", NULL};
static const char *const samplers[] = {"euler", NULL};
/* kiln always samples FLUX.2 with its shifted (empirical mu) schedule; these names are accepted for the plain
 * KSampler wiring and mean that schedule. */
static const char *const schedulers[] = {"simple", "normal", NULL};

#define SEED_MAX 18446744073709551615.0 /* 2^64 - 1, ComfyUI's seed maximum (coerce.c reads it exactly) */
#define PRIM_MAX 9223372036854775807.0  /* sys.maxsize, ComfyUI's Primitive bounds */

#define LINK(n, t) {.name = (n), .type = (t), .model_kind = KILN_NO_MODEL_KIND}
#define INT_IN(n, lo, hi, st, d) {.name = (n), .type = "INT", .min = (lo), .max = (hi), .step = (st), .def = (d), \
                                  .model_kind = KILN_NO_MODEL_KIND}
#define FLOAT_IN(n, lo, hi, st, d) {.name = (n), .type = "FLOAT", .min = (lo), .max = (hi), .step = (st),          \
                                    .def = (d), .model_kind = KILN_NO_MODEL_KIND}
#define COMBO_IN(n, list, d) {.name = (n), .type = "COMBO", .options = (list), .def_str = (d),                 \
                           .model_kind = KILN_NO_MODEL_KIND}
#define MODEL_IN(n, kind) {.name = (n), .type = "COMBO", .model_kind = (kind)}

static const kiln_node_class classes[] = {
    {.name = "UNETLoader", .display_name = "Load Diffusion Model", .category = "advanced/loaders",
     .description = "Names the FLUX.2 diffusion model file (diffusion_models/ or unet/).",
     .inputs = {MODEL_IN("unet_name", KILN_MODELS_DIFFUSION), COMBO_IN("weight_dtype", weight_dtypes, "default")},
     .outputs = {"MODEL"}, .output_names = {"MODEL"}, .eval = kiln_node_unet_loader},
    {.name = "CLIPLoader", .display_name = "Load CLIP", .category = "advanced/loaders",
     .description = "Names the Qwen3 text encoder file (text_encoders/ or clip/).",
     .inputs = {MODEL_IN("clip_name", KILN_MODELS_TEXT_ENCODER), COMBO_IN("type", clip_types, "flux2"),
                {.name = "device", .type = "COMBO", .optional = true, .options = devices, .def_str = "default",
                 .model_kind = KILN_NO_MODEL_KIND}},
     .outputs = {"CLIP"}, .output_names = {"CLIP"}, .eval = kiln_node_clip_loader},
    {.name = "VAELoader", .display_name = "Load VAE", .category = "loaders",
     .description = "Names the FLUX.2 VAE file (vae/).",
     .inputs = {MODEL_IN("vae_name", KILN_MODELS_VAE)},
     .outputs = {"VAE"}, .output_names = {"VAE"}, .eval = kiln_node_vae_loader},
    {.name = "CLIPTextEncode", .display_name = "CLIP Text Encode (Prompt)", .category = "conditioning",
     .description = "The prompt text, encoded by the text encoder when the image is made.",
     .inputs = {{.name = "text", .type = "STRING", .multiline = true, .def_str = "",
                 .model_kind = KILN_NO_MODEL_KIND},
                LINK("clip", "CLIP")},
     .outputs = {"CONDITIONING"}, .output_names = {"CONDITIONING"}, .eval = kiln_node_clip_text_encode},
    {.name = "ConditioningZeroOut", .display_name = "ConditioningZeroOut", .category = "advanced/conditioning",
     .description = "An all-zero conditioning (the klein template's negative).",
     .inputs = {LINK("conditioning", "CONDITIONING")},
     .outputs = {"CONDITIONING"}, .output_names = {"CONDITIONING"}, .eval = kiln_node_conditioning_zero_out},
    {.name = "EmptyFlux2LatentImage", .display_name = "Empty Flux 2 Latent", .category = "latent",
     .description = "An empty FLUX.2 latent [B,128,H/16,W/16]; sides are rounded down to multiples of 16.",
     .inputs = {INT_IN("width", 64, 2048, 16, 1024), INT_IN("height", 64, 2048, 16, 1024),
                INT_IN("batch_size", 1, 16, 1, 1)},
     .outputs = {"LATENT"}, .output_names = {"LATENT"}, .eval = kiln_node_empty_flux2_latent},
    {.name = "RandomNoise", .display_name = "RandomNoise", .category = "sampling/custom_sampling/noise",
     .description = "The seed of the initial noise (image i of a batch uses seed + i).",
     .inputs = {INT_IN("noise_seed", 0, SEED_MAX, 1, 0)},
     .outputs = {"NOISE"}, .output_names = {"NOISE"}, .eval = kiln_node_random_noise},
    {.name = "KSamplerSelect", .display_name = "KSamplerSelect", .category = "sampling/custom_sampling/samplers",
     .description = "The sampler; kiln implements the Euler flow-matching sampler.",
     .inputs = {COMBO_IN("sampler_name", samplers, "euler")},
     .outputs = {"SAMPLER"}, .output_names = {"SAMPLER"}, .eval = kiln_node_ksampler_select},
    {.name = "Flux2Scheduler", .display_name = "Flux2Scheduler", .category = "sampling/custom_sampling/schedulers",
     .description = "The FLUX.2 empirical-mu sigma schedule for a number of steps at an image size.",
     .inputs = {INT_IN("steps", 1, 4096, 1, 20), INT_IN("width", 64, 2048, 16, 1024),
                INT_IN("height", 64, 2048, 16, 1024)},
     .outputs = {"SIGMAS"}, .output_names = {"SIGMAS"}, .eval = kiln_node_flux2_scheduler},
    {.name = "CFGGuider", .display_name = "CFGGuider", .category = "sampling/custom_sampling/guiders",
     .description = "Classifier-free guidance over a positive and a negative conditioning.",
     .inputs = {LINK("model", "MODEL"), LINK("positive", "CONDITIONING"), LINK("negative", "CONDITIONING"),
                FLOAT_IN("cfg", 0.0, 100.0, 0.1, 8.0)},
     .outputs = {"GUIDER"}, .output_names = {"GUIDER"}, .eval = kiln_node_cfg_guider},
    {.name = "SamplerCustomAdvanced", .display_name = "SamplerCustomAdvanced",
     .category = "sampling/custom_sampling",
     .description = "Denoises the latent with a guider, a sampler and a sigma schedule.",
     .inputs = {LINK("noise", "NOISE"), LINK("guider", "GUIDER"), LINK("sampler", "SAMPLER"),
                LINK("sigmas", "SIGMAS"), LINK("latent_image", "LATENT")},
     .outputs = {"LATENT", "LATENT"}, .output_names = {"output", "denoised_output"},
     .eval = kiln_node_sampler_custom_advanced},
    {.name = "KSampler", .display_name = "KSampler", .category = "sampling",
     .description = "The plain sampler node: seed, steps, cfg, sampler and scheduler in one.",
     .inputs = {LINK("model", "MODEL"), INT_IN("seed", 0, SEED_MAX, 1, 0), INT_IN("steps", 1, 4096, 1, 20),
                FLOAT_IN("cfg", 0.0, 100.0, 0.1, 8.0), COMBO_IN("sampler_name", samplers, "euler"),
                COMBO_IN("scheduler", schedulers, "simple"), LINK("positive", "CONDITIONING"),
                LINK("negative", "CONDITIONING"), LINK("latent_image", "LATENT"),
                FLOAT_IN("denoise", 0.0, 1.0, 0.01, 1.0)},
     .outputs = {"LATENT"}, .output_names = {"LATENT"}, .eval = kiln_node_ksampler},
    {.name = "VAEDecode", .display_name = "VAE Decode", .category = "latent",
     .description = "Decodes the sampled latent to pixels (this is where kiln's engine runs).",
     .inputs = {LINK("samples", "LATENT"), LINK("vae", "VAE")},
     .outputs = {"IMAGE"}, .output_names = {"IMAGE"}, .eval = kiln_node_vae_decode},
    {.name = "ImagePixelize", .display_name = "Pixelize (kiln)", .category = "image/postprocessing",
     .description = "Box-average downscale by an integer factor, then nearest-neighbour upscale back.",
     .inputs = {LINK("image", "IMAGE"), INT_IN("factor", 1, 256, 1, 4)},
     .outputs = {"IMAGE"}, .output_names = {"IMAGE"}, .eval = kiln_node_pixelize},
    {.name = "PrimitiveInt", .display_name = "Int", .category = "utils/primitive",
     .description = "An integer value for other nodes' inputs.",
     .inputs = {INT_IN("value", -PRIM_MAX, PRIM_MAX, 1, 0)},
     .outputs = {"INT"}, .output_names = {"INT"}, .eval = kiln_node_primitive},
    {.name = "PrimitiveFloat", .display_name = "Float", .category = "utils/primitive",
     .description = "A number for other nodes' inputs.",
     .inputs = {FLOAT_IN("value", -PRIM_MAX, PRIM_MAX, 0.1, 0.0)},
     .outputs = {"FLOAT"}, .output_names = {"FLOAT"}, .eval = kiln_node_primitive},
    {.name = "PrimitiveString", .display_name = "String", .category = "utils/primitive",
     .description = "A line of text for other nodes' inputs.",
     .inputs = {{.name = "value", .type = "STRING", .def_str = "", .model_kind = KILN_NO_MODEL_KIND}},
     .outputs = {"STRING"}, .output_names = {"STRING"}, .eval = kiln_node_primitive},
    {.name = "PrimitiveStringMultiline", .display_name = "String (Multiline)", .category = "utils/primitive",
     .description = "Text for other nodes' inputs.",
     .inputs = {{.name = "value", .type = "STRING", .multiline = true, .def_str = "", .model_kind = KILN_NO_MODEL_KIND}},
     .outputs = {"STRING"}, .output_names = {"STRING"}, .eval = kiln_node_primitive},
    {.name = "PrimitiveBoolean", .display_name = "Boolean", .category = "utils/primitive",
     .description = "A true/false value for other nodes' inputs.",
     .inputs = {{.name = "value", .type = "BOOLEAN", .def = 0, .model_kind = KILN_NO_MODEL_KIND}},
     .outputs = {"BOOLEAN"}, .output_names = {"BOOLEAN"}, .eval = kiln_node_primitive},
    {.name = "PreviewImage", .display_name = "Preview Image", .category = "image",
     .description = "Saves the images as temporary PNGs (type temp) for the frontend to show.",
     .inputs = {LINK("images", "IMAGE")},
     .output_node = true, .eval = kiln_node_preview_image},
    {.name = "SaveImageWebsocket", .display_name = "SaveImageWebsocket", .category = "api node/image",
     .description = "Sends each image as a PNG in a binary WebSocket frame to the prompt's client; saves nothing.",
     .inputs = {LINK("images", "IMAGE")},
     .output_node = true, .eval = kiln_node_save_image_websocket},
    {.name = "SaveImage", .display_name = "Save Image", .category = "image",
     .description = "Saves PNGs {prefix}_{counter:05}_.png under the output folder (a prefix may name a "
                    "subfolder).",
     .inputs = {LINK("images", "IMAGE"),
                {.name = "filename_prefix", .type = "STRING", .def_str = "ComfyUI",
                 .model_kind = KILN_NO_MODEL_KIND}},
     .output_node = true, .eval = kiln_node_save_image},
};

#define N_CLASSES (sizeof classes / sizeof classes[0])

const kiln_node_class *kiln_node_class_find(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < N_CLASSES; i++)
        if (!strcmp(classes[i].name, name)) return &classes[i];
    return NULL;
}

size_t kiln_node_class_count(void) { return N_CLASSES; }
const kiln_node_class *kiln_node_class_at(size_t i) { return i < N_CLASSES ? &classes[i] : NULL; }

size_t kiln_node_class_n_inputs(const kiln_node_class *c) {
    size_t n = 0;
    while (n < KILN_NODE_MAX_INPUTS && c->inputs[n].name) n++;
    return n;
}

size_t kiln_node_class_n_outputs(const kiln_node_class *c) {
    size_t n = 0;
    while (n < KILN_NODE_MAX_OUTPUTS && c->outputs[n]) n++;
    return n;
}

int kiln_node_class_input_index(const kiln_node_class *c, const char *name) {
    for (size_t i = 0; i < KILN_NODE_MAX_INPUTS && c->inputs[i].name; i++)
        if (!strcmp(c->inputs[i].name, name)) return (int)i;
    return -1;
}

bool kiln_node_type_is_widget(const char *t) {
    return !strcmp(t, "INT") || !strcmp(t, "FLOAT") || !strcmp(t, "STRING") || !strcmp(t, "BOOLEAN") ||
           !strcmp(t, "COMBO");
}

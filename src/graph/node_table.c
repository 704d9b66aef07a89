/* node_table.c - the declarative table of node classes (see node_table.h). Bounds follow ComfyUI's where kiln
 * can honour them and kiln's engine limits (include/kiln.h: sides 64..2048, multiples of 16, batch 1..16)
 * where they are tighter: a value the engine would refuse is refused at submission, not half-way through. */
#include "graph/node_table.h"

#include <string.h>

#include "graph/exec.h"

static const char *const weight_dtypes[] = {"default", "fp8_e4m3fn", "fp8_e4m3fn_fast", "fp8_e5m2", NULL};
static const char *const clip_types[] = {"flux2", NULL};
static const char *const dual_clip_types[] = {"flux", NULL};
/* ComfyUI's schedulers that kiln computes exactly (pipeline/comfy_sigmas.h); the others are not listed */
static const char *const comfy_schedulers[] = {"simple", "sgm_uniform", "normal", NULL};
static const char *const upscale_methods[] = {"nearest-exact", NULL};
static const char *const devices[] = {"default", "cpu", NULL};
static const char *const samplers[] = {"euler", NULL};
/* UnetLoaderGGUFAdvanced's dequant_dtype / patch_dtype (ComfyUI-GGUF nodes.py: default, target, float32, float16,
 * bfloat16): kiln dequantises GGUF blocks to float32 exactly (tensor/quant.h) and adds LoRA patches in float32, so
 * default and float32 are what it does; target, float16 and bfloat16 are not listed, refused by name at submission */
static const char *const gguf_dtypes[] = {"default", "float32", NULL};

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
#define GGUF_IN(n, kind) {.name = (n), .type = "COMBO", .model_kind = (kind), .only_ext = ".gguf"}

static const kiln_node_class classes[] = {
    {.name = "UNETLoader", .display_name = "Load Diffusion Model", .category = "advanced/loaders",
     .description = "Names the FLUX.2 [klein] or FLUX.1 [dev]/[schnell] diffusion model file (diffusion_models/ or "
                    "unet/).",
     .inputs = {MODEL_IN("unet_name", KILN_MODELS_DIFFUSION), COMBO_IN("weight_dtype", weight_dtypes, "default")},
     .outputs = {"MODEL"}, .output_names = {"MODEL"}, .eval = kiln_node_unet_loader},
    {.name = "CheckpointLoaderSimple", .display_name = "Load Checkpoint", .category = "loaders",
     .description = "Names a ComfyUI all-in-one FLUX.1 checkpoint (checkpoints/): the diffusion model, CLIP-L, "
                    "T5-XXL and the VAE in one file, each under its own prefix.",
     .inputs = {MODEL_IN("ckpt_name", KILN_MODELS_CHECKPOINT)},
     .outputs = {"MODEL", "CLIP", "VAE"}, .output_names = {"MODEL", "CLIP", "VAE"},
     .eval = kiln_node_checkpoint_loader},
    {.name = "CLIPLoader", .display_name = "Load CLIP", .category = "advanced/loaders",
     .description = "Names the Qwen3 text encoder file (text_encoders/ or clip/).",
     .inputs = {MODEL_IN("clip_name", KILN_MODELS_TEXT_ENCODER), COMBO_IN("type", clip_types, "flux2"),
                {.name = "device", .type = "COMBO", .optional = true, .options = devices, .def_str = "default",
                 .model_kind = KILN_NO_MODEL_KIND}},
     .outputs = {"CLIP"}, .output_names = {"CLIP"}, .eval = kiln_node_clip_loader},
    {.name = "DualCLIPLoader", .display_name = "DualCLIPLoader", .category = "advanced/loaders",
     .description = "Names FLUX.1's two text encoder files, CLIP-L and T5-XXL (text_encoders/ or clip/).",
     .inputs = {MODEL_IN("clip_name1", KILN_MODELS_TEXT_ENCODER), MODEL_IN("clip_name2", KILN_MODELS_TEXT_ENCODER),
                COMBO_IN("type", dual_clip_types, "flux"),
                {.name = "device", .type = "COMBO", .optional = true, .options = devices, .def_str = "default",
                 .model_kind = KILN_NO_MODEL_KIND}},
     .outputs = {"CLIP"}, .output_names = {"CLIP"}, .eval = kiln_node_dual_clip_loader},
    /* ComfyUI-GGUF's loaders (city96/ComfyUI-GGUF nodes.py): CLIPLoader's and DualCLIPLoader's inputs without
     * device; kiln reads a .gguf text encoder (llama.cpp names) through the same loaders as any other file */
    {.name = "CLIPLoaderGGUF", .display_name = "CLIPLoader (GGUF)", .category = "bootleg",
     .description = "Names the Qwen3 text encoder file, GGUF or not (text_encoders/ or clip/).",
     .inputs = {MODEL_IN("clip_name", KILN_MODELS_TEXT_ENCODER), COMBO_IN("type", clip_types, "flux2")},
     .outputs = {"CLIP"}, .output_names = {"CLIP"}, .eval = kiln_node_clip_loader},
    {.name = "DualCLIPLoaderGGUF", .display_name = "DualCLIPLoader (GGUF)", .category = "bootleg",
     .description = "Names FLUX.1's CLIP-L and T5-XXL files, GGUF or not (text_encoders/ or clip/).",
     .inputs = {MODEL_IN("clip_name1", KILN_MODELS_TEXT_ENCODER), MODEL_IN("clip_name2", KILN_MODELS_TEXT_ENCODER),
                COMBO_IN("type", dual_clip_types, "flux")},
     .outputs = {"CLIP"}, .output_names = {"CLIP"}, .eval = kiln_node_dual_clip_loader},
    /* ComfyUI-GGUF's UnetLoaderGGUF / UnetLoaderGGUFAdvanced: unet_name lists only the .gguf files of
     * diffusion_models/ (or unet/); kiln reads a BFL-named GGUF DiT as UNETLoader does. ComfyUI-GGUF's newer
     * outputs filename and sha256 (STRING) are not given: MODEL only */
    {.name = "UnetLoaderGGUF", .display_name = "Unet Loader (GGUF)", .category = "bootleg",
     .description = "Names a GGUF FLUX.2 [klein] or FLUX.1 diffusion model file (diffusion_models/ or unet/).",
     .inputs = {GGUF_IN("unet_name", KILN_MODELS_DIFFUSION)},
     .outputs = {"MODEL"}, .output_names = {"MODEL"}, .eval = kiln_node_unet_loader_gguf},
    {.name = "UnetLoaderGGUFAdvanced", .display_name = "Unet Loader (GGUF/Advanced)", .category = "bootleg",
     .description = "UnetLoaderGGUF with ComfyUI-GGUF's dtype options: kiln dequantises to float32, so "
                    "dequant_dtype and patch_dtype take default or float32; patch_on_device is ignored.",
     .inputs = {GGUF_IN("unet_name", KILN_MODELS_DIFFUSION), COMBO_IN("dequant_dtype", gguf_dtypes, "default"),
                COMBO_IN("patch_dtype", gguf_dtypes, "default"),
                {.name = "patch_on_device", .type = "BOOLEAN", .def = 0, .model_kind = KILN_NO_MODEL_KIND}},
     .outputs = {"MODEL"}, .output_names = {"MODEL"}, .eval = kiln_node_unet_loader_gguf_advanced},
    {.name = "LoraLoaderModelOnly", .display_name = "LoraLoaderModelOnly", .category = "loaders",
     .description = "Adds a LoRA adapter (loras/) to the diffusion model, applied at run time.",
     .inputs = {LINK("model", "MODEL"), MODEL_IN("lora_name", KILN_MODELS_LORA),
                FLOAT_IN("strength_model", -100.0, 100.0, 0.01, 1.0)},
     .outputs = {"MODEL"}, .output_names = {"MODEL"}, .eval = kiln_node_lora_loader_model_only},
    {.name = "LoraLoader", .display_name = "Load LoRA", .category = "loaders",
     .description = "Adds a LoRA adapter (loras/) to the diffusion model; kiln's LoRA adapts the diffusion model "
                    "only, so strength_clip is ignored with a warning.",
     .inputs = {LINK("model", "MODEL"), LINK("clip", "CLIP"), MODEL_IN("lora_name", KILN_MODELS_LORA),
                FLOAT_IN("strength_model", -100.0, 100.0, 0.01, 1.0),
                FLOAT_IN("strength_clip", -100.0, 100.0, 0.01, 1.0)},
     .outputs = {"MODEL", "CLIP"}, .output_names = {"MODEL", "CLIP"}, .eval = kiln_node_lora_loader},
    {.name = "ModelSamplingFlux", .display_name = "ModelSamplingFlux", .category = "advanced/model",
     .description = "Sets the model's sigma shift from the image size: a line through (256 tokens, base_shift) and "
                    "(4096 tokens, max_shift).",
     .inputs = {LINK("model", "MODEL"), FLOAT_IN("max_shift", 0.0, 100.0, 0.01, 1.15),
                FLOAT_IN("base_shift", 0.0, 100.0, 0.01, 0.5), INT_IN("width", 16, 16384, 8, 1024),
                INT_IN("height", 16, 16384, 8, 1024)},
     .outputs = {"MODEL"}, .output_names = {"MODEL"}, .eval = kiln_node_model_sampling_flux},
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
    {.name = "CLIPTextEncodeFlux", .display_name = "CLIPTextEncodeFlux", .category = "advanced/conditioning/flux",
     .description = "FLUX.1's prompt: one text for CLIP-L, one for T5-XXL, and the distilled guidance.",
     .inputs = {LINK("clip", "CLIP"),
                {.name = "clip_l", .type = "STRING", .multiline = true, .def_str = "", .model_kind = KILN_NO_MODEL_KIND},
                {.name = "t5xxl", .type = "STRING", .multiline = true, .def_str = "", .model_kind = KILN_NO_MODEL_KIND},
                FLOAT_IN("guidance", 0.0, 100.0, 0.1, 3.5)},
     .outputs = {"CONDITIONING"}, .output_names = {"CONDITIONING"}, .eval = kiln_node_clip_text_encode_flux},
    {.name = "FluxGuidance", .display_name = "FluxGuidance", .category = "advanced/conditioning/flux",
     .description = "Sets the distilled guidance FLUX.1 [dev] is given (ComfyUI's default is 3.5).",
     .inputs = {LINK("conditioning", "CONDITIONING"), FLOAT_IN("guidance", 0.0, 100.0, 0.1, 3.5)},
     .outputs = {"CONDITIONING"}, .output_names = {"CONDITIONING"}, .eval = kiln_node_flux_guidance},
    {.name = "ReferenceLatent", .display_name = "ReferenceLatent", .category = "advanced/conditioning/edit_models",
     .description = "Adds a VAEEncode'd image to the conditioning as a reference (FLUX.2 [klein] editing).",
     .inputs = {LINK("conditioning", "CONDITIONING"),
                {.name = "latent", .type = "LATENT", .optional = true, .model_kind = KILN_NO_MODEL_KIND}},
     .outputs = {"CONDITIONING"}, .output_names = {"CONDITIONING"}, .eval = kiln_node_reference_latent},
    {.name = "ConditioningZeroOut", .display_name = "ConditioningZeroOut", .category = "advanced/conditioning",
     .description = "An all-zero conditioning (the klein template's negative).",
     .inputs = {LINK("conditioning", "CONDITIONING")},
     .outputs = {"CONDITIONING"}, .output_names = {"CONDITIONING"}, .eval = kiln_node_conditioning_zero_out},
    {.name = "EmptyFlux2LatentImage", .display_name = "Empty Flux 2 Latent", .category = "latent",
     .description = "An empty FLUX.2 latent [B,128,H/16,W/16]; sides are rounded down to multiples of 16.",
     .inputs = {INT_IN("width", 64, 2048, 16, 1024), INT_IN("height", 64, 2048, 16, 1024),
                INT_IN("batch_size", 1, 16, 1, 1)},
     .outputs = {"LATENT"}, .output_names = {"LATENT"}, .eval = kiln_node_empty_flux2_latent},
    {.name = "EmptySD3LatentImage", .display_name = "EmptySD3LatentImage", .category = "latent/sd3",
     .description = "An empty 16-channel latent (FLUX.1's); sides are rounded down to multiples of 16.",
     .inputs = {INT_IN("width", 16, 2048, 16, 1024), INT_IN("height", 16, 2048, 16, 1024),
                INT_IN("batch_size", 1, 16, 1, 1)},
     .outputs = {"LATENT"}, .output_names = {"LATENT"}, .eval = kiln_node_empty_flux2_latent},
    {.name = "LoadImage", .display_name = "Load Image", .category = "image",
     .description = "An image of the input folder (POST /upload/image), decoded strictly to RGB.",
     .inputs = {{.name = "image", .type = "COMBO", .model_kind = KILN_INPUT_IMAGES}},
     .outputs = {"IMAGE", "MASK"}, .output_names = {"IMAGE", "MASK"}, .eval = kiln_node_load_image},
    {.name = "ImageScaleToTotalPixels", .display_name = "Scale Image to Total Pixels", .category = "image/upscaling",
     .description = "Resizes the image to about megapixels x 1024 x 1024 pixels, sides rounded to resolution_steps.",
     .inputs = {LINK("image", "IMAGE"), COMBO_IN("upscale_method", upscale_methods, "nearest-exact"),
                FLOAT_IN("megapixels", 0.01, 16.0, 0.01, 1.0), INT_IN("resolution_steps", 1, 256, 1, 1)},
     .outputs = {"IMAGE"}, .output_names = {"IMAGE"}, .eval = kiln_node_image_scale_to_total_pixels},
    {.name = "GetImageSize", .display_name = "Get Image Size", .category = "image",
     .description = "The width, height and batch size of an image.",
     .inputs = {LINK("image", "IMAGE")},
     .outputs = {"INT", "INT", "INT"}, .output_names = {"width", "height", "batch_size"},
     .eval = kiln_node_get_image_size},
    {.name = "VAEEncode", .display_name = "VAE Encode", .category = "latent",
     .description = "The latent of an image (kiln encodes it when the image is made: a reference or an init image).",
     .inputs = {LINK("pixels", "IMAGE"), LINK("vae", "VAE")},
     .outputs = {"LATENT"}, .output_names = {"LATENT"}, .eval = kiln_node_vae_encode},
    {.name = "RandomNoise", .display_name = "RandomNoise", .category = "sampling/custom_sampling/noise",
     .description = "The seed of the initial noise (image i of a batch uses seed + i).",
     .inputs = {INT_IN("noise_seed", 0, SEED_MAX, 1, 0)},
     .outputs = {"NOISE"}, .output_names = {"NOISE"}, .eval = kiln_node_random_noise},
    {.name = "KSamplerSelect", .display_name = "KSamplerSelect", .category = "sampling/custom_sampling/samplers",
     .description = "The sampler; kiln implements the Euler flow-matching sampler.",
     .inputs = {COMBO_IN("sampler_name", samplers, "euler")},
     .outputs = {"SAMPLER"}, .output_names = {"SAMPLER"}, .eval = kiln_node_ksampler_select},
    {.name = "Flux2Scheduler", .display_name = "Flux2Scheduler", .category = "sampling/custom_sampling/schedulers",
     .description = "The FLUX.2 empirical-mu sigma schedule for a number of steps at an image size (ComfyUI's, "
                    "in float32).",
     .inputs = {INT_IN("steps", 1, 4096, 1, 20), INT_IN("width", 16, 16384, 1, 1024),
                INT_IN("height", 16, 16384, 1, 1024)},
     .outputs = {"SIGMAS"}, .output_names = {"SIGMAS"}, .eval = kiln_node_flux2_scheduler},
    {.name = "BasicScheduler", .display_name = "BasicScheduler", .category = "sampling/custom_sampling/schedulers",
     .description = "ComfyUI's sigma schedule for the model's shift; denoise < 1 keeps the tail of a longer one.",
     .inputs = {LINK("model", "MODEL"), COMBO_IN("scheduler", comfy_schedulers, "simple"),
                INT_IN("steps", 1, 10000, 1, 20), FLOAT_IN("denoise", 0.0, 1.0, 0.01, 1.0)},
     .outputs = {"SIGMAS"}, .output_names = {"SIGMAS"}, .eval = kiln_node_basic_scheduler},
    {.name = "BasicGuider", .display_name = "BasicGuider", .category = "sampling/custom_sampling/guiders",
     .description = "The model and one conditioning, without classifier-free guidance (FLUX.1).",
     .inputs = {LINK("model", "MODEL"), LINK("conditioning", "CONDITIONING")},
     .outputs = {"GUIDER"}, .output_names = {"GUIDER"}, .eval = kiln_node_basic_guider},
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
                COMBO_IN("scheduler", comfy_schedulers, "simple"), LINK("positive", "CONDITIONING"),
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

/* model_dirs.h - model files found by name in the model folders, the way ComfyUI finds them.
 *
 * A models root holds kind folders: diffusion_models/ (or unet/), text_encoders/ (or clip/), vae/, loras/ and
 * checkpoints/ (ComfyUI's all-in-one files, CheckpointLoaderSimple). A model name
 * is a plain file name found directly in one of the kind's folders ("flux-2-klein-4b.safetensors"); names with a
 * '/', a '\\', a NUL or a leading '.' are never valid, so a name can never leave its folder.
 */
#ifndef KILN_GRAPH_MODEL_DIRS_H
#define KILN_GRAPH_MODEL_DIRS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/status.h"

typedef enum kiln_model_kind {
    KILN_MODELS_DIFFUSION = 0, /* diffusion_models, unet */
    KILN_MODELS_TEXT_ENCODER,  /* text_encoders, clip */
    KILN_MODELS_VAE,           /* vae */
    KILN_MODELS_LORA,          /* loras */
    KILN_MODELS_CHECKPOINT,    /* checkpoints: model, text encoders and VAE in one file */
    KILN_MODELS_KIND_COUNT
} kiln_model_kind;

/* "diffusion_models", "text_encoders", "vae", "loras", "checkpoints". */
const char *kiln_model_kind_folder(kiln_model_kind k);
/* Maps a folder name (incl. the aliases unet, clip) to a kind; false if unknown. */
bool kiln_model_kind_from_folder(const char *folder, kiln_model_kind *out);

/* A JSON array of the sorted file names of a kind (*.safetensors, *.gguf, *.sft) under root. root NULL or
 * missing folders give an empty array. NULL only when out of memory. */
json_t *kiln_models_list(const char *root, kiln_model_kind k);

/* A new array of the names of list (an array of strings) that end in ext (ComfyUI-GGUF's unet_gguf list: ".gguf");
 * ext NULL: a new reference to list itself. NULL only when out of memory. */
json_t *kiln_models_with_ext(json_t *list, const char *ext);

/* true if name is a plain file name (see above). */
bool kiln_model_name_ok(const char *name);

/* Full path of the model `name` of kind k: KILN_E_NOT_FOUND if absent, KILN_E_INVALID for a bad name. */
kiln_status kiln_models_resolve(const char *root, kiln_model_kind k, const char *name, char *path, size_t cap,
                                kiln_err *err);

/* A COMBO input whose options are the images of the server's input folder (LoadImage), not a model kind. */
#define KILN_INPUT_IMAGES (-2)

/* A JSON array of the sorted image file names (.png, .jpg, .jpeg, .webp) directly in dir (what POST
 * /upload/image wrote). dir NULL or missing: empty. NULL only when out of memory. */
json_t *kiln_input_images_list(const char *dir);

#endif

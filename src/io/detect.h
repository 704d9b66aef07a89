/* detect.h - which model an open checkpoint holds, and in which naming (layout), from its tensor names and
 * shapes alone (no config file needed).
 *
 *     kiln_detect_result d;
 *     kiln_detect(ck, &d);
 *     printf("%s (%s layout): %s\n", d.id, kiln_layout_name(d.layout), d.desc);
 *         // "flux2-klein-4b (bfl layout): FLUX.2 DiT, hidden 3072, 5 double + 20 single blocks, text width 7680"
 *
 * Rules (facts from spec/flux2-klein.md 1.6, 1.7, 2.7, 3.5, 6):
 *   FLUX.2 DiT   bfl:       double_stream_modulation_img.lin.weight (ComfyUI's test for FLUX.2)
 *                diffusers: double_stream_modulation_img.linear.weight
 *   FLUX.1 DiT   bfl:       double_blocks.0.img_mod.lin.weight;  diffusers: transformer_blocks.0.norm1.linear.weight
 *   Qwen3        hf:        [model.]embed_tokens.weight + layers.0.self_attn.q_norm.weight (q/k norms: Qwen3, not 2)
 *   FLUX.2 VAE   bn.running_mean (FLUX.2's latent batch-norm) + decoder.mid_block.* (diffusers) or
 *                decoder.mid.* (bfl)
 *   FLUX.1 VAE   the same names without bn.running_mean ("flux1-vae" with 16 latent channels)
 *   CLIP text    text_model.embeddings.token_embedding.weight ("clip-l": hidden 768, 12 layers)
 *   T5 encoder   shared.weight or encoder.embed_tokens.weight + encoder.block.0...q.weight ("t5-xxl": 4096, 24)
 * A checkpoint matching none is KILN_FAMILY_UNKNOWN; the id then is "unknown". Names are looked up with
 * kiln_st_find, so prefixed (ComfyUI `model.diffusion_model.`) files are recognised too.
 * Named sizes: "flux2-klein-4b" (hidden 3072, 5 double, 20 single, text 7680), "qwen3-4b" (hidden 2560, 36
 * layers), "flux1-dev-like" (3072, 19, 38); other sizes get the family id ("flux2-dit", "qwen3", ...), which is
 * what the tiny oracle models are.
 */
#ifndef KILN_IO_DETECT_H
#define KILN_IO_DETECT_H

#include <stdint.h>

#include "io/gguf.h"
#include "io/gguf_te.h"
#include "io/safetensors.h"

typedef enum kiln_family {
    KILN_FAMILY_UNKNOWN = 0,
    KILN_FAMILY_FLUX2_DIT,
    KILN_FAMILY_QWEN3,
    KILN_FAMILY_FLUX2_VAE,
    KILN_FAMILY_FLUX1_DIT,
    KILN_FAMILY_FLUX1_VAE,  /* AutoencoderKL without batch norm (FLUX.1's ae) */
    KILN_FAMILY_CLIP_TEXT,  /* text_model.embeddings.token_embedding.weight (CLIP-L: 768 x 12 layers) */
    KILN_FAMILY_T5,         /* shared.weight / encoder.embed_tokens.weight + encoder.block.0 (T5 v1.1 XXL) */
} kiln_family;

typedef enum kiln_layout {
    KILN_LAYOUT_UNKNOWN = 0,
    KILN_LAYOUT_BFL,       /* BFL / ComfyUI single-file names */
    KILN_LAYOUT_DIFFUSERS, /* diffusers folder names */
    KILN_LAYOUT_HF,        /* transformers names */
    KILN_LAYOUT_LLAMACPP,  /* llama.cpp GGUF names (a Qwen3 / T5 text encoder GGUF: io/gguf_te.h) */
} kiln_layout;

typedef struct kiln_detect_result {
    kiln_family family;
    kiln_layout layout;
    char id[32];    /* "flux2-klein-4b", "flux2-dit", "qwen3-4b", "qwen3", "flux2-vae", "flux1-dit", "unknown" */
    char desc[256]; /* one human line with the sizes found */
    int64_t hidden;   /* model width (DiT hidden, Qwen hidden); 0 if n/a */
    int64_t context;  /* DiT text-feature width; 0 if n/a */
    int n_double, n_single; /* DiT blocks */
    int n_layers;           /* Qwen decoder layers */
    int has_encoder, has_decoder; /* VAE halves present */
} kiln_detect_result;

/* Never fails: an unrecognised checkpoint is KILN_FAMILY_UNKNOWN. */
void kiln_detect(const kiln_st_file *f, kiln_detect_result *out);
/* The same rules on a GGUF file's tensor names (also tried with a `model.diffusion_model.` prefix); a Qwen3 / T5
 * text encoder in llama.cpp's naming (io/gguf_te.h) by its validated metadata (layout "llama.cpp"; a file of that
 * architecture kiln refuses is "unknown" with the reason in desc). */
void kiln_detect_gguf(const kiln_gguf_file *g, kiln_detect_result *out);
const char *kiln_family_name(kiln_family f); /* "flux2-dit", "qwen3", "flux2-vae", "flux1-dit", "flux1-vae",
                                               "clip-text", "t5-encoder", "unknown" */
const char *kiln_layout_name(kiln_layout l); /* "bfl", "diffusers", "hf", "llama.cpp", "unknown" */

#endif

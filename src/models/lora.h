/* lora.h - LoRA adapters for the FLUX.2 DiT: read adapter files, map them onto the model's weights, apply them
 * at run time beside the base matmuls (compute/lora.h) - several at once, each with its own strength - and take
 * them off again, without ever copying a base weight.
 *
 *     kiln_lora_set *set;
 *     kiln_lora_spec specs[] = {{"style.safetensors", 0.8f}, {"detail.safetensors", 1.0f}};
 *     KILN_TRY(kiln_lora_attach(dit, be, specs, 2, &set, &err));   // terms hang on dit's kiln_tensors
 *     ... generate ...
 *     kiln_lora_detach(set);                                       // dit as loaded again
 *
 * Formats (what FLUX.2 adapters ship in; the facts from diffusers' Flux2LoraLoaderMixin.lora_state_dict):
 *   diffusers   transformer.<diffusers module>.lora_A.weight / .lora_B.weight (transformer_blocks.N.attn.to_q,
 *               add_k_proj, to_out.0, ff.linear_in, single_transformer_blocks.N.attn.to_qkv_mlp_proj, x_embedder,
 *               norm_out.linear, ...): scale 1
 *   PEFT        base_model.model.<BFL module>.lora_A/lora_B (read as diffusion_model.<BFL module>)
 *   BFL / ai-toolkit  diffusion_model.<BFL module>.lora_A/lora_B (or lora_down/lora_up; double_blocks.N.img_attn.qkv,
 *               single_blocks.N.linear1, img_in, final_layer.adaLN_modulation.1, ...; diffusers block names are
 *               accepted after the prefix too): scale 1
 *   kohya / ComfyUI  lora_unet_<BFL module with '_' for '.'>.lora_down.weight / .lora_up.weight / .alpha:
 *               scale alpha / rank (alpha absent: rank)
 * A module maps onto the model whichever layout it was loaded in: a fused BFL qkv adapter onto the three split
 * to_q/to_k/to_v weights of a diffusers folder, a to_q adapter onto the first third of a fused qkv, the diffusers
 * norm_out rows (scale; shift) onto BFL's (shift; scale). The term added is x A^T (strength * scale * B)^T.
 * A BFL-named final_layer.adaLN_modulation.1 adapter lands on the BFL rows as trained (ComfyUI's semantics);
 * diffusers 0.42.1 maps it onto norm_out.linear unswapped, so the two differ there (docs/pitfalls.md F9).
 * Refused (KILN_E_FORMAT / UNSUPPORTED, naming the file and the key): a key that names no DiT weight of this
 * model, text-encoder keys, lora_A without lora_B (or the reverse), ranks that differ between A and B, A's width
 * or B's height not the target's, a non-finite or non-positive alpha, alpha outside the kohya format, DoRA
 * (dora_scale), LoKr/LoHa keys, a non-float tensor, an empty file, a non-finite strength. */
#ifndef KILN_MODELS_LORA_H
#define KILN_MODELS_LORA_H

#include "compute/lora.h"
#include "models/flux2_dit.h"

typedef struct kiln_lora_spec {
    const char *path;
    float strength;
} kiln_lora_spec;

typedef struct kiln_lora_set kiln_lora_set;

/* Reads every adapter, checks it fully, then attaches all terms (nothing is attached on failure). The terms' A
 * and B live in f32 buffers placed on be. dit must have no adapters attached. */
kiln_status kiln_lora_attach(kiln_flux2_dit *dit, kiln_backend *be, const kiln_lora_spec *specs, int n,
                             kiln_lora_set **out, kiln_err *err);
/* The same adapters merged instead: each adapted weight becomes W + sum of B A, computed in f32 from the widened
 * (dequantised) base and stored as a new tensor placed on be - bf16 when the base is bf16 and the backend runs
 * FAST (what a bf16 fuse gives; the FAST kernels keep running), f32 otherwise (EXACT, quantised bases) - swapped
 * into the model until kiln_lora_detach puts the loaded weights back. Costs one copy of each adapted weight; saves
 * the two low-rank products per adapted matmul, and works on backends without run-time adapters (CUDA). */
kiln_status kiln_lora_attach_merged(kiln_flux2_dit *dit, kiln_backend *be, const kiln_lora_spec *specs, int n,
                                    kiln_lora_set **out, kiln_err *err);
/* One adapter from a safetensors image in memory (the fuzzer; buf must outlive the call only). */
kiln_status kiln_lora_attach_image(kiln_flux2_dit *dit, kiln_backend *be, const void *image, size_t len,
                                   float strength, bool merge, kiln_lora_set **out, kiln_err *err);
/* Takes the terms off the model, unplaces and frees them. NULL is a no-op. */
void kiln_lora_detach(kiln_lora_set *set);
/* Terms attached (one per adapted module and model weight). */
int kiln_lora_term_count(const kiln_lora_set *set);
/* The largest rank of the terms a matmul runs beside its weight (0 when merged or none): each such matmul of M
 * rows allocates an [M, rank] f32 intermediate for its time (compute/lora.c), which the memory plan counts. */
int64_t kiln_lora_max_rank(const kiln_lora_set *set);

/* Parses "FILE[:STRENGTH]" (strength default 1; a trailing ":number" is the strength, so paths with ':' work when
 * they end in a strength). KILN_E_INVALID for an empty path or a strength that is not a finite number. */
kiln_status kiln_lora_parse_arg(const char *arg, char *path, size_t cap, float *strength, kiln_err *err);

#endif

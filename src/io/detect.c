/* detect.c - model family and layout from tensor names (see detect.h for the rules). */
#include "io/detect.h"

#include <stdio.h>
#include <string.h>

/* The rules read names and shapes only, through this view, so that safetensors and GGUF files share them. */
typedef struct names {
    const void *file;
    /* the tensor's shape (PyTorch order) if it exists */
    bool (*shape)(const void *file, const char *name, int *ndim, const int64_t **shape);
    size_t count;
} names;

/* A found tensor: its shape, for dim(). */
typedef struct found {
    int ndim;
    const int64_t *shape;
} found;

static const found *has_(const names *f, const char *name, found *slot) {
    return f->shape(f->file, name, &slot->ndim, &slot->shape) ? slot : NULL;
}
/* (a compound literal gives each lookup its own slot, so has() can be used inside expressions) */
#define has(f, name) has_((f), (name), &(found){0, NULL})

/* Counts consecutive blocks pattern with "%d" replaced by 0, 1, 2, ... that exist. (Built by hand, not
 * with a non-literal printf format, which -Wformat=2 rightly refuses.) */
static int count_blocks(const names *f, const char *pattern) {
    char name[256];
    const char *hole = strstr(pattern, "%d");
    int n = 0;
    for (;;) {
        snprintf(name, sizeof name, "%.*s%d%s", (int)(hole - pattern), pattern, n, hole + 2);
        if (!has(f, name)) return n;
        n++;
    }
}

static int64_t dim(const found *t, int i) { return t && i < t->ndim ? t->shape[i] : 0; }

static void detect_flux2(const names *f, kiln_detect_result *r, bool bfl) {
    r->family = KILN_FAMILY_FLUX2_DIT;
    r->layout = bfl ? KILN_LAYOUT_BFL : KILN_LAYOUT_DIFFUSERS;
    r->hidden = dim(has(f, bfl ? "img_in.weight" : "x_embedder.weight"), 0);
    r->context = dim(has(f, bfl ? "txt_in.weight" : "context_embedder.weight"), 1);
    r->n_double = count_blocks(f, bfl ? "double_blocks.%d.img_attn.qkv.weight" : "transformer_blocks.%d.attn.to_q.weight");
    r->n_single = count_blocks(f, bfl ? "single_blocks.%d.linear1.weight"
                                      : "single_transformer_blocks.%d.attn.to_qkv_mlp_proj.weight");
    bool klein4b = r->hidden == 3072 && r->context == 7680 && r->n_double == 5 && r->n_single == 20;
    bool klein9b = r->hidden == 4096 && r->context == 12288 && r->n_double == 8 && r->n_single == 24;
    snprintf(r->id, sizeof r->id, "%s", klein4b ? "flux2-klein-4b" : klein9b ? "flux2-klein-9b" : "flux2-dit");
    snprintf(r->desc, sizeof r->desc, "FLUX.2%s DiT, hidden %lld, %d double + %d single blocks, text width %lld",
             klein4b ? " [klein] 4B" : klein9b ? " [klein] 9B" : "", (long long)r->hidden, r->n_double, r->n_single,
             (long long)r->context);
}

static void detect_flux1(const names *f, kiln_detect_result *r, bool bfl) {
    r->family = KILN_FAMILY_FLUX1_DIT;
    r->layout = bfl ? KILN_LAYOUT_BFL : KILN_LAYOUT_DIFFUSERS;
    r->hidden = dim(has(f, bfl ? "img_in.weight" : "x_embedder.weight"), 0);
    r->context = dim(has(f, bfl ? "txt_in.weight" : "context_embedder.weight"), 1);
    r->n_double = count_blocks(f, bfl ? "double_blocks.%d.img_mod.lin.weight" : "transformer_blocks.%d.norm1.linear.weight");
    r->n_single = count_blocks(f, bfl ? "single_blocks.%d.linear1.weight" : "single_transformer_blocks.%d.norm.linear.weight");
    bool guidance = has(f, bfl ? "guidance_in.in_layer.weight"
                               : "time_text_embed.guidance_embedder.linear_1.weight") != NULL;
    bool dev = r->hidden == 3072 && r->n_double == 19 && r->n_single == 38;
    snprintf(r->id, sizeof r->id, "%s", dev ? (guidance ? "flux1-dev" : "flux1-schnell") : "flux1-dit");
    snprintf(r->desc, sizeof r->desc, "FLUX.1 DiT, hidden %lld, %d double + %d single blocks, text width %lld, %s",
             (long long)r->hidden, r->n_double, r->n_single, (long long)r->context,
             guidance ? "guidance-distilled" : "no guidance embedding");
}

static void detect_qwen3(const names *f, kiln_detect_result *r, const found *emb,
                         const char *layer_fmt) {
    r->family = KILN_FAMILY_QWEN3;
    r->layout = KILN_LAYOUT_HF;
    r->hidden = dim(emb, 1);
    r->n_layers = count_blocks(f, layer_fmt);
    bool is4b = r->hidden == 2560 && r->n_layers == 36, is8b = r->hidden == 4096 && r->n_layers == 36;
    snprintf(r->id, sizeof r->id, "%s", is4b ? "qwen3-4b" : is8b ? "qwen3-8b" : "qwen3");
    snprintf(r->desc, sizeof r->desc, "Qwen3%s text encoder, hidden %lld, %d layers, vocabulary %lld%s",
             is4b ? "-4B" : is8b ? "-8B (klein 9B)" : "", (long long)r->hidden, r->n_layers, (long long)dim(emb, 0),
             has(f, "lm_head.weight") ? ", with lm_head" : "");
}

static void detect_vae(const names *f, kiln_detect_result *r, bool bfl) {
    r->family = KILN_FAMILY_FLUX2_VAE;
    r->layout = bfl ? KILN_LAYOUT_BFL : KILN_LAYOUT_DIFFUSERS;
    r->has_decoder = has(f, "decoder.conv_in.weight") != NULL;
    r->has_encoder = has(f, "encoder.conv_in.weight") != NULL;
    const found *zin = has(f, "decoder.conv_in.weight");
    snprintf(r->id, sizeof r->id, "flux2-vae");
    snprintf(r->desc, sizeof r->desc, "FLUX.2 autoencoder (%s%s%s), %lld latent channels, %lld batch-norm channels",
             r->has_encoder ? "encoder" : "", r->has_encoder && r->has_decoder ? " + " : "",
             r->has_decoder ? "decoder" : "", (long long)dim(zin, 1), (long long)dim(has(f, "bn.running_mean"), 0));
}

/* FLUX.1's AutoencoderKL: the FLUX.2 VAE's names without the latent batch norm (ae.safetensors: BFL names). */
static void detect_flux1_vae(const names *f, kiln_detect_result *r, bool bfl) {
    r->family = KILN_FAMILY_FLUX1_VAE;
    r->layout = bfl ? KILN_LAYOUT_BFL : KILN_LAYOUT_DIFFUSERS;
    r->has_decoder = has(f, "decoder.conv_in.weight") != NULL;
    r->has_encoder = has(f, "encoder.conv_in.weight") != NULL;
    const found *zin = has(f, "decoder.conv_in.weight");
    snprintf(r->id, sizeof r->id, "%s", dim(zin, 1) == 16 ? "flux1-vae" : "autoencoder-kl");
    snprintf(r->desc, sizeof r->desc, "FLUX.1 autoencoder (AutoencoderKL: %s%s%s), %lld latent channels",
             r->has_encoder ? "encoder" : "", r->has_encoder && r->has_decoder ? " + " : "",
             r->has_decoder ? "decoder" : "", (long long)dim(zin, 1));
}

static void detect_clip(const names *f, kiln_detect_result *r, const found *emb) {
    r->family = KILN_FAMILY_CLIP_TEXT;
    r->layout = KILN_LAYOUT_HF;
    r->hidden = dim(emb, 1);
    r->n_layers = count_blocks(f, "text_model.encoder.layers.%d.layer_norm1.weight");
    bool l = r->hidden == 768 && r->n_layers == 12;
    snprintf(r->id, sizeof r->id, "%s", l ? "clip-l" : "clip-text");
    snprintf(r->desc, sizeof r->desc, "CLIP%s text encoder, hidden %lld, %d layers, vocabulary %lld", l ? "-L" : "",
             (long long)r->hidden, r->n_layers, (long long)dim(emb, 0));
}

static void detect_t5(const names *f, kiln_detect_result *r, const found *emb) {
    r->family = KILN_FAMILY_T5;
    r->layout = KILN_LAYOUT_HF;
    r->hidden = dim(emb, 1);
    r->n_layers = count_blocks(f, "encoder.block.%d.layer.0.SelfAttention.q.weight");
    bool xxl = r->hidden == 4096 && r->n_layers == 24;
    snprintf(r->id, sizeof r->id, "%s", xxl ? "t5-xxl" : "t5-encoder");
    snprintf(r->desc, sizeof r->desc, "T5%s encoder, d_model %lld, %d layers, vocabulary %lld", xxl ? " v1.1 XXL" : "",
             (long long)r->hidden, r->n_layers, (long long)dim(emb, 0));
}

static void detect(const names *f, kiln_detect_result *r) {
    memset(r, 0, sizeof *r);
    const found *emb;
    if (has(f, "double_stream_modulation_img.lin.weight")) detect_flux2(f, r, true);
    else if (has(f, "double_stream_modulation_img.linear.weight")) detect_flux2(f, r, false);
    else if (has(f, "double_blocks.0.img_mod.lin.weight")) detect_flux1(f, r, true);
    else if (has(f, "transformer_blocks.0.norm1.linear.weight") && has(f, "x_embedder.weight")) detect_flux1(f, r, false);
    else if ((emb = has(f, "model.embed_tokens.weight")) && has(f, "model.layers.0.self_attn.q_norm.weight"))
        detect_qwen3(f, r, emb, "model.layers.%d.input_layernorm.weight");
    else if ((emb = has(f, "embed_tokens.weight")) && has(f, "layers.0.self_attn.q_norm.weight"))
        detect_qwen3(f, r, emb, "layers.%d.input_layernorm.weight");
    else if (has(f, "bn.running_mean") && (has(f, "decoder.mid_block.resnets.0.conv1.weight") ||
                                           has(f, "encoder.mid_block.resnets.0.conv1.weight")))
        detect_vae(f, r, false);
    else if (has(f, "bn.running_mean") && (has(f, "decoder.mid.block_1.conv1.weight") ||
                                           has(f, "encoder.mid.block_1.conv1.weight")))
        detect_vae(f, r, true);
    else if (has(f, "decoder.mid_block.resnets.0.conv1.weight") || has(f, "encoder.mid_block.resnets.0.conv1.weight"))
        detect_flux1_vae(f, r, false);
    else if (has(f, "decoder.mid.block_1.conv1.weight") || has(f, "encoder.mid.block_1.conv1.weight"))
        detect_flux1_vae(f, r, true);
    else if ((emb = has(f, "text_model.embeddings.token_embedding.weight")))
        detect_clip(f, r, emb);
    else if (((emb = has(f, "shared.weight")) || (emb = has(f, "encoder.embed_tokens.weight"))) &&
             has(f, "encoder.block.0.layer.0.SelfAttention.q.weight"))
        detect_t5(f, r, emb);
    else {
        snprintf(r->id, sizeof r->id, "unknown");
        snprintf(r->desc, sizeof r->desc, "no known model's tensor names (%zu tensors)", f->count);
    }
}

static bool st_shape(const void *file, const char *name, int *ndim, const int64_t **shape) {
    const kiln_st_tensor *t = kiln_st_find(file, name);
    if (t) *ndim = t->ndim, *shape = t->shape;
    return t != NULL;
}

void kiln_detect(const kiln_st_file *f, kiln_detect_result *r) {
    names n = {f, st_shape, kiln_st_count(f)};
    detect(&n, r);
}

/* GGUF files of diffusion models use the BFL names; some keep ComfyUI's prefix. */
static bool gguf_shape(const void *file, const char *name, int *ndim, const int64_t **shape) {
    const kiln_gguf_tensor *t = kiln_gguf_find(file, name);
    if (!t) {
        char full[300];
        snprintf(full, sizeof full, "model.diffusion_model.%s", name);
        t = kiln_gguf_find(file, full);
    }
    if (t) *ndim = t->ndim, *shape = t->shape;
    return t != NULL;
}

/* A llama.cpp-named text encoder (io/gguf_te.h): described from its validated metadata. */
static void detect_gguf_te(const kiln_gguf_file *g, const kiln_gguf_te *te, kiln_detect_result *r) {
    memset(r, 0, sizeof *r);
    r->layout = KILN_LAYOUT_LLAMACPP;
    r->hidden = te->hidden;
    r->n_layers = te->n_layers;
    const char *q = kiln_gguf_find(g, "output.weight") ? ", with output.weight (lm_head, unused)" : "";
    if (te->kind == KILN_GGUF_TE_QWEN3) {
        bool is4b = te->hidden == 2560 && te->n_layers == 36, is8b = te->hidden == 4096 && te->n_layers == 36;
        r->family = KILN_FAMILY_QWEN3;
        snprintf(r->id, sizeof r->id, "%s", is4b ? "qwen3-4b" : is8b ? "qwen3-8b" : "qwen3");
        snprintf(r->desc, sizeof r->desc, "Qwen3%s text encoder (llama.cpp GGUF), hidden %d, %d layers, %d q / %d kv "
                 "heads x %d, vocabulary %lld, rms eps %g, rope theta %g%s", is4b ? "-4B" : is8b ? "-8B (klein 9B)" : "",
                 te->hidden, te->n_layers, te->n_heads, te->n_kv_heads, te->head_dim, (long long)te->vocab, te->eps,
                 te->theta, q);
    } else {
        bool xxl = te->hidden == 4096 && te->n_layers == 24;
        r->family = KILN_FAMILY_T5;
        snprintf(r->id, sizeof r->id, "%s", xxl ? "t5-xxl" : "t5-encoder");
        snprintf(r->desc, sizeof r->desc, "T5%s encoder (llama.cpp GGUF), d_model %d, %d layers, %d heads x %d, "
                 "vocabulary %lld, %d buckets, eps %g%s", xxl ? " v1.1 XXL" : "", te->hidden, te->n_layers,
                 te->n_heads, te->head_dim, (long long)te->vocab, te->num_buckets, te->eps, q);
    }
}

void kiln_detect_gguf(const kiln_gguf_file *g, kiln_detect_result *r) {
    kiln_gguf_te te;
    kiln_err e = {0};
    kiln_status s = kiln_gguf_te_check(g, &te, &e);
    if (s == KILN_OK && te.kind != KILN_GGUF_TE_NONE) {
        detect_gguf_te(g, &te, r);
        return;
    }
    if (s != KILN_OK) { /* a text encoder's architecture, but a file kiln refuses: say why */
        memset(r, 0, sizeof *r);
        snprintf(r->id, sizeof r->id, "unknown");
        snprintf(r->desc, sizeof r->desc, "%s", e.msg);
        return;
    }
    names n = {g, gguf_shape, kiln_gguf_count(g)};
    detect(&n, r);
}

const char *kiln_family_name(kiln_family fam) {
    switch (fam) {
    case KILN_FAMILY_FLUX2_DIT: return "flux2-dit";
    case KILN_FAMILY_QWEN3: return "qwen3";
    case KILN_FAMILY_FLUX2_VAE: return "flux2-vae";
    case KILN_FAMILY_FLUX1_DIT: return "flux1-dit";
    case KILN_FAMILY_FLUX1_VAE: return "flux1-vae";
    case KILN_FAMILY_CLIP_TEXT: return "clip-text";
    case KILN_FAMILY_T5: return "t5-encoder";
    default: return "unknown";
    }
}

const char *kiln_layout_name(kiln_layout l) {
    switch (l) {
    case KILN_LAYOUT_BFL: return "bfl";
    case KILN_LAYOUT_DIFFUSERS: return "diffusers";
    case KILN_LAYOUT_HF: return "hf";
    case KILN_LAYOUT_LLAMACPP: return "llama.cpp";
    default: return "unknown";
    }
}

/* openai_graph.c - an images request as the ComfyUI graph a user would build for it, so it runs through the same
 * nodes, queue and /history as any /prompt:
 *
 *   FLUX.2 [klein]  UNETLoader -> (LoraLoaderModelOnly)* -> KSampler; CLIPLoader type flux2 -> CLIPTextEncode
 *                   (-> ReferenceLatent per edit image, each LoadImage -> VAEEncode); negative ConditioningZeroOut
 *                   (of the conditioning with its references, as ComfyUI keeps them) or CLIPTextEncode;
 *                   EmptyFlux2LatentImage; VAEDecode; SaveImage.
 *   FLUX.1          the official ComfyUI FLUX.1 template's shape: DualCLIPLoader type flux (T5, CLIP-L) ->
 *                   CLIPTextEncode -> FluxGuidance (the distilled guidance, diffusers' guidance_scale) as the
 *                   positive, ConditioningZeroOut as the negative, KSampler cfg 1, EmptySD3LatentImage.
 * Node ids are fixed per role (loras 20.., images 30.., references 50..) so a graph reads the same in /history. */
#include <stdio.h>

#include "server/openai.h"

static json_t *out0(const char *id) /* output 0 of node id */ { return json_pack("[s,i]", id, 0); }

/* Adds one node; a failed json_pack (out of memory) leaves *ok false. */
static void node(json_t *g, bool *ok, const char *id, const char *cls, json_t *inputs) {
    json_t *n = inputs ? json_pack("{s:s, s:o}", "class_type", cls, "inputs", inputs) : NULL;
    if (!n || json_object_set_new(g, id, n) != 0) *ok = false;
}

/* Chains one ReferenceLatent per edit image onto conditioning `from`; returns the last node's id in out. */
static void references(json_t *g, bool *ok, const kiln_oai_params *p, const char *from, int base, char *out,
                       size_t cap) {
    snprintf(out, cap, "%s", from);
    for (int k = 0; k < p->n_images; k++) {
        char ref[16], enc[16];
        snprintf(ref, sizeof ref, "%d", base + k);
        snprintf(enc, sizeof enc, "%d", 31 + 2 * k);
        node(g, ok, ref, "ReferenceLatent", json_pack("{s:o, s:o}", "conditioning", out0(out), "latent", out0(enc)));
        snprintf(out, cap, "%s", ref);
    }
}

json_t *kiln_oai_graph(const kiln_oai_params *p) {
    json_t *g = json_object();
    bool ok = g != NULL;
    bool flux1 = p->family != KILN_OAI_FLUX2;
    node(g, &ok, "1", "UNETLoader", json_pack("{s:s, s:s}", "unet_name", p->unet, "weight_dtype", "default"));
    char model[16] = "1";
    for (int i = 0; i < p->n_loras; i++) {
        char id[16];
        snprintf(id, sizeof id, "%d", 20 + i);
        node(g, &ok, id, "LoraLoaderModelOnly", json_pack("{s:o, s:s, s:f}", "model", out0(model), "lora_name",
                                                     p->loras[i].name, "strength_model", p->loras[i].strength));
        snprintf(model, sizeof model, "%s", id);
    }
    if (flux1)
        node(g, &ok, "2", "DualCLIPLoader", json_pack("{s:s, s:s, s:s}", "clip_name1", p->clip2, "clip_name2", p->clip,
                                                 "type", "flux"));
    else
        node(g, &ok, "2", "CLIPLoader", json_pack("{s:s, s:s}", "clip_name", p->clip, "type", "flux2"));
    node(g, &ok, "3", "VAELoader", json_pack("{s:s}", "vae_name", p->vae));
    node(g, &ok, "4", "CLIPTextEncode", json_pack("{s:s, s:o}", "text", p->prompt, "clip", out0("2")));
    for (int k = 0; k < p->n_images; k++) {
        char load[16], enc[16];
        snprintf(load, sizeof load, "%d", 30 + 2 * k);
        snprintf(enc, sizeof enc, "%d", 31 + 2 * k);
        node(g, &ok, load, "LoadImage", json_pack("{s:s}", "image", p->images[k]));
        node(g, &ok, enc, "VAEEncode", json_pack("{s:o, s:o}", "pixels", out0(load), "vae", out0("3")));
    }
    char pos[16], neg[16] = "5";
    if (flux1) {
        node(g, &ok, "10", "FluxGuidance", json_pack("{s:o, s:f}", "conditioning", out0("4"), "guidance", p->guidance));
        snprintf(pos, sizeof pos, "10");
        node(g, &ok, "5", "ConditioningZeroOut", json_pack("{s:o}", "conditioning", out0("4")));
    } else {
        references(g, &ok, p, "4", 50, pos, sizeof pos);
        if (p->negative) {
            node(g, &ok, "5", "CLIPTextEncode", json_pack("{s:s, s:o}", "text", p->negative, "clip", out0("2")));
            references(g, &ok, p, "5", 60, neg, sizeof neg);
        } else {
            node(g, &ok, "5", "ConditioningZeroOut", json_pack("{s:o}", "conditioning", out0(pos)));
        }
    }
    node(g, &ok, "6", flux1 ? "EmptySD3LatentImage" : "EmptyFlux2LatentImage",
         json_pack("{s:i, s:i, s:i}", "width", p->width, "height", p->height, "batch_size", p->n));
    node(g, &ok, "7", "KSampler",
         json_pack("{s:o, s:I, s:i, s:f, s:s, s:s, s:o, s:o, s:o, s:f}", "model", out0(model), "seed", p->seed,
                   "steps", p->steps, "cfg", flux1 ? 1.0 : p->guidance, "sampler_name", "euler", "scheduler",
                   "simple", "positive", out0(pos), "negative", out0(neg), "latent_image", out0("6"), "denoise", 1.0));
    node(g, &ok, "8", "VAEDecode", json_pack("{s:o, s:o}", "samples", out0("7"), "vae", out0("3")));
    node(g, &ok, "9", "SaveImage", json_pack("{s:o, s:s}", "images", out0("8"), "filename_prefix", "openai/kiln"));
    if (ok) return g;
    json_decref(g);
    return NULL;
}

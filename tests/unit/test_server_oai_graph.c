/* test_server_oai_graph.c - the ComfyUI graphs the OpenAI images routes build (src/server/openai_graph.c): the
 * FLUX.2 text-to-image graph, an edit's LoadImage -> VAEEncode -> ReferenceLatent chain (on the negative too),
 * the LoRA chain, and the FLUX.1 template shape (DualCLIPLoader type flux, FluxGuidance, EmptySD3LatentImage,
 * KSampler cfg 1). The end-to-end runs are tests/cli/serve_openai_edits.sh. */
#include <string.h>

#include "server/openai.h"
#include "test.h"

static const char *cls(json_t *g, const char *id) {
    return json_string_value(json_object_get(json_object_get(g, id), "class_type"));
}
static json_t *in(json_t *g, const char *id, const char *name) {
    return json_object_get(json_object_get(json_object_get(g, id), "inputs"), name);
}
/* the node an input links to ("" when it is not a link) */
static const char *from(json_t *g, const char *id, const char *name) {
    json_t *l = in(g, id, name);
    return json_is_array(l) && json_array_size(l) == 2 ? json_string_value(json_array_get(l, 0)) : "";
}

static kiln_oai_params base(void) {
    kiln_oai_params p;
    memset(&p, 0, sizeof p);
    p.prompt = "a fox";
    snprintf(p.unet, sizeof p.unet, "flux-2-klein-4b.safetensors");
    snprintf(p.clip, sizeof p.clip, "qwen_3_4b.safetensors");
    snprintf(p.vae, sizeof p.vae, "flux2-vae.safetensors");
    p.width = 96;
    p.height = 64;
    p.n = 2;
    p.steps = 3;
    p.guidance = 1.0;
    p.seed = 7;
    return p;
}

static void test_flux2_t2i(void) {
    kiln_oai_params p = base();
    json_t *g = kiln_oai_graph(&p);
    CHECK(g != NULL);
    CHECK_EQ_INT(json_object_size(g), 9);
    CHECK_EQ_STR(cls(g, "2"), "CLIPLoader");
    CHECK_EQ_STR(json_string_value(in(g, "2", "type")), "flux2");
    CHECK_EQ_STR(cls(g, "5"), "ConditioningZeroOut");
    CHECK_EQ_STR(from(g, "5", "conditioning"), "4");
    CHECK_EQ_STR(cls(g, "6"), "EmptyFlux2LatentImage");
    CHECK_EQ_INT(json_integer_value(in(g, "6", "width")), 96);
    CHECK_EQ_INT(json_integer_value(in(g, "6", "batch_size")), 2);
    CHECK_EQ_STR(from(g, "7", "model"), "1");
    CHECK_EQ_STR(from(g, "7", "positive"), "4");
    json_decref(g);
}

static void test_flux2_edit_and_loras(void) {
    kiln_oai_params p = base();
    p.n_images = 3;
    for (int i = 0; i < 3; i++) snprintf(p.images[i], sizeof p.images[i], "openai-%d.png", i);
    p.n_loras = 2;
    snprintf(p.loras[0].name, sizeof p.loras[0].name, "a.safetensors");
    p.loras[0].strength = 0.8;
    snprintf(p.loras[1].name, sizeof p.loras[1].name, "b.safetensors");
    p.loras[1].strength = -0.5;
    json_t *g = kiln_oai_graph(&p);
    CHECK(g != NULL);
    CHECK_EQ_INT(json_object_size(g), 9 + 2 + 3 * 3);
    /* model: UNETLoader -> 20 -> 21 -> KSampler */
    CHECK_EQ_STR(cls(g, "20"), "LoraLoaderModelOnly");
    CHECK_EQ_STR(from(g, "20", "model"), "1");
    CHECK_EQ_STR(from(g, "21", "model"), "20");
    CHECK_EQ_STR(json_string_value(in(g, "21", "lora_name")), "b.safetensors");
    CHECK(fabs(json_number_value(in(g, "20", "strength_model")) - 0.8) < 1e-12);
    CHECK_EQ_STR(from(g, "7", "model"), "21");
    /* references: LoadImage 30/32/34 -> VAEEncode 31/33/35 -> ReferenceLatent 50 -> 51 -> 52 on the prompt */
    const char *loads[] = {"30", "32", "34"}, *encs[] = {"31", "33", "35"}, *refs[] = {"50", "51", "52"};
    for (int k = 0; k < 3; k++) {
        CHECK_EQ_STR(cls(g, loads[k]), "LoadImage");
        CHECK_EQ_STR(json_string_value(in(g, loads[k], "image")), p.images[k]);
        CHECK_EQ_STR(cls(g, encs[k]), "VAEEncode");
        CHECK_EQ_STR(from(g, encs[k], "pixels"), loads[k]);
        CHECK_EQ_STR(from(g, encs[k], "vae"), "3");
        CHECK_EQ_STR(cls(g, refs[k]), "ReferenceLatent");
        CHECK_EQ_STR(from(g, refs[k], "latent"), encs[k]);
        CHECK_EQ_STR(from(g, refs[k], "conditioning"), k ? refs[k - 1] : "4");
    }
    CHECK_EQ_STR(from(g, "7", "positive"), "52");
    /* the negative is the zeroed conditioning with the references kept (ComfyUI's ConditioningZeroOut) */
    CHECK_EQ_STR(from(g, "5", "conditioning"), "52");
    CHECK_EQ_STR(from(g, "7", "negative"), "5");
    json_decref(g);
    /* a negative prompt gets the same references */
    p.negative = "blurry";
    g = kiln_oai_graph(&p);
    CHECK_EQ_STR(cls(g, "5"), "CLIPTextEncode");
    CHECK_EQ_STR(from(g, "60", "conditioning"), "5");
    CHECK_EQ_STR(from(g, "62", "latent"), "35");
    CHECK_EQ_STR(from(g, "7", "negative"), "62");
    json_decref(g);
}

static void test_flux1(void) {
    kiln_oai_params p = base();
    p.family = KILN_OAI_FLUX1_DEV;
    snprintf(p.unet, sizeof p.unet, "flux1-dev.safetensors");
    snprintf(p.clip, sizeof p.clip, "clip_l.safetensors");
    snprintf(p.clip2, sizeof p.clip2, "t5xxl_fp16.safetensors");
    snprintf(p.vae, sizeof p.vae, "ae.safetensors");
    p.guidance = 3.5;
    json_t *g = kiln_oai_graph(&p);
    CHECK(g != NULL);
    CHECK_EQ_STR(cls(g, "2"), "DualCLIPLoader");
    CHECK_EQ_STR(json_string_value(in(g, "2", "type")), "flux");
    CHECK_EQ_STR(json_string_value(in(g, "2", "clip_name1")), "t5xxl_fp16.safetensors");
    CHECK_EQ_STR(json_string_value(in(g, "2", "clip_name2")), "clip_l.safetensors");
    CHECK_EQ_STR(cls(g, "10"), "FluxGuidance");
    CHECK(fabs(json_number_value(in(g, "10", "guidance")) - 3.5) < 1e-12);
    CHECK_EQ_STR(from(g, "7", "positive"), "10");
    CHECK_EQ_STR(cls(g, "6"), "EmptySD3LatentImage");
    CHECK(fabs(json_number_value(in(g, "7", "cfg")) - 1.0) < 1e-12); /* FluxGuidance is the guidance, not CFG */
    json_decref(g);
}

int main(void) {
    RUN(test_flux2_t2i);
    RUN(test_flux2_edit_and_loras);
    RUN(test_flux1);
    return test_summary();
}

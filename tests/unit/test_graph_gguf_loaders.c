/* test_graph_gguf_loaders.c - ComfyUI-GGUF's CLIPLoaderGGUF and DualCLIPLoaderGGUF (city96/ComfyUI-GGUF nodes.py:
 * CLIPLoader's / DualCLIPLoader's inputs without device): object_info lists them with those inputs and the .gguf
 * files of text_encoders/; the klein template and the FLUX.1 [dev] graph run with them in place of the stock
 * loaders, handing the engine the GGUF paths - the FLUX.1 pair in either order (the T5 GGUF is told from CLIP-L
 * by its tensors, through the llama.cpp name map). The engine is a TEST DOUBLE recording what it is given. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "fake_models.h"
#include "graph/graph.h"
#include "test.h"

static char models[256], outdir[256];

typedef struct fake_engine {
    int calls;
    char clip[512], clip2[512];
} fake_engine;

static kiln_status fake_generate(void *self, const kiln_gen_params *p, kiln_gen_progress_fn progress, void *pctx,
                                 kiln_gen_images *out, kiln_err *err) {
    (void)progress, (void)pctx;
    fake_engine *fe = self;
    fe->calls++;
    snprintf(fe->clip, sizeof fe->clip, "%s", p->clip_path ? p->clip_path : "");
    snprintf(fe->clip2, sizeof fe->clip2, "%s", p->clip2_path ? p->clip2_path : "");
    size_t one = (size_t)p->width * (size_t)p->height * 3;
    out->pixels = kiln_calloc(one * (size_t)p->batch, 1);
    if (!out->pixels) return KILN_FAIL(err, KILN_E_NOMEM, "oom");
    out->n = p->batch, out->width = p->width, out->height = p->height;
    return KILN_OK;
}

static void link_in(const char *rel_src, const char *dst) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s", models, dst);
    unlink(p);
    CHECK_MSG(symlink(test_src_path(rel_src), p) == 0, "symlink %s", p);
}

static void setup(void) {
    fake_models_make(models, sizeof models, "ggufnodes");
    snprintf(outdir, sizeof outdir, "/tmp/kiln-test-ggufnodes-out-%d", (int)getpid());
    mkdir(outdir, 0755);
    link_in("tests/data/gguf/te/qwen3-tiny-q8_0.gguf", "text_encoders/qwen3-tiny-q8_0.gguf");
    link_in("tests/data/gguf/te/t5-tiny-q8_0.gguf", "text_encoders/t5-tiny-q8_0.gguf");
    link_in("tests/data/tiny/flux1/comfy/text_encoders/clip_l.safetensors", "text_encoders/clip_l.safetensors");
    link_in("tests/data/tiny/flux1/comfy/diffusion_models/flux1-dev.safetensors", "diffusion_models/flux1-dev.safetensors");
    link_in("tests/data/tiny/flux1/comfy/vae/ae.safetensors", "vae/ae.safetensors");
}

static bool listed(json_t *input, const char *name) {
    json_t *list = json_array_get(input, 0);
    for (size_t i = 0; i < json_array_size(list); i++)
        if (!strcmp(json_string_value(json_array_get(list, i)), name)) return true;
    return false;
}

static void test_object_info(void) {
    json_t *all = kiln_graph_object_info(models, NULL, NULL);
    json_t *one = json_object_get(all, "CLIPLoaderGGUF"), *two = json_object_get(all, "DualCLIPLoaderGGUF");
    CHECK(one && two);
    json_t *req = json_object_get(json_object_get(one, "input"), "required");
    CHECK_EQ_INT(json_object_size(req), 2);
    CHECK(listed(json_object_get(req, "clip_name"), "qwen3-tiny-q8_0.gguf"));
    CHECK(json_object_get(req, "type") != NULL);
    CHECK(json_object_get(json_object_get(json_object_get(one, "input"), "optional"), "device") == NULL);
    req = json_object_get(json_object_get(two, "input"), "required");
    CHECK_EQ_INT(json_object_size(req), 3);
    CHECK(listed(json_object_get(req, "clip_name1"), "t5-tiny-q8_0.gguf"));
    CHECK(listed(json_object_get(req, "clip_name2"), "clip_l.safetensors"));
    CHECK(json_object_get(req, "type") != NULL);
    json_decref(all);
}

/* Runs the graph with the loader node `node` replaced by class `cls` and inputs set from key/value pairs. */
static void run(const char *rel, const char *node, const char *cls, const char *const *kv, size_t n_kv,
                fake_engine *fe) {
    json_error_t e;
    json_t *j = json_load_file(test_src_path(rel), 0, &e);
    CHECK_MSG(j != NULL, "%s: %s", rel, e.text);
    if (!j) return;
    json_t *nd = json_object_get(j, node), *in = json_object_get(nd, "inputs");
    json_object_set_new(nd, "class_type", json_string(cls));
    json_object_del(in, "device");
    for (size_t i = 0; i + 1 < n_kv; i += 2) json_object_set_new(in, kv[i], json_string(kv[i + 1]));
    json_t *errors = NULL;
    kiln_graph *g = NULL;
    kiln_status s = kiln_graph_parse(j, NULL, models, &g, &errors);
    char *txt = errors ? json_dumps(errors, 0) : NULL;
    CHECK_MSG(s == KILN_OK, "%s with %s: %s", rel, cls, txt ? txt : "?");
    free(txt);
    json_decref(errors);
    json_decref(j);
    if (!g) return;
    kiln_gen_engine eng = {.self = fe, .generate = fake_generate};
    kiln_exec_env env = {.models_root = models, .output_dir = outdir, .engine = &eng, .prompt_id = "p"};
    kiln_exec_hooks hooks = {0};
    json_t *outputs = NULL;
    char failed[64];
    kiln_err err = {0};
    CHECK_MSG(kiln_graph_execute(g, &env, &hooks, &outputs, failed, &err) == KILN_OK, "%s", err.msg);
    json_decref(outputs);
    kiln_graph_free(g);
}

static void test_klein_with_clip_loader_gguf(void) {
    fake_engine fe = {0};
    const char *kv[] = {"clip_name", "qwen3-tiny-q8_0.gguf"};
    run("tests/data/graphs/flux2_klein_t2i_template_api.json", "75:71", "CLIPLoaderGGUF", kv, 2, &fe);
    CHECK_EQ_INT(fe.calls, 1);
    CHECK_MSG(strstr(fe.clip, "text_encoders/qwen3-tiny-q8_0.gguf") != NULL, "clip %s", fe.clip);
}

static void test_flux1_with_dual_clip_loader_gguf(void) {
    for (int order = 0; order < 2; order++) {
        fake_engine fe = {0};
        const char *kv[] = {"clip_name1", order ? "clip_l.safetensors" : "t5-tiny-q8_0.gguf", "clip_name2",
                            order ? "t5-tiny-q8_0.gguf" : "clip_l.safetensors"};
        run("tests/data/bench/graphs/flux1-dev-2st.json", "11", "DualCLIPLoaderGGUF", kv, 4, &fe);
        CHECK_EQ_INT(fe.calls, 1);
        CHECK_MSG(strstr(fe.clip, "text_encoders/clip_l.safetensors") != NULL, "clip %s (order %d)", fe.clip, order);
        CHECK_MSG(strstr(fe.clip2, "text_encoders/t5-tiny-q8_0.gguf") != NULL, "clip2 %s (order %d)", fe.clip2, order);
    }
}

int main(void) {
    setup();
    RUN(test_object_info);
    RUN(test_klein_with_clip_loader_gguf);
    RUN(test_flux1_with_dual_clip_loader_gguf);
    test_rm_rf(models);
    test_rm_rf(outdir);
    return test_summary();
}

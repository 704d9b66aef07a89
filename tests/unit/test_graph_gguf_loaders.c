/* test_graph_gguf_loaders.c - ComfyUI-GGUF's CLIPLoaderGGUF and DualCLIPLoaderGGUF (city96/ComfyUI-GGUF nodes.py:
 * CLIPLoader's / DualCLIPLoader's inputs without device): object_info lists them with those inputs and the .gguf
 * files of text_encoders/; the klein template and the FLUX.1 [dev] graph run with them in place of the stock
 * loaders, handing the engine the GGUF paths - the FLUX.1 pair in either order (the T5 GGUF is told from CLIP-L
 * by its tensors, through the llama.cpp name map). UnetLoaderGGUF / UnetLoaderGGUFAdvanced (nodes.py: unet_name from
 * the .gguf files of diffusion_models/) hand the engine exactly what UNETLoader hands it for the same GGUF DiT
 * (klein and FLUX.1 [dev]: path, sigmas, guidance), and refuse a .safetensors name, a missing file, a path out of
 * the folder, a dtype kiln cannot honour and a .gguf file that is not GGUF, each by name. The engine is a TEST
 * DOUBLE recording what it is given. */
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
    char call[2048]; /* everything the model choice can change: the DiT, the schedule, the guidance */
} fake_engine;

static kiln_status fake_generate(void *self, const kiln_gen_params *p, kiln_gen_progress_fn progress, void *pctx,
                                 kiln_gen_images *out, kiln_err *err) {
    (void)progress, (void)pctx;
    fake_engine *fe = self;
    fe->calls++;
    snprintf(fe->clip, sizeof fe->clip, "%s", p->clip_path ? p->clip_path : "");
    snprintf(fe->clip2, sizeof fe->clip2, "%s", p->clip2_path ? p->clip2_path : "");
    int w = snprintf(fe->call, sizeof fe->call, "unet=%s guidance=%g steps=%d sigmas=", p->unet_path, p->guidance,
                     p->steps);
    for (int i = 0; i < p->n_sigmas && w > 0 && (size_t)w < sizeof fe->call - 16; i++)
        w += snprintf(fe->call + w, sizeof fe->call - (size_t)w, "%.9g,", p->sigmas[i]);
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
    link_in("tests/data/tiny/flux1/comfy/text_encoders/t5xxl_fp16.safetensors", "text_encoders/t5xxl_fp16.safetensors");
    link_in("tests/data/quant/klein-q8_0.gguf", "diffusion_models/klein-q8_0.gguf");
    link_in("tests/data/quant/flux1-dev-q8_0.gguf", "diffusion_models/flux1-dev-q8_0.gguf");
    char p[600]; /* a .gguf name whose bytes are not GGUF (a safetensors file renamed) */
    snprintf(p, sizeof p, "%s/diffusion_models/renamed.gguf", models);
    unlink(p);
    CHECK(symlink(test_src_path("tests/data/tiny/flux1/comfy/diffusion_models/flux1-dev.safetensors"), p) == 0);
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
    /* UnetLoaderGGUF: unet_name only, the .gguf files only; the advanced one adds the three dtype inputs */
    json_t *u = json_object_get(all, "UnetLoaderGGUF"), *ua = json_object_get(all, "UnetLoaderGGUFAdvanced");
    CHECK(u && ua);
    req = json_object_get(json_object_get(u, "input"), "required");
    CHECK_EQ_INT(json_object_size(req), 1);
    CHECK(listed(json_object_get(req, "unet_name"), "klein-q8_0.gguf"));
    CHECK(listed(json_object_get(req, "unet_name"), "flux1-dev-q8_0.gguf"));
    CHECK(!listed(json_object_get(req, "unet_name"), "flux1-dev.safetensors"));
    CHECK_EQ_INT(json_array_size(json_array_get(json_object_get(req, "unet_name"), 0)), 3);
    CHECK_EQ_STR(json_string_value(json_object_get(u, "category")), "bootleg");
    req = json_object_get(json_object_get(ua, "input"), "required");
    CHECK_EQ_INT(json_object_size(req), 4);
    CHECK(!listed(json_object_get(req, "unet_name"), "flux1-dev.safetensors"));
    CHECK(listed(json_object_get(req, "dequant_dtype"), "default"));
    CHECK(!listed(json_object_get(req, "dequant_dtype"), "float16"));
    CHECK(json_object_get(req, "patch_dtype") && json_object_get(req, "patch_on_device"));
    /* the stock loader still lists every model file */
    req = json_object_get(json_object_get(json_object_get(all, "UNETLoader"), "input"), "required");
    CHECK(listed(json_object_get(req, "unet_name"), "flux1-dev.safetensors"));
    json_decref(all);
}

/* Runs a parsed graph on the double; returns the status and the error message in msg. */
static kiln_status exec_graph(kiln_graph *g, fake_engine *fe, char *msg, size_t cap) {
    kiln_gen_engine eng = {.self = fe, .generate = fake_generate};
    kiln_exec_env env = {.models_root = models, .output_dir = outdir, .engine = &eng, .prompt_id = "p"};
    kiln_exec_hooks hooks = {0};
    json_t *outputs = NULL;
    char failed[64];
    kiln_err err = {0};
    kiln_status s = kiln_graph_execute(g, &env, &hooks, &outputs, failed, &err);
    snprintf(msg, cap, "%s", err.msg);
    json_decref(outputs);
    kiln_graph_free(g);
    return s;
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
    char msg[512];
    CHECK_MSG(exec_graph(g, fe, msg, sizeof msg) == KILN_OK, "%s", msg);
}

/* Parses the graph with node `node` made class `cls` with the inputs of kv (UNETLoader's weight_dtype dropped for
 * the GGUF loaders); *errors_txt gets the validation errors (free it). NULL graph on a refusal. */
static kiln_graph *parse_with(const char *rel, const char *node, const char *cls, const char *const *kv, size_t n_kv,
                              char **errors_txt) {
    json_error_t e;
    json_t *j = json_load_file(test_src_path(rel), 0, &e);
    CHECK_MSG(j != NULL, "%s: %s", rel, e.text);
    if (!j) return NULL;
    json_t *nd = json_object_get(j, node), *in = json_object_get(nd, "inputs");
    json_object_set_new(nd, "class_type", json_string(cls));
    if (strcmp(cls, "UNETLoader") != 0) json_object_del(in, "weight_dtype");
    for (size_t i = 0; i + 1 < n_kv; i += 2) json_object_set_new(in, kv[i], json_string(kv[i + 1]));
    if (!strcmp(cls, "UnetLoaderGGUFAdvanced") && !json_object_get(in, "patch_on_device"))
        json_object_set_new(in, "patch_on_device", json_true());
    json_t *errors = NULL;
    kiln_graph *g = NULL;
    kiln_graph_parse(j, NULL, models, &g, &errors);
    *errors_txt = errors ? json_dumps(errors, 0) : NULL;
    json_decref(errors);
    json_decref(j);
    return g;
}


/* The engine call of the graph with its loader node as cls on unet_name (UnetLoaderGGUFAdvanced with float32). */
static void call_with(const char *rel, const char *node, const char *cls, const char *unet, fake_engine *fe) {
    const char *kv[] = {"unet_name", unet, "dequant_dtype", "float32", "patch_dtype", "default"};
    char *txt = NULL, msg[512];
    kiln_graph *g = parse_with(rel, node, cls, kv, strcmp(cls, "UnetLoaderGGUFAdvanced") ? 2 : 6, &txt);
    CHECK_MSG(g != NULL, "%s with %s %s: %s", rel, cls, unet, txt ? txt : "?");
    free(txt);
    if (!g) return;
    CHECK_MSG(exec_graph(g, fe, msg, sizeof msg) == KILN_OK, "%s with %s: %s", rel, cls, msg);
    CHECK_EQ_INT(fe->calls, 1);
}

static void test_unet_loader_gguf_is_unet_loader(void) {
    static const struct { const char *graph, *node, *file; } cases[] = {
        {"tests/data/graphs/flux2_klein_t2i_template_api.json", "75:70", "klein-q8_0.gguf"},
        {"tests/data/bench/graphs/flux1-dev-2st.json", "12", "flux1-dev-q8_0.gguf"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        fake_engine stock = {0}, gguf = {0}, adv = {0};
        call_with(cases[c].graph, cases[c].node, "UNETLoader", cases[c].file, &stock);
        call_with(cases[c].graph, cases[c].node, "UnetLoaderGGUF", cases[c].file, &gguf);
        call_with(cases[c].graph, cases[c].node, "UnetLoaderGGUFAdvanced", cases[c].file, &adv);
        CHECK_MSG(strstr(stock.call, cases[c].file) != NULL, "UNETLoader call %s", stock.call);
        CHECK_EQ_STR(gguf.call, stock.call);
        CHECK_EQ_STR(adv.call, stock.call);
    }
    /* FLUX.1 [dev]'s GGUF is told from klein by its tensors: guidance 3.5 */
    fake_engine fe = {0};
    call_with(cases[1].graph, cases[1].node, "UnetLoaderGGUF", cases[1].file, &fe);
    CHECK_MSG(strstr(fe.call, "guidance=3.5 ") != NULL, "%s", fe.call);
}

/* Validation refuses at submission with the input and value named; a not-GGUF .gguf is refused when run. */
static void test_unet_loader_gguf_refusals(void) {
    static const struct { const char *cls, *key, *value, *want; } bad[] = {
        {"UnetLoaderGGUF", "unet_name", "flux1-dev.safetensors", "unet_name: \"flux1-dev.safetensors\" not in list"},
        {"UnetLoaderGGUF", "unet_name", "absent.gguf", "unet_name: \"absent.gguf\" not in list"},
        {"UnetLoaderGGUF", "unet_name", "../diffusion_models/klein-q8_0.gguf", "not in list"},
        {"UnetLoaderGGUF", "unet_name", "/etc/passwd.gguf", "not in list"},
        {"UnetLoaderGGUFAdvanced", "dequant_dtype", "float16", "dequant_dtype: \"float16\" not in list"},
        {"UnetLoaderGGUFAdvanced", "patch_dtype", "target", "patch_dtype: \"target\" not in list"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *kv[] = {"unet_name", "klein-q8_0.gguf", "dequant_dtype", "default", "patch_dtype", "default",
                            bad[i].key, bad[i].value};
        char *txt = NULL;
        kiln_graph *g = parse_with("tests/data/graphs/flux2_klein_t2i_template_api.json", "75:70", bad[i].cls, kv,
                                   8, &txt);
        CHECK_MSG(g == NULL, "%s %s=%s accepted", bad[i].cls, bad[i].key, bad[i].value);
        char want_in[128], want_val[256];
        snprintf(want_in, sizeof want_in, "\"input_name\": \"%s\"", bad[i].key);
        snprintf(want_val, sizeof want_val, "\"received_value\": \"%s\"", bad[i].value);
        CHECK_MSG(txt && strstr(txt, "value_not_in_list") && strstr(txt, want_in) && strstr(txt, want_val),
                  "%s %s=%s: %s", bad[i].cls, bad[i].key, bad[i].value, txt ? txt : "(no errors)");
        free(txt);
        kiln_graph_free(g);
    }
    const char *kv[] = {"unet_name", "renamed.gguf"};
    char *txt = NULL, msg[512];
    kiln_graph *g = parse_with("tests/data/graphs/flux2_klein_t2i_template_api.json", "75:70", "UnetLoaderGGUF", kv, 2,
                               &txt);
    CHECK_MSG(g != NULL, "renamed.gguf: %s", txt ? txt : "?");
    free(txt);
    if (!g) return;
    fake_engine fe = {0};
    CHECK(exec_graph(g, &fe, msg, sizeof msg) != KILN_OK);
    CHECK_EQ_INT(fe.calls, 0);
    CHECK_MSG(strstr(msg, "UnetLoaderGGUF unet_name renamed.gguf is not a GGUF file") != NULL, "%s", msg);
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
    RUN(test_unet_loader_gguf_is_unet_loader);
    RUN(test_unet_loader_gguf_refusals);
    test_rm_rf(models);
    test_rm_rf(outdir);
    return test_summary();
}

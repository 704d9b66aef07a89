/* test_graph_exec.c - the executor over node classes, the pixelize node's arithmetic, and SaveImage's files.
 *
 * The engine here is a TEST DOUBLE (fake_engine): it paints a deterministic pattern from the seed so the
 * plumbing (node order, caching, progress, cancellation, file names, pixelize) can be checked without a model.
 * It is not an image generator and is never linked into kiln. */
#include <dirent.h>
#include <spng.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "fake_models.h"
#include "graph/graph.h"
#include "graph/pixelize.h"
#include "test.h"

static char models[256], outdir[256];

static void setup(void) {
    fake_models_make(models, sizeof models, "exec");
    snprintf(outdir, sizeof outdir, "/tmp/kiln-test-exec-out-%d", (int)getpid());
    mkdir(outdir, 0755);
}

static void teardown(void) {
    test_rm_rf(models);
    test_rm_rf(outdir);
}

/* ---- the test double -------------------------------------------------------------------------------------- */

typedef struct fake_engine {
    int calls;
    kiln_gen_params last;
    char prompt[256], unet[512], vae[512];
    bool neg_null;
} fake_engine;

static kiln_status fake_generate(void *self, const kiln_gen_params *p, kiln_gen_progress_fn progress, void *pctx,
                                 kiln_gen_images *out, kiln_err *err) {
    fake_engine *fe = self;
    fe->calls++;
    fe->last = *p;
    snprintf(fe->prompt, sizeof fe->prompt, "%s", p->prompt);
    fe->neg_null = p->negative_prompt == NULL;
    snprintf(fe->unet, sizeof fe->unet, "%s", p->unet_path);
    snprintf(fe->vae, sizeof fe->vae, "%s", p->vae_path);
    for (int s = 1; s <= p->steps; s++)
        if (!progress(pctx, s, p->steps)) return KILN_FAIL(err, KILN_E_CANCELLED, "cancelled at step %d", s);
    size_t one = (size_t)p->width * (size_t)p->height * 3;
    out->pixels = kiln_malloc(one * (size_t)p->batch);
    if (!out->pixels) return KILN_FAIL(err, KILN_E_NOMEM, "oom");
    for (int b = 0; b < p->batch; b++)
        for (size_t i = 0; i < one; i++) out->pixels[(size_t)b * one + i] = (uint8_t)((i * 7 + p->seed + (uint64_t)b) % 251);
    out->n = p->batch;
    out->width = p->width;
    out->height = p->height;
    snprintf(out->warnings, sizeof out->warnings, "fake engine warning\n");
    return KILN_OK;
}

typedef struct hook_log {
    char order[1024];
    int progress_calls, executed_calls, stop_after_progress;
    char warned[256]; /* "node: text" of the warning hook */
    bool stop_now; /* an interrupt already pending when the prompt starts */
} hook_log;

static void on_executing(void *ctx, const char *id) {
    hook_log *h = ctx;
    strncat(h->order, id, sizeof h->order - strlen(h->order) - 2);
    strcat(h->order, ",");
}
static void on_progress(void *ctx, const char *id, int v, int max) { ((hook_log *)ctx)->progress_calls++; }
static void on_warning(void *ctx, const char *id, const char *text) {
    hook_log *h = ctx;
    snprintf(h->warned, sizeof h->warned, "%s: %s", id, text);
}
static void on_executed(void *ctx, const char *id, json_t *ui) { ((hook_log *)ctx)->executed_calls++; }
static bool should_stop(void *ctx) {
    hook_log *h = ctx;
    return h->stop_now || (h->stop_after_progress > 0 && h->progress_calls >= h->stop_after_progress);
}

static kiln_graph *parse_file(const char *rel) {
    json_error_t e;
    json_t *j = json_load_file(test_src_path(rel), 0, &e);
    CHECK_MSG(j != NULL, "%s", e.text);
    json_t *errors = NULL;
    kiln_graph *g = NULL;
    CHECK_EQ_INT(kiln_graph_parse(j, NULL, models, &g, &errors), KILN_OK);
    json_decref(errors);
    json_decref(j);
    return g;
}

static void test_template_runs_through_engine(void) {
    kiln_graph *g = parse_file("tests/data/graphs/flux2_klein_t2i_template_api.json");
    if (!g) return;
    fake_engine fe = {0};
    kiln_gen_engine eng = {.self = &fe, .generate = fake_generate};
    kiln_exec_env env = {.models_root = models, .output_dir = outdir, .engine = &eng, .prompt_id = "p1"};
    hook_log hl = {0};
    kiln_exec_hooks hooks = {.ctx = &hl, .executing = on_executing, .progress = on_progress,
                             .executed = on_executed, .should_stop = should_stop, .warning = on_warning};
    json_t *outputs = NULL;
    char failed[64];
    kiln_err err = {0};
    CHECK_EQ_INT(kiln_graph_execute(g, &env, &hooks, &outputs, failed, &err), KILN_OK);
    CHECK_EQ_INT(fe.calls, 1);
    CHECK_EQ_INT(fe.last.width, 1024);
    CHECK_EQ_INT(fe.last.steps, 4);
    CHECK_EQ_INT(fe.last.batch, 1);
    CHECK(fe.last.seed == 432262096973400ull);
    CHECK(fe.neg_null); /* ConditioningZeroOut */
    CHECK(strstr(fe.prompt, "red fox") != NULL);
    CHECK(strstr(fe.unet, "diffusion_models/flux-2-klein-4b.safetensors") != NULL);
    CHECK(strstr(fe.vae, "vae/flux2-vae.safetensors") != NULL);
    CHECK_EQ_INT(hl.progress_calls, 4);
    CHECK_EQ_INT(hl.executed_calls, 1);
    CHECK_MSG(strstr(hl.warned, ": fake engine warning") != NULL, "warning hook got '%s'", hl.warned); /* VAEDecode's */
    /* 13 nodes, each run once, the SaveImage last */
    int commas = 0;
    for (char *p = hl.order; *p; p++) commas += *p == ',';
    CHECK_EQ_INT(commas, 13);
    CHECK(strstr(hl.order, "75:65,9,") != NULL);
    json_t *img = json_array_get(json_object_get(json_object_get(outputs, "9"), "images"), 0);
    CHECK_EQ_STR(json_string_value(json_object_get(img, "filename")), "Flux2-Klein_00001_.png");
    CHECK_EQ_STR(json_string_value(json_object_get(img, "type")), "output");
    char path[600];
    snprintf(path, sizeof path, "%s/Flux2-Klein_00001_.png", outdir);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && sb.st_size > 100);
    json_decref(outputs);

    /* a second run continues the counter */
    CHECK_EQ_INT(kiln_graph_execute(g, &env, NULL, &outputs, failed, &err), KILN_OK);
    img = json_array_get(json_object_get(json_object_get(outputs, "9"), "images"), 0);
    CHECK_EQ_STR(json_string_value(json_object_get(img, "filename")), "Flux2-Klein_00002_.png");
    json_decref(outputs);

    /* interrupt during denoising */
    hook_log stop = {.stop_after_progress = 2};
    hooks.ctx = &stop;
    CHECK_EQ_INT(kiln_graph_execute(g, &env, &hooks, &outputs, failed, &err), KILN_E_CANCELLED);
    CHECK_EQ_STR(failed, "75:65");
    CHECK_EQ_INT(json_object_size(outputs), 0);
    json_decref(outputs);

    /* an interrupt pending before the first node: the executor itself stops, no node runs */
    hook_log early = {.stop_now = true};
    hooks.ctx = &early;
    int calls = fe.calls;
    CHECK_EQ_INT(kiln_graph_execute(g, &env, &hooks, &outputs, failed, &err), KILN_E_CANCELLED);
    CHECK_EQ_INT(fe.calls, calls);
    CHECK_EQ_STR(early.order, "");
    CHECK_EQ_INT(json_object_size(outputs), 0);
    json_decref(outputs);

    /* no engine configured: a clear error, not a crash */
    env.engine = NULL;
    CHECK_EQ_INT(kiln_graph_execute(g, &env, NULL, &outputs, failed, &err), KILN_E_UNSUPPORTED);
    CHECK_ERR_CONTAINS(&err, "no image engine");
    json_decref(outputs);
    kiln_graph_free(g);
}

static void read_png(const char *path, uint8_t *rgb, size_t cap, uint32_t *w, uint32_t *h) {
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    if (!f) return;
    spng_ctx *ctx = spng_ctx_new(0);
    spng_set_png_file(ctx, f);
    struct spng_ihdr ihdr;
    CHECK(spng_get_ihdr(ctx, &ihdr) == 0);
    *w = ihdr.width;
    *h = ihdr.height;
    CHECK(spng_decode_image(ctx, rgb, cap, SPNG_FMT_RGB8, 0) == 0);
    uint32_t n_text = 0;
    CHECK(spng_get_text(ctx, NULL, &n_text) == 0 && n_text >= 1);
    spng_ctx_free(ctx);
    fclose(f);
}

static void test_ksampler_pixel4_and_subfolder(void) {
    kiln_graph *g = parse_file("tests/data/graphs/flux2_klein_pixel4_api.json");
    if (!g) return;
    fake_engine fe = {0};
    kiln_gen_engine eng = {.self = &fe, .generate = fake_generate};
    kiln_exec_env env = {.models_root = models, .output_dir = outdir, .engine = &eng, .prompt_id = "p2"};
    json_t *outputs = NULL;
    char failed[64];
    kiln_err err = {0};
    CHECK_EQ_INT(kiln_graph_execute(g, &env, NULL, &outputs, failed, &err), KILN_OK);
    CHECK_EQ_INT(fe.last.batch, 3);
    CHECK_EQ_INT(json_array_size(json_object_get(json_object_get(outputs, "15"), "images")), 3);
    /* the saved image is the engine's image pixelized by 4: every 4x4 block is one colour, the mean of the block */
    static uint8_t rgb[512 * 512 * 3];
    uint32_t w = 0, h = 0;
    char path[600];
    snprintf(path, sizeof path, "%s/klein-4b-8st-pixel4_00002_.png", outdir);
    read_png(path, rgb, sizeof rgb, &w, &h);
    CHECK(w == 512 && h == 512);
    /* recompute the block at (8..11, 4..7) of image 1 (seed + 1) from the double's formula */
    for (int ch = 0; ch < 3; ch++) {
        unsigned sum = 0;
        for (int y = 4; y < 8; y++)
            for (int x = 8; x < 12; x++) sum += (unsigned)((((size_t)y * 512 + (size_t)x) * 3 + (size_t)ch) * 7 + 911001 + 1) % 251;
        uint8_t want = (uint8_t)((sum + 8) / 16);
        for (int y = 4; y < 8; y++)
            for (int x = 8; x < 12; x++) CHECK_EQ_INT(rgb[((size_t)y * 512 + (size_t)x) * 3 + (size_t)ch], want);
    }
    json_decref(outputs);
    kiln_graph_free(g);

    g = parse_file("tests/data/graphs/flux2_klein_ksampler_api.json");
    if (!g) return;
    CHECK_EQ_INT(kiln_graph_execute(g, &env, NULL, &outputs, failed, &err), KILN_OK);
    CHECK_EQ_INT(fe.last.steps, 8);
    CHECK(fe.last.seed == 910101);
    json_t *img = json_array_get(json_object_get(json_object_get(outputs, "9"), "images"), 2);
    CHECK_EQ_STR(json_string_value(json_object_get(img, "subfolder")), "bench");
    CHECK_EQ_STR(json_string_value(json_object_get(img, "filename")), "klein-4b-8st_00003_.png");
    json_decref(outputs);
    kiln_graph_free(g);
}

/* Two outputs share one decode (one plain, one pixelized): the shared nodes run once, the engine once. */
static void test_shared_nodes_run_once(void) {
    json_error_t e;
    json_t *j = json_load_file(test_src_path("tests/data/graphs/flux2_klein_pixel4_api.json"), 0, &e);
    json_object_set_new(j, "16", json_pack("{s:s, s:{s:[s,i], s:s}}", "class_type", "SaveImage", "inputs", "images",
                                           "13", 0, "filename_prefix", "plain"));
    json_t *errors = NULL;
    kiln_graph *g = NULL;
    CHECK_EQ_INT(kiln_graph_parse(j, NULL, models, &g, &errors), KILN_OK);
    CHECK(g && g->n_outputs == 2);
    fake_engine fe = {0};
    kiln_gen_engine eng = {.self = &fe, .generate = fake_generate};
    kiln_exec_env env = {.models_root = models, .output_dir = outdir, .engine = &eng, .prompt_id = "p4"};
    hook_log hl = {0};
    kiln_exec_hooks hooks = {.ctx = &hl, .executing = on_executing};
    json_t *outputs = NULL;
    char failed[64];
    kiln_err err = {0};
    CHECK_EQ_INT(kiln_graph_execute(g, &env, &hooks, &outputs, failed, &err), KILN_OK);
    CHECK_EQ_INT(fe.calls, 1);
    CHECK_EQ_INT(json_object_size(outputs), 2);
    int commas = 0;
    for (char *p = hl.order; *p; p++) commas += *p == ',';
    CHECK_EQ_INT(commas, 15); /* the 14 nodes of the pixel4 graph and the second SaveImage, each once */
    json_decref(outputs);
    kiln_graph_free(g);
    json_decref(j);
}

static void test_save_prefix_cannot_escape(void) {
    const char *bad[] = {"../evil", "/tmp/evil", "a/../../evil", "a\\b"};
    for (int i = 0; i < 4; i++) {
        json_error_t e;
        json_t *j = json_load_file(test_src_path("tests/data/graphs/flux2_klein_ksampler_api.json"), 0, &e);
        json_object_set_new(json_object_get(json_object_get(j, "9"), "inputs"), "filename_prefix", json_string(bad[i]));
        json_t *errors = NULL;
        kiln_graph *g = NULL;
        CHECK_EQ_INT(kiln_graph_parse(j, NULL, models, &g, &errors), KILN_OK);
        fake_engine fe = {0};
        kiln_gen_engine eng = {.self = &fe, .generate = fake_generate};
        kiln_exec_env env = {.models_root = models, .output_dir = outdir, .engine = &eng, .prompt_id = "p3"};
        json_t *outputs = NULL;
        char failed[64];
        kiln_err err = {0};
        CHECK_EQ_INT(kiln_graph_execute(g, &env, NULL, &outputs, failed, &err), KILN_E_INVALID);
        CHECK_EQ_STR(failed, "9");
        json_decref(outputs);
        kiln_graph_free(g);
        json_decref(j);
    }
    struct stat sb;
    CHECK(stat("/tmp/evil_00001_.png", &sb) != 0);
}

static void test_pixelize_arithmetic(void) {
    /* 5x3 single channel, factor 2: blocks clip at the right/bottom edges */
    const uint8_t src[15] = {0, 2, 10, 20, 100, 4, 6, 30, 40, 200, 7, 9, 255, 1, 50};
    uint8_t small[6], up[15];
    kiln_err err = {0};
    CHECK_EQ_INT(kiln_downscale_box(src, 5, 3, 1, 2, small, &err), KILN_OK);
    CHECK_EQ_INT(small[0], 3);   /* (0+2+4+6)/4 */
    CHECK_EQ_INT(small[1], 25);  /* (10+20+30+40)/4 */
    CHECK_EQ_INT(small[2], 150); /* (100+200)/2 */
    CHECK_EQ_INT(small[3], 8);   /* (7+9)/2 */
    CHECK_EQ_INT(small[4], 128); /* (255+1)/2 */
    CHECK_EQ_INT(small[5], 50);
    CHECK_EQ_INT(kiln_upscale_nearest(small, 3, 2, 1, 2, 5, 3, up, &err), KILN_OK);
    const uint8_t want[15] = {3, 3, 25, 25, 150, 3, 3, 25, 25, 150, 8, 8, 128, 128, 50};
    CHECK(memcmp(up, want, 15) == 0);
    uint8_t img[15];
    memcpy(img, src, 15);
    CHECK_EQ_INT(kiln_pixelize(img, 5, 3, 1, 2, &err), KILN_OK);
    CHECK(memcmp(img, want, 15) == 0);
    memcpy(img, src, 15);
    CHECK_EQ_INT(kiln_pixelize(img, 5, 3, 1, 1, &err), KILN_OK); /* identity */
    CHECK(memcmp(img, src, 15) == 0);
    CHECK_EQ_INT(kiln_pixelize(img, 5, 3, 1, 0, &err), KILN_E_INVALID);
    CHECK_EQ_INT(kiln_upscale_nearest(small, 2, 2, 1, 2, 5, 3, up, &err), KILN_E_INVALID);
    /* a factor larger than the image averages everything */
    memcpy(img, src, 15);
    CHECK_EQ_INT(kiln_pixelize(img, 5, 3, 1, 8, &err), KILN_OK);
    unsigned sum = 0;
    for (int i = 0; i < 15; i++) sum += src[i];
    for (int i = 0; i < 15; i++) CHECK_EQ_INT(img[i], (sum + 7) / 15);
}

int main(void) {
    setup();
    RUN(test_pixelize_arithmetic);
    RUN(test_template_runs_through_engine);
    RUN(test_ksampler_pixel4_and_subfolder);
    RUN(test_shared_nodes_run_once);
    RUN(test_save_prefix_cannot_escape);
    teardown();
    return test_summary();
}

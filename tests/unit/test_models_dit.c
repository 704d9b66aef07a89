/* test_models_dit.c - one FLUX.2 DiT forward on the tiny model, both on-disk layouts, against the diffusers
 * golden (dit_f32: Flux2Transformer2DModel in fp32 on the same bf16-exact weights). Also the layout
 * detection and the shape/name errors. */
#include <string.h>

#include "golden.h"
#include "models/flux2_dit.h"
#include "models/rope_tables.h"
#include "test.h"

static kiln_backend *open_be(void) {
    kiln_backend *be = NULL;
    kiln_err err = {0};
    CHECK_MSG(kiln_backend_open_cpu(0, &be, &err) == KILN_OK, "%s", err.msg);
    if (be) be->precision = KILN_PREC_EXACT;
    return be;
}

static void run_layout(const char *ckpt, const char *config, kiln_dit_layout want) {
    kiln_err err = {0};
    kiln_st_file *ck = NULL;
    CHECK_MSG(kiln_st_open(test_src_path(ckpt), &ck, &err) == KILN_OK, "%s", err.msg);
    if (!ck) return;
    kiln_flux2_dit *m = NULL;
    CHECK_MSG(kiln_flux2_dit_load(ck, config ? test_src_path(config) : NULL, &m, &err) == KILN_OK, "%s", err.msg);
    kiln_backend *be = open_be();
    golden g;
    if (!m || !be || !golden_open(&g, "dit_f32")) goto out;
    CHECK_EQ_INT(m->layout, want);
    CHECK_EQ_INT(m->hidden, 64);
    CHECK_EQ_INT(m->heads, 2);
    CHECK_EQ_INT(m->n_double, 2);
    CHECK_EQ_INT(m->n_single, 3);
    CHECK_EQ_INT(m->ctx_dim, 48); /* 3 x the tiny Qwen3 hidden (16) */
    /* golden ids: text (0,0,0,j), image (0,y,x,0) on a 3x5 grid */
    size_t n;
    int32_t *img_ids = golden_i32(&g, "img_ids", &n);
    int32_t mine[15 * 4];
    kiln_flux2_image_ids(3, 5, mine);
    CHECK(img_ids && n == 60 && memcmp(img_ids, mine, sizeof mine) == 0);
    free(img_ids);
    float *x = golden_f32(&g, "img_tokens", NULL), *txt = golden_f32(&g, "txt_features", NULL);
    float *ts = golden_f32(&g, "timestep", NULL);
    float *v = calloc(15 * 128, sizeof(float));
    kiln_flux2_dit_ws *ws = NULL;
    CHECK_MSG(kiln_flux2_dit_ws_create(m, be, 1, 512, 3, 5, &ws, &err) == KILN_OK, "%s", err.msg);
    if (ws && x && txt && ts) {
        float t = ts[0] * 1000.0f; /* the golden passes sigma; the model multiplies by 1000 */
        CHECK_MSG(kiln_flux2_dit_forward(m, be, ws, x, txt, t, v, &err) == KILN_OK, "%s", err.msg);
        golden_compare(&g, "output", v, 15 * 128, want == KILN_LAYOUT_BFL ? " (BFL file)" : " (diffusers)");
        /* a second forward reuses the cached text projection: same result */
        float *v2 = calloc(15 * 128, sizeof(float));
        CHECK(kiln_flux2_dit_forward(m, be, ws, x, txt, t, v2, &err) == KILN_OK);
        CHECK(memcmp(v, v2, 15 * 128 * sizeof(float)) == 0);
        free(v2);
    }
    kiln_flux2_dit_ws_free(be, ws);
    free(x);
    free(txt);
    free(ts);
    free(v);
    golden_close(&g);
out:
    kiln_flux2_dit_free(m);
    if (be) kiln_backend_close(be);
    kiln_st_close(ck);
}

static void test_bfl_single_file(void) {
    run_layout("tests/data/tiny/comfy/flux-2-klein-4b.safetensors", NULL, KILN_LAYOUT_BFL);
}

static void test_diffusers_folder(void) {
    run_layout("tests/data/tiny/diffusers/transformer", "tests/data/tiny/diffusers/transformer/config.json",
               KILN_LAYOUT_DIFFUSERS);
}

/* The default (fast) precision rounds matmul inputs to bf16: it must land within the bf16 reference's stated
 * tolerance (dit_bf16: the same forward run by diffusers in bf16). */
static void test_fast_precision_vs_bf16(void) {
    kiln_err err = {0};
    kiln_st_file *ck = NULL;
    CHECK(kiln_st_open(test_src_path("tests/data/tiny/comfy/flux-2-klein-4b.safetensors"), &ck, &err) == KILN_OK);
    kiln_flux2_dit *m = NULL;
    kiln_backend *be = NULL;
    golden g;
    if (!ck || kiln_flux2_dit_load(ck, NULL, &m, &err) != KILN_OK || kiln_backend_open_cpu(0, &be, &err) != KILN_OK ||
        !golden_open(&g, "dit_bf16")) {
        CHECK_MSG(0, "setup: %s", err.msg);
        goto out;
    }
    be->precision = KILN_PREC_FAST;
    float *x = golden_f32(&g, "img_tokens", NULL), *txt = golden_f32(&g, "txt_features", NULL);
    float *ts = golden_f32(&g, "timestep", NULL), *v = calloc(15 * 128, sizeof(float));
    kiln_flux2_dit_ws *ws = NULL;
    if (x && txt && ts && kiln_flux2_dit_ws_create(m, be, 1, 512, 3, 5, &ws, &err) == KILN_OK) {
        CHECK_MSG(kiln_flux2_dit_forward(m, be, ws, x, txt, ts[0] * 1000.0f, v, &err) == KILN_OK, "%s", err.msg);
        golden_compare(&g, "output", v, 15 * 128, " (fast precision)");
    }
    kiln_flux2_dit_ws_free(be, ws);
    free(x);
    free(txt);
    free(ts);
    free(v);
    golden_close(&g);
out:
    kiln_flux2_dit_free(m);
    if (be) kiln_backend_close(be);
    kiln_st_close(ck);
}

/* forward's parts, as a CUDA-graph caller runs them (set_text once, set_timestep per step, run in the graph):
 * the same bytes as forward; run refuses a workspace without text; the graph key follows the workspace. */
static void test_split_forward(void) {
    kiln_err err = {0};
    kiln_st_file *ck = NULL;
    kiln_flux2_dit *m = NULL;
    kiln_backend *be = NULL;
    kiln_flux2_dit_ws *a = NULL, *b = NULL;
    golden g;
    if (kiln_st_open(test_src_path("tests/data/tiny/comfy/flux-2-klein-4b.safetensors"), &ck, &err) != KILN_OK ||
        kiln_flux2_dit_load(ck, NULL, &m, &err) != KILN_OK || !(be = open_be()) || !golden_open(&g, "dit_f32")) {
        CHECK_MSG(0, "setup: %s", err.msg);
        goto out;
    }
    float *x = golden_f32(&g, "img_tokens", NULL), *txt = golden_f32(&g, "txt_features", NULL);
    float *ts = golden_f32(&g, "timestep", NULL);
    float *v = calloc(15 * 128, sizeof(float)), *v2 = calloc(15 * 128, sizeof(float));
    if (x && txt && ts && kiln_flux2_dit_ws_create(m, be, 1, 512, 3, 5, &a, &err) == KILN_OK &&
        kiln_flux2_dit_ws_create(m, be, 1, 512, 3, 5, &b, &err) == KILN_OK) {
        float t = ts[0] * 1000.0f;
        CHECK(kiln_flux2_dit_run(m, be, b, x, v2, &err) == KILN_E_INTERNAL);
        CHECK_ERR_CONTAINS(&err, "set_text");
        CHECK(kiln_flux2_dit_forward(m, be, a, x, txt, t, v, &err) == KILN_OK);
        CHECK(kiln_flux2_dit_set_text(m, be, b, txt, &err) == KILN_OK);
        CHECK(kiln_flux2_dit_set_timestep(m, be, b, 0.5f * t, &err) == KILN_OK); /* overwritten below */
        CHECK(kiln_flux2_dit_set_timestep(m, be, b, t, &err) == KILN_OK);
        CHECK(kiln_flux2_dit_run(m, be, b, x, v2, &err) == KILN_OK);
        CHECK(memcmp(v, v2, 15 * 128 * sizeof(float)) == 0);
        CHECK(kiln_flux2_dit_ws_key(a, 1) == kiln_flux2_dit_ws_key(a, 1));
        CHECK(kiln_flux2_dit_ws_key(a, 1) != kiln_flux2_dit_ws_key(b, 1)); /* same shape, other memory */
        CHECK(kiln_flux2_dit_ws_key(a, 1) != kiln_flux2_dit_ws_key(a, 2));
    }
    kiln_flux2_dit_ws_free(be, a);
    kiln_flux2_dit_ws_free(be, b);
    free(x);
    free(txt);
    free(ts);
    free(v);
    free(v2);
    golden_close(&g);
out:
    kiln_flux2_dit_free(m);
    if (be) kiln_backend_close(be);
    kiln_st_close(ck);
}

/* Loading a VAE or a text encoder as the DiT gives a clear error, not a crash. */
/* kiln_flux2_dit_workspace is what the memory plan counts and the CUDA arena is sized from: it must equal what a
 * workspace allocates (the backend's live bytes), in f32 and bf16 activations, with references, and with the KV
 * cache. */
static void test_workspace_bytes(void) {
    kiln_err err = {0};
    kiln_st_file *ck = NULL;
    kiln_flux2_dit *m = NULL;
    kiln_backend *be = open_be();
    CHECK(kiln_st_open(test_src_path("tests/data/tiny/diffusers/transformer/diffusion_pytorch_model.safetensors"),
                       &ck, &err) == KILN_OK);
    if (!ck || !be || kiln_flux2_dit_load(ck, test_src_path("tests/data/tiny/diffusers/transformer/config.json"), &m,
                                          &err) != KILN_OK) {
        CHECK_MSG(0, "%s", err.msg);
        goto out;
    }
    const int rh[2] = {2, 3}, rw[2] = {4, 2};
    for (int bf16 = 0; bf16 < 2; bf16++) {
        be->bf16_activations = bf16; /* the CUDA backend's FAST activations (allocation only: no op runs here) */
        be->precision = KILN_PREC_FAST;
        kiln_dtype dt = bf16 ? KILN_DT_BF16 : KILN_DT_F32;
        for (int refs = 0; refs < 2; refs++) {
            size_t live = be->alloc_live;
            kiln_flux2_dit_ws *ws = NULL;
            CHECK_MSG(kiln_flux2_dit_ws_create_refs(m, be, 2, 37, 3, 5, refs ? 2 : 0, rh, rw, &ws, &err) == KILN_OK,
                      "%s", err.msg);
            if (!ws) continue;
            CHECK_EQ_INT(kiln_flux2_dit_ws_act_dtype(ws), dt);
            size_t want = kiln_flux2_dit_workspace(m, 2, 37, 15, refs ? 14 : 0, false, 1, 1, dt);
            CHECK_MSG(be->alloc_live - live == want, "%s, %d refs: allocated %zu bytes, counted %zu",
                      kiln_dtype_name(dt), refs ? 2 : 0, be->alloc_live - live, want);
            kiln_flux2_dit_ws_free(be, ws);
            CHECK_EQ_INT(be->alloc_live, live);
        }
    }
    be->bf16_activations = false;
    size_t live = be->alloc_live;
    kiln_flux2_dit_ws *ws = NULL;
    CHECK_MSG(kiln_flux2_dit_ws_create_kv(m, be, 1, 37, 3, 5, 2, rh, rw, &ws, &err) == KILN_OK, "%s", err.msg);
    if (ws) {
        size_t want = kiln_flux2_dit_workspace(m, 1, 37, 15, 14, true, 1, 1, KILN_DT_F32);
        CHECK_MSG(be->alloc_live - live == want, "KV: allocated %zu bytes, counted %zu", be->alloc_live - live, want);
        kiln_flux2_dit_ws_free(be, ws);
    }
out:
    kiln_flux2_dit_free(m);
    if (be) kiln_backend_close(be);
    kiln_st_close(ck);
}

static void test_wrong_file(void) {
    kiln_err err = {0};
    kiln_st_file *ck = NULL;
    CHECK(kiln_st_open(test_src_path("tests/data/tiny/comfy/flux2-vae.safetensors"), &ck, &err) == KILN_OK);
    kiln_flux2_dit *m = NULL;
    CHECK(kiln_flux2_dit_load(ck, NULL, &m, &err) == KILN_E_FORMAT);
    CHECK_ERR_CONTAINS(&err, "not a FLUX.2 transformer");
    CHECK(m == NULL);
    kiln_st_close(ck);
}

int main(void) {
    RUN(test_bfl_single_file);
    RUN(test_diffusers_folder);
    RUN(test_fast_precision_vs_bf16);
    RUN(test_split_forward);
    RUN(test_workspace_bytes);
    RUN(test_wrong_file);
    return test_summary();
}

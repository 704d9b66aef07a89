/* test_models_flux1_dit.c - one FLUX.1 DiT forward on the tiny [dev] (guidance embedder) and [schnell] (none)
 * models (tests/data/tiny/flux1_dit_*) against diffusers' FluxTransformer2DModel (flux1_dit_*_f32,
 * tools/reference/make_flux1_dit_golden.py): batch 2 with per-sample pooled vectors, a non-square 3x5 grid. In
 * EXACT precision within the golden's tolerance (10x the fp32-vs-fp64 spread) and >= 60 dB; in the default
 * (FAST, bf16 dot products) precision >= 40 dB. Also the RoPE position ids, the cached context projection, and
 * the config/layout refusals. */
#include <math.h>
#include <string.h>

#include "golden.h"
#include "models/flux1_dit.h"
#include "test.h"

static double snr_db(const float *got, const float *ref, size_t n) {
    double sig = 0, noise = 0;
    for (size_t i = 0; i < n; i++) {
        sig += (double)ref[i] * ref[i];
        noise += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
    }
    return noise == 0 ? 999.0 : 10.0 * log10(sig / noise);
}

typedef struct run {
    kiln_st_file *ck;
    kiln_flux1_dit *m;
    kiln_backend *be;
} run;

static bool use_bfl; /* open tests/data/tiny/flux1_dit_<variant>_bfl.safetensors (BFL names) instead */

static int open_run(run *r, const char *variant) {
    kiln_err err = {0};
    char dir[256], cfg[256];
    snprintf(dir, sizeof dir, "%s", test_src_path("tests/data/tiny"));
    snprintf(cfg, sizeof cfg, "%s/flux1_dit_%s/config.json", dir, variant);
    strncat(dir, "/flux1_dit_", sizeof dir - strlen(dir) - 1);
    strncat(dir, variant, sizeof dir - strlen(dir) - 1);
    if (use_bfl) strncat(dir, "_bfl.safetensors", sizeof dir - strlen(dir) - 1);
    memset(r, 0, sizeof *r);
    CHECK_MSG(kiln_st_open(dir, &r->ck, &err) == KILN_OK, "%s", err.msg);
    if (!r->ck) return 0;
    CHECK_MSG(kiln_flux1_dit_load(r->ck, cfg, &r->m, &err) == KILN_OK, "%s", err.msg);
    CHECK_MSG(kiln_backend_open_cpu(0, &r->be, &err) == KILN_OK, "%s", err.msg);
    return r->m && r->be;
}

static void close_run(run *r) {
    kiln_flux1_dit_free(r->m);
    if (r->be) kiln_backend_close(r->be);
    kiln_st_close(r->ck);
}

static void against_golden(const char *variant, bool guidance) {
    run r;
    golden g;
    char gname[64];
    snprintf(gname, sizeof gname, "flux1_dit_%s_f32", variant);
    if (!open_run(&r, variant) || !golden_open(&g, gname)) {
        close_run(&r);
        return;
    }
    kiln_err err = {0};
    const kiln_flux1_dit *m = r.m;
    CHECK_EQ_INT(m->hidden, 48);
    CHECK_EQ_INT(m->heads, 3);
    CHECK_EQ_INT(m->head_dim, 16);
    CHECK_EQ_INT(m->n_double, 2);
    CHECK_EQ_INT(m->n_single, 3);
    CHECK_EQ_INT(m->in_ch, 24);
    CHECK_EQ_INT(m->ctx_dim, 40);
    CHECK_EQ_INT(m->pooled_dim, 28);
    CHECK_EQ_INT(m->axes[0], 4);
    CHECK_EQ_INT(m->axes[1], 6);
    CHECK_EQ_INT(m->axes[2], 6);
    CHECK_EQ_INT(m->guidance, guidance);
    CHECK_EQ_INT(m->bfl, use_bfl);
    const int B = 2, L = 7, H = 3, W = 5, N = H * W;
    /* FluxPipeline's ids: image (0, y, x) row-major, text zeros */
    size_t n;
    float *img_ids = golden_f32(&g, "img_ids", &n);
    int32_t mine[15 * 3];
    kiln_flux1_image_ids(H, W, mine);
    CHECK(img_ids && n == 45);
    for (size_t i = 0; img_ids && i < 45 && i < n; i++) CHECK(img_ids[i] == (float)mine[i]);
    float *x = golden_f32(&g, "img_tokens", &n);
    CHECK(n == (size_t)B * N * 24);
    float *txt = golden_f32(&g, "txt_features", &n);
    CHECK(n == (size_t)B * L * 40);
    float *pooled = golden_f32(&g, "pooled", &n);
    CHECK(n == (size_t)B * 28);
    float *ts = golden_f32(&g, "timestep", NULL);
    float *gs = guidance ? golden_f32(&g, "guidance", NULL) : NULL;
    size_t nv = (size_t)B * N * m->out_ch;
    float *v = calloc(nv, sizeof(float)), *v2 = calloc(nv, sizeof(float)), *ref = golden_f32(&g, "output", &n);
    CHECK(n == nv);
    kiln_flux1_dit_ws *ws = NULL;
    CHECK_MSG(kiln_flux1_dit_ws_create(m, r.be, B, L, H, W, &ws, &err) == KILN_OK, "%s", err.msg);
    if (ws && x && txt && pooled && ts && ref && (gs || !guidance)) {
        float gv = gs ? gs[0] : 0.0f;
        for (int prec = 1; prec >= 0; prec--) {
            r.be->precision = prec ? KILN_PREC_EXACT : KILN_PREC_FAST;
            kiln_flux1_dit_ws_new_text(ws);
            CHECK_MSG(kiln_flux1_dit_forward(m, r.be, ws, x, txt, pooled, ts[0], gv, v, &err) == KILN_OK, "%s",
                      err.msg);
            if (prec) golden_compare(&g, "output", v, nv, " (exact)");
            double db = snr_db(v, ref, nv), need = prec ? 60 : 40;
            printf("  %s output %s: %.1f dB (need >= %.0f)\n", variant, prec ? "exact" : "default", db, need);
            CHECK_MSG(db >= need, "%s %s: %.1f dB", variant, prec ? "exact" : "default", db);
            /* a second forward reuses the cached context projection: same result */
            CHECK(kiln_flux1_dit_forward(m, r.be, ws, x, txt, pooled, ts[0], gv, v2, &err) == KILN_OK);
            CHECK(memcmp(v, v2, nv * sizeof(float)) == 0);
        }
        if (guidance) {
            /* dev reads the guidance value: another scale gives another velocity */
            r.be->precision = KILN_PREC_EXACT;
            CHECK(kiln_flux1_dit_forward(m, r.be, ws, x, txt, pooled, ts[0], gv + 1.0f, v2, &err) == KILN_OK);
            CHECK(snr_db(v2, ref, nv) < 40);
        }
    }
    kiln_flux1_dit_ws_free(r.be, ws);
    free(img_ids);
    free(x);
    free(txt);
    free(pooled);
    free(ts);
    free(gs);
    free(v);
    free(v2);
    free(ref);
    golden_close(&g);
    close_run(&r);
}

static void test_dev(void) { against_golden("dev", true); }
static void test_schnell(void) { against_golden("schnell", false); }
/* kiln_flux1_dit_workspace (the memory plan's figure, the CUDA arena's size) equals what a workspace allocates,
 * with f32 and with bf16 activations (the CUDA backend's FAST; only allocation runs here). */
static void test_workspace_bytes(void) {
    run r;
    if (!open_run(&r, "dev")) {
        close_run(&r);
        return;
    }
    kiln_err err = {0};
    for (int bf16 = 0; bf16 < 2; bf16++) {
        r.be->bf16_activations = bf16;
        r.be->precision = KILN_PREC_FAST;
        const kiln_dtype dt = bf16 ? KILN_DT_BF16 : KILN_DT_F32;
        size_t live = r.be->alloc_live;
        kiln_flux1_dit_ws *ws = NULL;
        CHECK_MSG(kiln_flux1_dit_ws_create(r.m, r.be, 3, 29, 4, 6, &ws, &err) == KILN_OK, "%s", err.msg);
        if (!ws) continue;
        CHECK_EQ_INT(kiln_flux1_dit_ws_act_dtype(ws), dt);
        size_t want = kiln_flux1_dit_workspace(r.m, 3, 29, 24, 1, dt);
        CHECK_MSG(r.be->alloc_live - live == want, "%s: allocated %zu bytes, counted %zu", kiln_dtype_name(dt),
                  r.be->alloc_live - live, want);
        kiln_flux1_dit_ws_free(r.be, ws);
        CHECK_EQ_INT(r.be->alloc_live, live);
    }
    close_run(&r);
}

/* The same weights under BFL names (ComfyUI's flux1-dev.safetensors layout: fused qkv and linear1, final layer
 * [shift; scale]), with the config for the tiny RoPE axes. */
static void test_bfl(void) {
    use_bfl = true;
    against_golden("dev", true);
    against_golden("schnell", false);
    use_bfl = false;
}

/* A BFL file has no config: FLUX.1's axes (16, 56, 56) must fill the head, so the tiny head of 16 is refused. */
static void test_bfl_no_config(void) {
    kiln_err err = {0};
    kiln_st_file *ck = NULL;
    kiln_flux1_dit *m = NULL;
    CHECK(kiln_st_open(test_src_path("tests/data/tiny/flux1_dit_dev_bfl.safetensors"), &ck, &err) == KILN_OK);
    CHECK_EQ_INT(kiln_flux1_dit_load(ck, NULL, &m, &err), KILN_E_UNSUPPORTED);
    CHECK_ERR_CONTAINS(&err, "RoPE axes");
    kiln_st_close(ck);
}

/* A config that disagrees with the weights, or that asks for what kiln does not run, is refused by name. */
static void test_config_refusals(void) {
    const char *cases[][3] = {
        {"schnell", "s/\"guidance_embeds\": false/\"guidance_embeds\": true/", "guidance_embeds"},
        {"dev", "s/\"guidance_embeds\": true/\"guidance_embeds\": false/", "guidance_embeds"},
        {"dev", "s/\"num_layers\": 2/\"num_layers\": 19/", "num_layers"},
        {"dev", "s/\"pooled_projection_dim\": 28/\"pooled_projection_dim\": 768/", "pooled_projection_dim"},
        {"dev", "s/\"patch_size\": 1/\"patch_size\": 2/", "patch_size"},
        {"dev", "s/^    6,$/    8,/", "RoPE axes sum"},
    };
    char dir[] = "/tmp/kiln-test-flux1-dit-XXXXXX", cfg[128], cmd[1024];
    if (!mkdtemp(dir)) return;
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char src[256], ckpt[256];
        snprintf(src, sizeof src, "%s/flux1_dit_%s", test_src_path("tests/data/tiny"), cases[i][0]);
        snprintf(ckpt, sizeof ckpt, "%s", src);
        snprintf(cmd, sizeof cmd, "sed '%s' %s/config.json > %s && ! cmp -s %s/config.json %s", cases[i][1], src, cfg,
                 src, cfg);
        CHECK_MSG(system(cmd) == 0, "case %zu: the edit changed nothing", i);
        kiln_err err = {0};
        kiln_st_file *ck = NULL;
        kiln_flux1_dit *m = NULL;
        CHECK(kiln_st_open(ckpt, &ck, &err) == KILN_OK);
        CHECK_MSG(kiln_flux1_dit_load(ck, cfg, &m, &err) != KILN_OK, "case %zu loaded", i);
        CHECK_ERR_CONTAINS(&err, cases[i][2]);
        CHECK(m == NULL);
        kiln_st_close(ck);
    }
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

/* A FLUX.2 checkpoint is not a FLUX.1 one. */
static void test_flux2_refused(void) {
    kiln_err err = {0};
    kiln_st_file *ck = NULL;
    kiln_flux1_dit *m = NULL;
    CHECK(kiln_st_open(test_src_path("tests/data/tiny/diffusers/transformer"), &ck, &err) == KILN_OK);
    CHECK_EQ_INT(kiln_flux1_dit_load(ck, NULL, &m, &err), KILN_E_UNSUPPORTED);
    CHECK_ERR_CONTAINS(&err, "FLUX.2");
    CHECK(m == NULL);
    kiln_st_close(ck);
}

int main(void) {
    RUN(test_dev);
    RUN(test_schnell);
    RUN(test_workspace_bytes);
    RUN(test_bfl);
    RUN(test_bfl_no_config);
    RUN(test_config_refusals);
    RUN(test_flux2_refused);
    return test_summary();
}

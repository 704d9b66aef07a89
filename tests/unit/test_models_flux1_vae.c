/* test_models_flux1_vae.c - the FLUX.1 VAE (AutoencoderKL, no batch norm, no (post_)quant_conv) on the tiny model
 * against diffusers (flux1_vae_f32, tools/reference/make_flux1_vae_golden.py), in both layouts: the diffusers
 * folder with its config and the BFL-named ae.safetensors (no config: FLUX.1's scale and shift). EXACT within the
 * golden's tolerance and >= 60 dB, the default FAST precision >= 40 dB. Also the latent un-scaling and the
 * config refusals. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "golden.h"
#include "models/flux1_vae.h"
#include "test.h"

static double snr_db(const float *got, const float *ref, size_t n) {
    double sig = 0, noise = 0;
    for (size_t i = 0; i < n; i++) {
        sig += (double)ref[i] * ref[i];
        noise += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
    }
    return noise == 0 ? 999.0 : 10.0 * log10(sig / noise);
}

static void run_file(const char *path, const char *config) {
    kiln_err err = {0};
    kiln_st_file *ck = NULL;
    char cfg[512];
    if (config) snprintf(cfg, sizeof cfg, "%s", test_src_path(config));
    CHECK_MSG(kiln_st_open(test_src_path(path), &ck, &err) == KILN_OK, "%s", err.msg);
    if (!ck) return;
    kiln_flux2_vae *m = NULL;
    CHECK_MSG(kiln_flux1_vae_load_config(ck, config ? cfg : NULL, &m, &err) == KILN_OK, "%s", err.msg);
    kiln_backend *be = NULL;
    CHECK(kiln_backend_open_cpu(0, &be, &err) == KILN_OK);
    golden g;
    if (!m || !be || !golden_open(&g, "flux1_vae_f32")) goto out;
    CHECK(m->flux1);
    CHECK_EQ_INT(kiln_flux2_vae_scale(m), 8);
    CHECK_EQ_INT(m->z_ch, 6);
    CHECK_EQ_INT(m->groups, 8); /* the config's norm_num_groups */
    CHECK(!m->pq_w.data && !m->qc_w.data && m->has_encoder);
    CHECK(fabs(m->scaling_factor - 0.3611) < 1e-12 && fabs(m->shift_factor - 0.1159) < 1e-12);
    size_t ni = 3 * 48 * 80, nz = 6 * 6 * 10;
    float *z = golden_f32(&g, "decode.latent", NULL), *in = golden_f32(&g, "encode.image", NULL);
    float *ref = golden_f32(&g, "decode.image", NULL), *mref = golden_f32(&g, "encode.mean", NULL);
    float *img = calloc(ni, sizeof(float)), *mean = calloc(nz, sizeof(float));
    for (int prec = 1; prec >= 0 && z && in && ref && mref; prec--) {
        be->precision = prec ? KILN_PREC_EXACT : KILN_PREC_FAST;
        double need = prec ? 60 : 40;
        CHECK_MSG(kiln_flux2_vae_decode(m, be, z, 6, 10, img, &err) == KILN_OK, "%s", err.msg);
        if (prec) golden_compare(&g, "decode.image", img, ni, "");
        double db = snr_db(img, ref, ni);
        printf("  %s decode %s: %.1f dB (need >= %.0f)\n", path, prec ? "exact" : "default", db, need);
        CHECK(db >= need);
        CHECK_MSG(kiln_flux2_vae_encode(m, be, in, 48, 80, mean, &err) == KILN_OK, "%s", err.msg);
        if (prec) golden_compare(&g, "encode.mean", mean, nz, "");
        db = snr_db(mean, mref, nz);
        printf("  %s encode %s: %.1f dB (need >= %.0f)\n", path, prec ? "exact" : "default", db, need);
        CHECK(db >= need);
    }
    free(z);
    free(in);
    free(ref);
    free(mref);
    free(img);
    free(mean);
    golden_close(&g);
out:
    kiln_flux2_vae_free(m);
    if (be) kiln_backend_close(be);
    kiln_st_close(ck);
}

static void test_diffusers(void) { run_file("tests/data/tiny/flux1_vae", "tests/data/tiny/flux1_vae/config.json"); }

/* The BFL file has no config: GroupNorm groups fall back to 32, which does not divide the tiny 16/24 channels,
 * so the tiny BFL file needs the config's norm_num_groups too (the real ae has 32 groups, the default). */
static void test_bfl(void) { run_file("tests/data/tiny/flux1_vae_ae.safetensors", "tests/data/tiny/flux1_vae/config.json"); }

static void test_bfl_no_config(void) {
    kiln_err err = {0};
    kiln_st_file *ck = NULL;
    kiln_flux2_vae *m = NULL;
    CHECK(kiln_st_open(test_src_path("tests/data/tiny/flux1_vae_ae.safetensors"), &ck, &err) == KILN_OK);
    /* FLUX.1's GroupNorm(32) does not divide the tiny channels: refused by name, not run wrong */
    CHECK(kiln_flux1_vae_load_config(ck, NULL, &m, &err) == KILN_E_FORMAT);
    CHECK(strstr(err.msg, "norm_num_groups") != NULL);
    kiln_st_close(ck);
}

static void test_unscale(void) {
    kiln_flux2_vae m;
    memset(&m, 0, sizeof m);
    m.scaling_factor = 0.3611;
    m.shift_factor = 0.1159;
    float z[3] = {1.0f, -0.5f, 0.0f};
    kiln_flux1_vae_unscale(&m, z, 3);
    CHECK(z[0] == 1.0f / 0.3611f + 0.1159f);
    CHECK(z[1] == -0.5f / 0.3611f + 0.1159f);
    CHECK(z[2] == 0.1159f);
}

/* A config edited by one key: the load must fail with want, naming key. */
static void refuse(const char *key, const char *value, kiln_status want) {
    char dir[] = "/tmp/kiln_flux1_vae_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char p[512];
    snprintf(p, sizeof p, "%s/config.json", dir);
    json_error_t je;
    json_t *c = json_load_file(test_src_path("tests/data/tiny/flux1_vae/config.json"), 0, &je);
    CHECK(c != NULL);
    if (!c) return;
    json_object_set_new(c, key, json_loads(value, JSON_DECODE_ANY, &je));
    CHECK(json_dump_file(c, p, 0) == 0);
    json_decref(c);
    kiln_err err = {0};
    kiln_st_file *ck = NULL;
    kiln_flux2_vae *m = NULL;
    CHECK(kiln_st_open(test_src_path("tests/data/tiny/flux1_vae"), &ck, &err) == KILN_OK);
    kiln_status s = kiln_flux1_vae_load_config(ck, p, &m, &err);
    CHECK_MSG(s == want, "%s=%s: status %d (%s)", key, value, (int)s, err.msg);
    CHECK_MSG(strstr(err.msg, key) != NULL, "%s: message \"%s\" does not name it", key, err.msg);
    kiln_flux2_vae_free(m);
    kiln_st_close(ck);
    unlink(p);
    rmdir(dir);
}

static void test_refusals(void) {
    refuse("shift_factor", "null", KILN_E_UNSUPPORTED);
    refuse("use_post_quant_conv", "true", KILN_E_FORMAT);
    refuse("use_quant_conv", "true", KILN_E_FORMAT);
    refuse("act_fn", "\"relu\"", KILN_E_UNSUPPORTED);
    refuse("mid_block_add_attention", "false", KILN_E_UNSUPPORTED);
    refuse("latent_channels", "16", KILN_E_UNSUPPORTED);
    refuse("layers_per_block", "2", KILN_E_FORMAT);
    refuse("up_block_types", "[\"AttnUpDecoderBlock2D\"]", KILN_E_UNSUPPORTED);
    refuse("scaling_factor", "0", KILN_E_FORMAT);
    /* the FLUX.2 VAE (batch norm) is not FLUX.1's */
    kiln_err err = {0};
    kiln_st_file *ck = NULL;
    kiln_flux2_vae *m = NULL;
    CHECK(kiln_st_open(test_src_path("tests/data/tiny/diffusers/vae"), &ck, &err) == KILN_OK);
    CHECK(kiln_flux1_vae_load_config(ck, NULL, &m, &err) == KILN_E_FORMAT);
    CHECK(strstr(err.msg, "bn.running_mean") != NULL);
    kiln_st_close(ck);
}

int main(void) {
    RUN(test_diffusers);
    RUN(test_bfl);
    RUN(test_bfl_no_config);
    RUN(test_unscale);
    RUN(test_refusals);
    return test_summary();
}

/* test_models_vae.c - the FLUX.2 VAE decoder on the tiny model against the diffusers golden (vae_f32; the
 * default FAST precision against vae_bf16), the latent transforms (patchify, BN) and the pixel conversion. */
#include <string.h>

#include "golden.h"
#include "models/flux2_vae.h"
#include "models/latent.h"
#include "test.h"

static void run_file(const char *path) {
    kiln_err err = {0};
    kiln_st_file *ck = NULL;
    CHECK_MSG(kiln_st_open(test_src_path(path), &ck, &err) == KILN_OK, "%s", err.msg);
    if (!ck) return;
    kiln_flux2_vae *m = NULL;
    CHECK_MSG(kiln_flux2_vae_load(ck, &m, &err) == KILN_OK, "%s", err.msg);
    kiln_backend *be = NULL;
    CHECK(kiln_backend_open_cpu(0, &be, &err) == KILN_OK);
    golden g;
    if (!m || !be || !golden_open(&g, "vae_f32")) goto out;
    be->precision = KILN_PREC_EXACT;
    CHECK_EQ_INT(kiln_flux2_vae_scale(m), 8);
    CHECK_EQ_INT(m->z_ch, 32);
    float *z = golden_f32(&g, "decode.latent", NULL);
    float *img = calloc(3 * 48 * 80, sizeof(float));
    if (z) {
        CHECK_MSG(kiln_flux2_vae_decode(m, be, z, 6, 10, img, &err) == KILN_OK, "%s", err.msg);
        golden_compare(&g, "decode.image", img, 3 * 48 * 80, "");
    }
    /* encoder: image -> posterior mean */
    CHECK(m->has_encoder);
    float *in = golden_f32(&g, "encode.image", NULL), *mean = calloc(32 * 6 * 10, sizeof(float));
    if (in && m->has_encoder) {
        CHECK_MSG(kiln_flux2_vae_encode(m, be, in, 48, 80, mean, &err) == KILN_OK, "%s", err.msg);
        golden_compare(&g, "encode.mean", mean, 32 * 6 * 10, "");
        CHECK(kiln_flux2_vae_encode(m, be, in, 44, 80, mean, &err) == KILN_E_INVALID);
    }
    /* the default (FAST, bf16 matmul and conv inputs) precision against the official bf16 run, with its
     * tolerances; the same inputs */
    golden gb;
    if (golden_open(&gb, "vae_bf16")) {
        be->precision = KILN_PREC_FAST;
        float *zb = golden_f32(&gb, "decode.latent", NULL), *inb = golden_f32(&gb, "encode.image", NULL);
        CHECK(zb && z && !memcmp(zb, z, 32 * 6 * 10 * sizeof(float)));
        CHECK(inb && in && !memcmp(inb, in, 3 * 48 * 80 * sizeof(float)));
        if (zb) {
            CHECK_MSG(kiln_flux2_vae_decode(m, be, zb, 6, 10, img, &err) == KILN_OK, "%s", err.msg);
            golden_compare(&gb, "decode.image", img, 3 * 48 * 80, " (fast)");
        }
        if (inb && m->has_encoder) {
            CHECK_MSG(kiln_flux2_vae_encode(m, be, inb, 48, 80, mean, &err) == KILN_OK, "%s", err.msg);
            golden_compare(&gb, "encode.mean", mean, 32 * 6 * 10, " (fast)");
        }
        be->precision = KILN_PREC_EXACT;
        free(zb);
        free(inb);
        golden_close(&gb);
    }
    free(in);
    free(mean);
    free(z);
    free(img);
    golden_close(&g);
out:
    kiln_flux2_vae_free(m);
    if (be) kiln_backend_close(be);
    kiln_st_close(ck);
}

static void test_diffusers_vae(void) { run_file("tests/data/tiny/diffusers/vae"); }
static void test_comfy_vae(void) { run_file("tests/data/tiny/comfy/flux2-vae.safetensors"); }

static void test_patchify_roundtrip(void) {
    enum { C = 2, H = 3, W = 4 };
    float z[C * 2 * H * 2 * W], zp[4 * C * H * W], back[C * 2 * H * 2 * W];
    for (int i = 0; i < C * 4 * H * W; i++) z[i] = (float)i;
    kiln_latent_patchify(z, C, H, W, zp);
    /* zp[c*4 + pi*2 + pj, i, j] = z[c, 2i+pi, 2j+pj]: channel 1*4+1*2+0 = 6 at (i=2, j=3) is z[1, 5, 6] */
    CHECK_EQ_INT((int)zp[6 * H * W + 2 * W + 3], (int)z[1 * (2 * H) * (2 * W) + 5 * (2 * W) + 6]);
    kiln_latent_unpatchify(zp, C, H, W, back);
    CHECK(memcmp(z, back, sizeof z) == 0);
    float mean[2] = {0.5f, -1}, var[2] = {4, 0.25f}, x[4] = {1, 2, 3, 4}, x0[4];
    memcpy(x0, x, sizeof x);
    kiln_latent_bn_denormalize(x, 2, 2, mean, var, 1e-4f);
    CHECK_NEAR(x[0], 1 * sqrtf(4 + 1e-4f) + 0.5f, 1e-6);
    kiln_latent_bn_normalize(x, 2, 2, mean, var, 1e-4f);
    for (int i = 0; i < 4; i++) CHECK_NEAR(x[i], x0[i], 1e-6);
    float grid[3 * 2 * 2], tok[4 * 3], g2[12];
    for (int i = 0; i < 12; i++) grid[i] = (float)i;
    kiln_grid_to_tokens(grid, 3, 2, 2, tok);
    CHECK_EQ_INT((int)tok[1 * 3 + 2], (int)grid[2 * 4 + 1]); /* token 1, channel 2 */
    kiln_tokens_to_grid(tok, 3, 2, 2, g2);
    CHECK(memcmp(grid, g2, sizeof grid) == 0);
}

static void test_pixels(void) {
    /* x/2 + 0.5 clamped, *255, rounded half to even (numpy/torch round) */
    float x[3] = {-2.0f, 1.0f, (2 * 0.5f / 255.0f) * 1.0f - 1.0f};
    uint8_t rgb[3];
    kiln_image_from_vae(x, 1, 1, rgb);
    CHECK_EQ_INT(rgb[0], 0);
    CHECK_EQ_INT(rgb[1], 255);
    CHECK(rgb[2] <= 1);
}

int main(void) {
    RUN(test_diffusers_vae);
    RUN(test_comfy_vae);
    RUN(test_patchify_roundtrip);
    RUN(test_pixels);
    return test_summary();
}

/* test_models_vae_tiled.c - the tiled VAE decode (models/vae_tiled.h): against diffusers' own tiled_decode
 * (golden vae_tiled_f32: 8-latent tiles over a 19x26 latent, edge tiles shorter than the blend), its error
 * against the untiled decode as a PSNR bar, a tile covering the latent equal to the untiled decode bit for bit,
 * and the plan's validation. */
#include <math.h>
#include <string.h>

#include "golden.h"
#include "models/flux2_vae.h"
#include "models/latent.h"
#include "models/vae_tiled.h"
#include "test.h"

enum { ZH = 19, ZW = 26, H = ZH * 8, W = ZW * 8 };

static kiln_st_file *ck;
static kiln_flux2_vae *vae;
static kiln_backend *be;

static int setup(void) {
    kiln_err err = {0};
    CHECK_MSG(kiln_st_open(test_src_path("tests/data/tiny/diffusers/vae"), &ck, &err) == KILN_OK, "%s", err.msg);
    if (ck) CHECK_MSG(kiln_flux2_vae_load(ck, &vae, &err) == KILN_OK, "%s", err.msg);
    CHECK(kiln_backend_open_cpu(0, &be, &err) == KILN_OK);
    if (be) be->precision = KILN_PREC_EXACT;
    return ck && vae && be;
}

/* PSNR in dB of two RGB8 renderings of [3, h, w] VAE outputs (what a user sees); 999 when equal. */
static double psnr_u8(const float *a, const float *b, int h, int w) {
    size_t n = (size_t)3 * h * w;
    uint8_t *pa = malloc(n), *pb = malloc(n);
    kiln_image_from_vae(a, h, w, pa);
    kiln_image_from_vae(b, h, w, pb);
    double sq = 0;
    for (size_t i = 0; i < n; i++) sq += ((double)pa[i] - pb[i]) * ((double)pa[i] - pb[i]);
    free(pa);
    free(pb);
    return sq == 0 ? 999 : 10 * log10(255.0 * 255.0 / (sq / n));
}

static void test_official_tiled(void) {
    golden g;
    if (!golden_open(&g, "vae_tiled_f32")) return;
    kiln_err err = {0};
    float *z = golden_f32(&g, "decode.latent", NULL), *img = calloc((size_t)3 * H * W, sizeof(float));
    kiln_vae_tiles t;
    CHECK(kiln_vae_tiles_plan(vae, ZH, ZW, 8, &t, &err) == KILN_OK);
    CHECK_EQ_INT(t.ny, 4);
    CHECK_EQ_INT(t.nx, 5);
    CHECK_EQ_INT(t.blend, 16);
    CHECK_EQ_INT(t.limit, 48);
    if (z) {
        for (size_t i = 0; i < (size_t)3 * H * W; i++) img[i] = NAN; /* every pixel must be written */
        CHECK_MSG(kiln_flux2_vae_decode_tiled(vae, be, &t, z, img, &err) == KILN_OK, "%s", err.msg);
        golden_compare(&g, "decode.image", img, (size_t)3 * H * W, " (tiled)");
    }
    free(z);
    free(img);
    golden_close(&g);
}

/* The price of tiling: each tile has its own GroupNorm statistics and mid-block attention. Measured on the tiny
 * random VAE (19x26 latent, 152x208 image, RGB8): 8-latent tiles 15.1 dB, 16-latent 21.4 dB; the bars sit
 * ~0.6 dB under. (A trained VAE is far smoother than random weights; this bar is for regressions.) */
static void test_psnr_vs_untiled(void) {
    golden g;
    if (!golden_open(&g, "vae_tiled_f32")) return;
    kiln_err err = {0};
    float *z = golden_f32(&g, "decode.latent", NULL);
    size_t n = (size_t)3 * H * W;
    float *full = calloc(n, sizeof(float)), *tiled = calloc(n, sizeof(float));
    if (z) CHECK_MSG(kiln_flux2_vae_decode(vae, be, z, ZH, ZW, full, &err) == KILN_OK, "%s", err.msg);
    static const struct { int tile; double bar; } cases[] = {{8, 14.5}, {16, 20.8}};
    for (int c = 0; c < 2 && z; c++) {
        kiln_vae_tiles t;
        CHECK(kiln_vae_tiles_plan(vae, ZH, ZW, cases[c].tile, &t, &err) == KILN_OK);
        CHECK_MSG(kiln_flux2_vae_decode_tiled(vae, be, &t, z, tiled, &err) == KILN_OK, "%s", err.msg);
        double p = psnr_u8(full, tiled, H, W);
        printf("  tile %2d latent (%3d px), %dx%d tiles: PSNR vs untiled %.2f dB (bar %.1f)\n", cases[c].tile,
               cases[c].tile * 8, t.nx, t.ny, p, cases[c].bar);
        CHECK_MSG(p >= cases[c].bar, "tile %d: %.2f dB < %.1f", cases[c].tile, p, cases[c].bar);
        CHECK_MSG(p < 200, "tile %d: tiled equals untiled, the tiles were not decoded alone", cases[c].tile);
    }
    /* one tile covering the latent is the untiled decode, bit for bit */
    kiln_vae_tiles t;
    CHECK(kiln_vae_tiles_plan(vae, ZH, ZW, 36, &t, &err) == KILN_OK);
    CHECK_EQ_INT(t.nx * t.ny, 1);
    if (z) {
        CHECK_MSG(kiln_flux2_vae_decode_tiled(vae, be, &t, z, tiled, &err) == KILN_OK, "%s", err.msg);
        CHECK(memcmp(full, tiled, n * sizeof(float)) == 0);
    }
    free(z);
    free(full);
    free(tiled);
    golden_close(&g);
}

static void test_plan(void) {
    kiln_err err = {0};
    kiln_vae_tiles t;
    CHECK(kiln_vae_tiles_plan(vae, 64, 64, 6, &t, &err) == KILN_E_INVALID);
    CHECK(kiln_vae_tiles_plan(vae, 64, 64, 10, &t, &err) == KILN_E_INVALID);
    CHECK(kiln_vae_tiles_plan(vae, 0, 64, 16, &t, &err) == KILN_E_INVALID);
    CHECK(kiln_vae_tiles_plan(vae, 512, 512, 64, &t, &err) == KILN_OK);
    CHECK_EQ_INT(t.stride, 48);
    CHECK_EQ_INT(t.nx, 11); /* 0, 48, ..., 480 */
    CHECK_EQ_INT(t.limit, 384);
    int y0, x0, th, tw;
    kiln_vae_tile_rect(&t, 10, 3, &y0, &x0, &th, &tw);
    CHECK_EQ_INT(y0, 480);
    CHECK_EQ_INT(th, 32);
    CHECK_EQ_INT(tw, 64);
}

int main(void) {
    if (setup()) {
        RUN(test_official_tiled);
        RUN(test_psnr_vs_untiled);
        RUN(test_plan);
    }
    kiln_flux2_vae_free(vae);
    if (be) kiln_backend_close(be);
    kiln_st_close(ck);
    return test_summary();
}

/* test_pipeline_vae_tiled_mem.c - a tiled decode's peak memory is bounded by the tile, not the image.
 *
 * The bound checked: during the decode the peak resident set (VmHWM, reset before it) grows by at most the
 * plan's workspace (kiln_vae_tiles_workspace: one tile's decode + the blend strips) plus 64 MB, while the untiled
 * decode would need kiln_flux2_vae_workspace of the whole latent (at 4096x4096: three 64-channel 4096x4096 f32
 * activations, 12.9 GB, and a 262,144-token mid-block attention). The f32 image itself is allocated and touched
 * before the reset, so it is not counted.
 *
 * Sizes: by default a 1024x192 image with 32-latent (256-pixel) tiles (6x1 tiles, a few seconds); with
 * KILN_VAE_MEM_4K=1 the 4096x4096 image with 64-latent tiles (11x11 tiles, ~7 CPU-minutes on the tiny VAE:
 * scripts/bench-vae-tiled.sh runs it and docs/benchmarks.md has its figures). The same script runs it on a
 * full-size VAE (KILN_VAE_MEM_MODEL=folder, KILN_VAE_MEM_SIDE=pixels, KILN_VAE_MEM_TILE=latent pixels). */
#include <math.h>
#include <string.h>

#include "models/flux2_vae.h"
#include "models/vae_tiled.h"
#include "pipeline/memory.h"
#include "test.h"

#define SLACK_MB 64.0

/* Under AddressSanitizer the resident set says nothing about the decode: its quarantine keeps freed blocks
 * resident and every allocation carries redzones and shadow. The bound is then not checked (and says so); the
 * release build checks it. */
#if defined(__SANITIZE_ADDRESS__)
#define RSS_MEANINGFUL 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RSS_MEANINGFUL 0
#endif
#endif
#ifndef RSS_MEANINGFUL
#define RSS_MEANINGFUL 1
#endif

static void test_bound(void) {
    const char *e4k = getenv("KILN_VAE_MEM_4K"), *model = getenv("KILN_VAE_MEM_MODEL");
    const char *side = getenv("KILN_VAE_MEM_SIDE"), *etile = getenv("KILN_VAE_MEM_TILE");
    bool big = e4k && !strcmp(e4k, "1");
    int zh = big ? 512 : 24, zw = big ? 512 : 128, tile = big ? 64 : 32;
    if (side) zh = zw = atoi(side) / 8; /* the benchmark's knobs (scripts/bench-vae-tiled.sh) */
    if (etile) tile = atoi(etile);
    kiln_err err = {0};
    kiln_st_file *ck = NULL;
    kiln_flux2_vae *vae = NULL;
    kiln_backend *be = NULL;
    const char *path = model ? model : test_src_path("tests/data/tiny/diffusers/vae");
    CHECK_MSG(kiln_st_open(path, &ck, &err) == KILN_OK, "%s", err.msg);
    if (ck) CHECK_MSG(kiln_flux2_vae_load(ck, &vae, &err) == KILN_OK, "%s", err.msg);
    CHECK(kiln_backend_open_cpu(0, &be, &err) == KILN_OK);
    size_t nz = (size_t)(vae ? vae->z_ch : 32) * zh * zw, n = (size_t)3 * zh * 8 * zw * 8;
    float *z = malloc(nz * sizeof(float)), *img = malloc(n * sizeof(float));
    if (!vae || !be || !z || !img) goto out;
    uint32_t s = 12345; /* a deterministic latent: sinusoids plus LCG noise */
    for (size_t i = 0; i < nz; i++) {
        s = s * 1664525u + 1013904223u;
        z[i] = sinf((float)(i % zw) * 0.05f + (float)(i / ((size_t)zh * zw))) + ((float)(s >> 8) / 16777216.0f - 0.5f);
    }
    for (size_t i = 0; i < n; i++) img[i] = NAN; /* touched: resident before the reset; every pixel must be written */
    kiln_vae_tiles t;
    CHECK(kiln_vae_tiles_plan(vae, zh, zw, tile, &t, &err) == KILN_OK);
    size_t host = 0, dev = kiln_vae_tiles_workspace(vae, &t, KILN_DT_F32, &host);
    double bound = (double)(dev + host) / 1e6 + SLACK_MB;
    double untiled = (double)kiln_flux2_vae_workspace(vae, zh, zw, KILN_DT_F32) / 1e6;
    kiln_mem_reset_peak();
    size_t rss0 = kiln_mem_peak_rss();
    CHECK_MSG(kiln_flux2_vae_decode_tiled(vae, be, &t, z, img, &err) == KILN_OK, "%s", err.msg);
    size_t rss1 = kiln_mem_peak_rss();
    double grew = ((double)rss1 - (double)rss0) / 1e6;
    printf("  %dx%d tiled decode, %d-latent tiles (%dx%d): peak RSS %.1f -> %.1f MB, +%.1f MB (bound %.1f MB: "
           "workspace %.1f + %.0f slack; the untiled decode's workspace %.1f MB)\n", zw * 8, zh * 8, tile, t.nx, t.ny,
           rss0 / 1e6, rss1 / 1e6, grew, bound, (dev + host) / 1e6, SLACK_MB, untiled);
    CHECK(rss0 > 0 && rss1 > 0);
    if (RSS_MEANINGFUL) CHECK_MSG(grew <= bound, "peak RSS grew %.1f MB > %.1f MB", grew, bound);
    else printf("  NOT RUN under AddressSanitizer: the peak-RSS bound (checked in the release build)\n");
    CHECK(bound < untiled);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += !isfinite(img[i]);
    CHECK_MSG(bad == 0, "%zu pixels not written or not finite", bad);
out:
    free(z);
    free(img);
    kiln_flux2_vae_free(vae);
    if (be) kiln_backend_close(be);
    kiln_st_close(ck);
}

int main(void) {
    RUN(test_bound);
    return test_summary();
}

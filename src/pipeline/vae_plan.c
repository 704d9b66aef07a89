/* vae_plan.c - see vae_plan.h. */
#include "pipeline/vae_plan.h"

size_t kiln_vae_plan_bytes(const kiln_flux2_vae *m, int h, int w, int tile, kiln_dtype dt) {
    kiln_vae_tiles t;
    kiln_err err = {0};
    if (tile <= 0 || kiln_vae_tiles_plan(m, h, w, tile, &t, &err) != KILN_OK) return kiln_flux2_vae_workspace(m, h, w, dt);
    size_t host = 0, dev = kiln_vae_tiles_workspace(m, &t, dt, &host);
    return dev + host;
}


int kiln_vae_pick_tile(int forced, size_t limit, size_t (*release_bytes)(void *ctx, int tile), void *ctx) {
    if (forced) return forced > 0 ? forced : 0; /* < 0: never tiled */
    if (!limit || release_bytes(ctx, 0) <= limit) return 0;
    int t = 128;
    while (t > 32 && release_bytes(ctx, t) > limit) t /= 2;
    return t;
}

kiln_status kiln_vae_tile_check(int tile, kiln_err *err) {
    if (tile > 0 && (tile < 8 || tile % 4))
        return KILN_FAIL(err, KILN_E_INVALID, "VAE tile %d: must be a multiple of 4, >= 8", tile);
    return KILN_OK;
}

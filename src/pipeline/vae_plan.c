/* vae_plan.c - see vae_plan.h. */
#include "pipeline/vae_plan.h"

size_t kiln_vae_plan_bytes(const kiln_flux2_vae *m, int h, int w, int tile) {
    kiln_vae_tiles t;
    kiln_err err = {0};
    if (tile <= 0 || kiln_vae_tiles_plan(m, h, w, tile, &t, &err) != KILN_OK) return kiln_flux2_vae_workspace(m, h, w);
    size_t host = 0, dev = kiln_vae_tiles_workspace(m, &t, &host);
    return dev + host;
}


/* vae_plan.h - which VAE decode a request runs (whole, or in tiles: models/vae_tiled.h) and what it costs. */
#ifndef KILN_PIPELINE_VAE_PLAN_H
#define KILN_PIPELINE_VAE_PLAN_H

#include "models/vae_tiled.h"

/* Bytes of work memory a decode of an h x w latent needs: untiled (tile 0) or in tile x tile tiles (backend and
 * host work buffers together; the image itself is not counted). */
size_t kiln_vae_plan_bytes(const kiln_flux2_vae *m, int h, int w, int tile);

#endif

/* vae_plan.h - which VAE decode a request runs (whole, or in tiles: models/vae_tiled.h) and what it costs. */
#ifndef KILN_PIPELINE_VAE_PLAN_H
#define KILN_PIPELINE_VAE_PLAN_H

#include "models/vae_tiled.h"

/* Bytes of work memory a decode of an h x w latent needs: untiled (tile 0) or in tile x tile tiles (backend and
 * host work buffers together; the image itself is not counted). */
size_t kiln_vae_plan_bytes(const kiln_flux2_vae *m, int h, int w, int tile, kiln_dtype dt);

/* The decode's tile side for a request: `forced` when > 0, untiled when < 0; when 0, 0 (untiled) when the request's bytes with the
 * untiled decode fit `limit` (0: no limit), else the largest of 128, 64 and 32 latent pixels whose bytes fit (32
 * when none does: the caller's memory check then refuses the request). release_bytes(ctx, tile) gives the
 * request's bytes, text encoder released, when it decodes with that tile. */
/* The engine's forced tile side (kiln_engine_config.vae_tile > 0) must be a multiple of 4, at least 8. */
kiln_status kiln_vae_tile_check(int tile, kiln_err *err);
int kiln_vae_pick_tile(int forced, size_t limit, size_t (*release_bytes)(void *ctx, int tile), void *ctx);

#endif

/* vae_tiled.h - the FLUX.2 VAE decode in overlapping tiles, as diffusers' AutoencoderKLFlux2.tiled_decode does
 * it, with peak memory bounded by the tile size instead of the image size.
 *
 *     kiln_vae_tiles t;
 *     KILN_TRY(kiln_vae_tiles_plan(vae, h, w, 64, &t, &err));          // 64x64-latent tiles (512 px)
 *     KILN_TRY(kiln_flux2_vae_decode_tiled(vae, be, &t, z, img, &err)); // z backend [z, h, w] -> img HOST [3, H, W]
 *
 * The tiling (diffusers' tile_overlap_factor 0.25, kept so that kiln's tiled image is the official tiled image):
 * tiles of T x T latent pixels start every stride = 3T/4 latent pixels (edge tiles are cut short by the latent's
 * edge). Each tile is decoded alone - its own GroupNorm statistics and its own mid-block attention, which is why
 * a tiled image differs from the untiled one (tests/unit/test_models_vae_tiled.c measures by how much). In
 * row-major order each decoded tile (S = 8T pixels) is blended with the already-blended tile above it over
 * blend = S/4 rows and then with the tile to its left over blend columns, linearly: row y < e of the tile becomes
 * above[rows_above - e + y] * (1 - y/e) + tile[y] * (y/e), e = min(blend, rows above, rows of the tile) (the same
 * by columns); then its top-left 6T x 6T pixels (= stride * 8) are its part of the image.
 *
 * Memory: one tile's decode workspace on the backend plus, on the host, the image, one tile, the bottom strips
 * (blend rows) of the row of tiles above and the right strip of the tile to the left - never the whole image's
 * activations. kiln_vae_tiles_workspace() gives the figure the pipeline's memory estimate uses.
 */
#ifndef KILN_MODELS_VAE_TILED_H
#define KILN_MODELS_VAE_TILED_H

#include "models/flux2_vae.h"

typedef struct kiln_vae_tiles {
    int h, w;          /* latent size */
    int tile, stride;  /* latent pixels: T (a multiple of 4, >= 8) and 3T/4 */
    int scale;         /* decoder upscale (8) */
    int blend, limit;  /* image pixels: S/4 and the S - S/4 = stride * scale kept of each tile */
    int ny, nx;        /* tiles down and across */
} kiln_vae_tiles;

/* Plans the tiles of an h x w latent. tile < 8 or not a multiple of 4: KILN_E_INVALID. A tile larger than the
 * latent is allowed (one tile then: the same as the untiled decode). */
kiln_status kiln_vae_tiles_plan(const kiln_flux2_vae *m, int h, int w, int tile, kiln_vae_tiles *t, kiln_err *err);

/* Latent origin and size of tile (i, j). */
void kiln_vae_tile_rect(const kiln_vae_tiles *t, int i, int j, int *y0, int *x0, int *th, int *tw);

/* Backend bytes (one tile's decode, activations in dt) and host bytes (tile, strips; not the image) of a tiled
 * decode. */
size_t kiln_vae_tiles_workspace(const kiln_flux2_vae *m, const kiln_vae_tiles *t, kiln_dtype dt, size_t *host_bytes);

/* Decodes tile (i, j) of z (backend [z_ch, h, w]) into out (HOST [3, 8th, 8tw]); zt and pt are backend scratch
 * of z_ch*T*T and 3*S*S floats. */
kiln_status kiln_vae_decode_one_tile(const kiln_flux2_vae *m, kiln_backend *be, const kiln_vae_tiles *t,
                                     const float *z, int i, int j, float *zt, float *pt, float *out, kiln_err *err);

/* The blend state of a tiled decode: strips of the tiles already placed (host memory). */
typedef struct kiln_vae_blender kiln_vae_blender;
kiln_status kiln_vae_blender_open(const kiln_vae_tiles *t, kiln_vae_blender **out, kiln_err *err);
/* Blends decoded tile (i, j) (HOST [3, 8th, 8tw], modified in place) with its neighbours and writes its part into
 * img (HOST [3, 8h, 8w]). Tiles must come in row-major order. */
void kiln_vae_blender_put(kiln_vae_blender *b, int i, int j, float *tile, float *img);
void kiln_vae_blender_close(kiln_vae_blender *b);

/* The whole tiled decode on one backend: z backend [z_ch, h, w] -> img HOST [3, 8h, 8w]. */
kiln_status kiln_flux2_vae_decode_tiled(const kiln_flux2_vae *m, kiln_backend *be, const kiln_vae_tiles *t,
                                        const float *z, float *img, kiln_err *err);

#endif

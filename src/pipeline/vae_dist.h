/* vae_dist.h - the tiled VAE decode spread over the ranks of a communicator, gathered on rank 0.
 *
 * Row by row of tiles (models/vae_tiled.h), tile j of the row is decoded by rank j % P; one all-gather per row
 * brings the row's decoded tiles to every rank (slot-padded: ceil(nx/P) tiles per rank), and rank 0 blends them
 * in the single-rank order - so rank 0's image is the single-rank tiled image bit for bit (each tile's decode is
 * the same computation wherever it runs; the blend is the same code in the same order). Other ranks leave img
 * untouched (it may be NULL there). With one rank this is kiln_flux2_vae_decode_tiled. */
#ifndef KILN_PIPELINE_VAE_DIST_H
#define KILN_PIPELINE_VAE_DIST_H

#include "compute/comm.h"
#include "models/vae_tiled.h"

kiln_status kiln_vae_decode_distributed(const kiln_flux2_vae *m, kiln_backend *be, kiln_comm *comm,
                                        const kiln_vae_tiles *t, const float *z, float *img, kiln_err *err);

#endif

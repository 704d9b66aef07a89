/* decode_batch.h - the Decoding stage of every model family (generate.c, generate_flux1.c): each image's latent
 * tokens are downloaded, turned into the VAE's input by the family's own rule (its patch layout and latent
 * normalisation), decoded whole or in tiles spread over the ranks (vae_dist.h), and stored in the result. */
#ifndef KILN_PIPELINE_DECODE_BATCH_H
#define KILN_PIPELINE_DECODE_BATCH_H

#include "compute/comm.h"
#include "models/flux2_vae.h"
#include "pipeline/trace.h"

typedef struct kiln_decode_batch {
    kiln_backend *be;
    kiln_comm *comm;           /* the ranks sharing a tiled decode (one rank: the plain tiled decode) */
    const kiln_flux2_vae *vae; /* FLUX.2's or FLUX.1's autoencoder (the same decoder shape) */
    const float *x;            /* backend memory: B images of C x h16 * w16 latent tokens */
    int B, C, h16, w16;
    int tile;                  /* 0: untiled; else the latent tile side (vae_plan.h) */
    /* The family's rule: tokens [h16 * w16, C] -> the VAE's input z [z_ch, 2 h16, 2 w16]; grid is scratch of
     * C * h16 * w16 floats. */
    void (*to_vae_input)(void *ctx, const float *tok, float *grid, float *z);
    void *ctx;
    kiln_result *res;
    const kiln_request *req;
    kiln_trace_fn trace;
    void *trace_ctx;
} kiln_decode_batch;

kiln_status kiln_decode_batch_run(const kiln_decode_batch *d, kiln_err *err);

#endif

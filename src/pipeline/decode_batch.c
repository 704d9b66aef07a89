/* decode_batch.c - see decode_batch.h. */
#include "pipeline/decode_batch.h"

#include "base/alloc.h"
#include "pipeline/run_common.h"
#include "pipeline/vae_dist.h"

kiln_status kiln_decode_batch_run(const kiln_decode_batch *d, kiln_err *err) {
    kiln_backend *be = d->be;
    const int H = d->h16 * 16, W = d->w16 * 16;
    const size_t per = (size_t)d->C * d->h16 * d->w16, npix = (size_t)3 * H * W;
    float *tok = kiln_malloc(per * sizeof(float)), *grid = kiln_malloc(per * sizeof(float));
    float *z = kiln_malloc(per * sizeof(float)), *pix = kiln_malloc(npix * sizeof(float));
    float *zd = be->ops->alloc(be, per * sizeof(float));
    float *pd = d->tile ? NULL : be->ops->alloc(be, npix * sizeof(float)); /* the tiled decode writes pix */
    kiln_status s = KILN_OK;
    if (!tok || !grid || !z || !pix || !zd || (!pd && !d->tile)) {
        s = KILN_FAIL(err, KILN_E_NOMEM, "decoding: out of memory");
        goto done;
    }
    for (int i = 0; i < d->B && s == KILN_OK; i++) {
        if ((s = be->ops->download(be, tok, d->x + (size_t)i * per, per * sizeof(float), err))) break;
        d->to_vae_input(d->ctx, tok, grid, z);
        if ((s = be->ops->upload(be, zd, z, per * sizeof(float), err))) break;
        if (d->tile) {
            kiln_vae_tiles t;
            if ((s = kiln_vae_tiles_plan(d->vae, 2 * d->h16, 2 * d->w16, d->tile, &t, err))) break;
            if ((s = kiln_vae_decode_distributed(d->vae, be, d->comm, &t, zd, pix, err))) break;
        } else {
            if ((s = kiln_flux2_vae_decode(d->vae, be, zd, 2 * d->h16, 2 * d->w16, pd, err))) break;
            if ((s = be->ops->download(be, pix, pd, npix * sizeof(float), err))) break;
        }
        s = kiln_result_store_image(d->res, d->req, i, pix, H, W, d->trace, d->trace_ctx, err);
    }
done:
    kiln_free(tok);
    kiln_free(grid);
    kiln_free(z);
    kiln_free(pix);
    if (zd) be->ops->free(be, zd);
    if (pd) be->ops->free(be, pd);
    return s;
}

/* edit_inputs.c - input images to DiT tokens (edit_inputs.h). */
#include "pipeline/edit_inputs.h"

#include "base/alloc.h"
#include "models/latent.h"

kiln_status kiln_edit_encode_tokens(const kiln_flux2_vae *vae, kiln_backend *be, const uint8_t *rgb, int W, int H,
                                    float *tokens, kiln_err *err) {
    if (!vae->has_encoder)
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "reference/init images need the VAE encoder, and this VAE file "
                         "has no encoder weights");
    const kiln_ops *op = be->ops;
    const int h16 = H / 16, w16 = W / 16, zc = vae->z_ch;
    const size_t npx = (size_t)3 * H * W, nz = (size_t)zc * (H / 8) * (W / 8);
    float *x = kiln_malloc(npx * sizeof(float)), *z = kiln_malloc(nz * sizeof(float));
    float *zp = kiln_malloc(nz * sizeof(float));
    float *xd = op->alloc(be, npx * sizeof(float)), *zd = op->alloc(be, nz * sizeof(float));
    kiln_status s = KILN_OK;
    if (!x || !z || !zp || !xd || !zd) {
        s = KILN_FAIL(err, KILN_E_NOMEM, "encoding a %dx%d image: out of memory", W, H);
        goto done;
    }
    kiln_image_to_vae(rgb, H, W, x); /* 2 * (p / 255) - 1, as VaeImageProcessor normalises */
    if ((s = op->upload(be, xd, x, npx * sizeof(float), err)) != KILN_OK) goto done;
    if ((s = kiln_flux2_vae_encode(vae, be, xd, H, W, zd, err)) != KILN_OK) goto done;
    if ((s = op->download(be, z, zd, nz * sizeof(float), err)) != KILN_OK) goto done;
    kiln_latent_patchify(z, zc, h16, w16, zp);                       /* [4 zc, h16, w16] */
    kiln_latent_bn_normalize(zp, 4 * zc, (int64_t)h16 * w16, vae->bn_mean.data, vae->bn_var.data, vae->bn_eps);
    kiln_grid_to_tokens(zp, 4 * zc, h16, w16, tokens);
done:
    kiln_free(x);
    kiln_free(z);
    kiln_free(zp);
    if (xd) op->free(be, xd);
    if (zd) op->free(be, zd);
    return s;
}

int kiln_img2img_start(int steps, double strength) {
    double init = steps * strength;
    if (init > steps) init = steps;
    double t = steps - init;
    return (int)(t > 0 ? t : 0);
}

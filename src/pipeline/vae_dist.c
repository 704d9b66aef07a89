/* vae_dist.c - see vae_dist.h. */
#include "pipeline/vae_dist.h"

#include "base/alloc.h"

kiln_status kiln_vae_decode_distributed(const kiln_flux2_vae *m, kiln_backend *be, kiln_comm *comm,
                                        const kiln_vae_tiles *t, const float *z, float *img, kiln_err *err) {
    if (!comm || comm->size == 1) return kiln_flux2_vae_decode_tiled(m, be, t, z, img, err);
    const kiln_ops *op = be->ops;
    int P = comm->size, R = comm->rank, k = (t->nx + P - 1) / P;
    size_t T = (size_t)t->tile, S = T * t->scale, slot = 3 * S * S;
    float *zt = op->alloc(be, (size_t)m->z_ch * T * T * sizeof(float)), *pt = op->alloc(be, slot * sizeof(float));
    float *mine = kiln_calloc((size_t)k * slot, sizeof(float));
    float *all = kiln_malloc((size_t)P * k * slot * sizeof(float));
    kiln_vae_blender *b = NULL;
    kiln_status s = KILN_OK;
    if (!zt || !pt || !mine || !all) s = KILN_FAIL(err, KILN_E_NOMEM, "distributed VAE: out of memory");
    if (s == KILN_OK && R == 0) s = kiln_vae_blender_open(t, &b, err);
    /* every rank takes part in every row's gather even after a local failure would be a hang; a failure here is
     * an allocation or a kernel error, which ends this rank - the others then time out (comm.h) */
    for (int i = 0; i < t->ny && s == KILN_OK; i++) {
        for (int q = 0; q < k && s == KILN_OK; q++) {
            int j = q * P + R;
            if (j < t->nx) s = kiln_vae_decode_one_tile(m, be, t, z, i, j, zt, pt, mine + (size_t)q * slot, err);
        }
        if (s == KILN_OK) s = comm->ops->all_gather(comm, NULL, mine, all, (size_t)k * slot, err);
        for (int j = 0; j < t->nx && s == KILN_OK && R == 0; j++)
            kiln_vae_blender_put(b, i, j, all + ((size_t)(j % P) * k + (size_t)(j / P)) * slot, img);
    }
    kiln_vae_blender_close(b);
    kiln_free(mine);
    kiln_free(all);
    if (zt) op->free(be, zt);
    if (pt) op->free(be, pt);
    return s;
}

/* flux2_vae.c - FLUX.2 VAE decode, top to bottom (see flux2_vae.h; spec 3.2). Activations are NCHW with N = 1,
 * in the backend's activation dtype (compute/ops.h kiln_backend_act_dtype: bf16 on CUDA in FAST, as diffusers runs
 * a bf16 VAE; f32 elsewhere); the latents in and the image out stay f32. Every op is one line. */
#include <math.h>

#include "models/flux1_vae.h"
#include "models/flux2_vae.h"
#include "models/views.h"

#define CK(x) KILN_TRY(x)

/* Raises *best to the largest C*h*w the ResNets of level L reach at h x w (each holds max(cin, cout) channels)
 * and returns the channels the level's ResNets end with (c when it has none). Decoder and encoder alike. */
static size_t level_max_act(const kiln_vae_up_level *L, size_t c, int h, int w, size_t *best) {
    for (int j = 0; j < L->n_res; j++) {
        size_t cc = (size_t)(L->res[j].cin > L->res[j].cout ? L->res[j].cin : L->res[j].cout);
        if (cc * h * w > *best) *best = cc * h * w;
        c = (size_t)L->res[j].cout;
    }
    return c;
}

/* Largest C*H*W any decoder activation reaches for an h x w latent (the upsample outputs and the finest level). */
static size_t max_act(const kiln_flux2_vae *m, int h, int w) {
    size_t best = (size_t)m->z_ch * h * w;
    size_t c = (size_t)m->conv_in_w.shape[0];
    if (c * h * w > best) best = c * h * w;
    for (int i = 0; i < m->n_levels; i++) {
        const kiln_vae_up_level *L = &m->up[i];
        c = level_max_act(L, c, h, w, &best);
        if (L->upsample) {
            h *= 2;
            w *= 2;
            if (c * h * w > best) best = c * h * w;
        }
    }
    return best;
}

size_t kiln_flux2_vae_workspace(const kiln_flux2_vae *m, int h, int w, kiln_dtype dt) {
    size_t c = (size_t)m->conv_in_w.shape[0];
    return (3 * max_act(m, h, w) + 4 * c * h * w) * kiln_dtype_size(dt);
}

/* x [cin, h, w] in place -> [cout, h, w]:  x = shortcut(x) + conv2(SiLU(GN2(conv1(SiLU(GN1(x)))))). */
static kiln_status resnet(const kiln_flux2_vae *m, kiln_backend *be, const kiln_vae_resnet *r, kiln_dtype dt, void *x,
                          void *t1, void *t2, int h, int w, kiln_err *err) {
    const kiln_ops *op = be->ops;
    kiln_tensor X = kiln_view_4d(x, dt, 1, r->cin, h, w);
    kiln_tensor A = kiln_view_4d(t1, dt, 1, r->cin, h, w);
    kiln_tensor B = kiln_view_4d(t2, dt, 1, r->cout, h, w);
    kiln_tensor C = kiln_view_4d(t1, dt, 1, r->cout, h, w);
    CK(op->group_norm(be, &A, &X, m->groups, &r->n1_g, &r->n1_b, m->gn_eps, true, err));
    CK(op->conv2d(be, &B, &A, &r->conv1_w, &r->conv1_b, 1, 1, 1, err));
    CK(op->group_norm(be, &B, &B, m->groups, &r->n2_g, &r->n2_b, m->gn_eps, true, err));
    CK(op->conv2d(be, &C, &B, &r->conv2_w, &r->conv2_b, 1, 1, 1, err));
    kiln_tensor Y = kiln_view_4d(x, dt, 1, r->cout, h, w);
    if (r->sc_w.data) {
        CK(op->conv2d(be, &B, &X, &r->sc_w, &r->sc_b, 1, 0, 0, err));
        return op->add(be, &Y, &B, &C, err);
    }
    return op->add(be, &Y, &Y, &C, err);
}

/* The ResNets of one level, in place on x; *c becomes the channels they end with. */
static kiln_status level_resnets(const kiln_flux2_vae *m, kiln_backend *be, const kiln_vae_up_level *L, kiln_dtype dt,
                                 void *x, void *t1, void *t2, int h, int w, int *c, kiln_err *err) {
    for (int j = 0; j < L->n_res; j++) {
        CK(resnet(m, be, &L->res[j], dt, x, t1, t2, h, w, err));
        *c = L->res[j].cout;
    }
    return KILN_OK;
}

/* Single-head self-attention over the h*w pixels: x += proj(softmax(q k^T / sqrt(C)) v), q,k,v = lin(GN(x)). */
static kiln_status attn(const kiln_flux2_vae *m, kiln_backend *be, const kiln_vae_attn *a, kiln_dtype dt, void *x,
                        void *t1, void *abuf, int h, int w, kiln_err *err) {
    const kiln_ops *op = be->ops;
    int64_t C = a->c, S = (int64_t)h * w;
    kiln_tensor X = kiln_view_4d(x, dt, 1, C, h, w), N4 = kiln_view_4d(t1, dt, 1, C, h, w);
    CK(op->group_norm(be, &N4, &X, m->groups, &a->n_g, &a->n_b, m->gn_eps, false, err));
    /* [C, S] -> tokens [S, C] through a transposed view */
    kiln_tensor nT = kiln_view_2d(t1, dt, S, C);
    nT.stride[0] = 1;
    nT.stride[1] = S;
    kiln_tensor tok = kiln_view_2d(abuf, dt, S, C), q = kiln_view_2d(kiln_elems_at(abuf, dt, S * C), dt, S, C);
    kiln_tensor k = kiln_view_2d(kiln_elems_at(abuf, dt, 2 * S * C), dt, S, C);
    kiln_tensor v = kiln_view_2d(kiln_elems_at(abuf, dt, 3 * S * C), dt, S, C);
    CK(op->copy(be, &tok, &nT, err));
    CK(kiln_matmul(be, &q, &tok, &a->q_w, &a->q_b, err));
    CK(kiln_matmul(be, &k, &tok, &a->k_w, &a->k_b, err));
    CK(kiln_matmul(be, &v, &tok, &a->v_w, &a->v_b, err));
    CK(op->attention(be, &tok, &q, &k, &v, 1, 1, 1.0f / sqrtf((float)C), false, NULL, NULL, err));
    CK(kiln_matmul(be, &q, &tok, &a->o_w, &a->o_b, err));
    /* back to [C, S] and add the residual */
    kiln_tensor back = kiln_view_2d(t1, dt, S, C);
    back.stride[0] = 1;
    back.stride[1] = S;
    CK(op->copy(be, &back, &q, err));
    kiln_tensor X2 = kiln_view_2d(x, dt, C, S), T2 = kiln_view_2d(t1, dt, C, S);
    return op->add(be, &X2, &X2, &T2, err);
}

/* Frees what decode and encode allocated of their work buffers (NULL: never allocated). */
static void free_work(kiln_backend *be, void *x, void *t1, void *t2, void *abuf) {
    const kiln_ops *op = be->ops;
    if (x) op->free(be, x);
    if (t1) op->free(be, t1);
    if (t2) op->free(be, t2);
    if (abuf) op->free(be, abuf);
}

kiln_status kiln_flux2_vae_decode(const kiln_flux2_vae *m, kiln_backend *be, const float *z, int h, int w,
                                  float *img, kiln_err *err) {
    const kiln_ops *op = be->ops;
    size_t big = max_act(m, h, w), cmid = (size_t)m->conv_in_w.shape[0];
    const kiln_dtype dt = kiln_backend_act_dtype(be);
    const size_t es = kiln_dtype_size(dt);
    void *x = op->alloc(be, big * es), *t1 = op->alloc(be, big * es), *t2 = op->alloc(be, big * es); /* as */
    void *abuf = op->alloc(be, 4 * cmid * h * w * es); /* kiln_flux2_vae_workspace counts them */
    kiln_status s = KILN_OK;
    if (!x || !t1 || !t2 || !abuf) {
        s = KILN_FAIL(err, KILN_E_NOMEM, "VAE: out of memory for a %dx%d latent (%.1f MB)", h, w,
                      kiln_flux2_vae_workspace(m, h, w, dt) / 1e6);
        goto done;
    }
    {
        /* post_quant_conv (1x1) and conv_in */
        kiln_tensor Z = kiln_f32_4d((float *)z, 1, m->z_ch, h, w), PQ = kiln_view_4d(t1, dt, 1, m->z_ch, h, w);
        kiln_tensor pqw = kiln_tensor_make(m->pq_w.data, m->pq_w.dtype, 4, (int64_t[]){m->z_ch, m->z_ch, 1, 1});
        kiln_tensor X = kiln_view_4d(x, dt, 1, (int64_t)cmid, h, w);
        if (m->pq_w.data) { /* FLUX.1's AutoencoderKL has none (use_post_quant_conv false) */
            if ((s = op->conv2d(be, &PQ, &Z, &pqw, &m->pq_b, 1, 0, 0, err))) goto done;
            if ((s = op->conv2d(be, &X, &PQ, &m->conv_in_w, &m->conv_in_b, 1, 1, 1, err))) goto done;
        } else if ((s = op->conv2d(be, &X, &Z, &m->conv_in_w, &m->conv_in_b, 1, 1, 1, err))) {
            goto done;
        }
        /* mid: ResNet, attention, ResNet */
        if ((s = resnet(m, be, &m->mid_res[0], dt, x, t1, t2, h, w, err))) goto done;
        if ((s = attn(m, be, &m->mid_attn, dt, x, t1, abuf, h, w, err))) goto done;
        if ((s = resnet(m, be, &m->mid_res[1], dt, x, t1, t2, h, w, err))) goto done;
        /* up levels, coarsest first */
        int c = (int)cmid;
        for (int i = 0; i < m->n_levels; i++) {
            const kiln_vae_up_level *L = &m->up[i];
            if ((s = level_resnets(m, be, L, dt, x, t1, t2, h, w, &c, err))) goto done;
            if (L->upsample) {
                kiln_tensor Xs = kiln_view_4d(x, dt, 1, c, h, w), U = kiln_view_4d(t1, dt, 1, c, 2 * h, 2 * w);
                kiln_tensor Xu = kiln_view_4d(x, dt, 1, c, 2 * h, 2 * w);
                if ((s = op->upsample2x(be, &U, &Xs, err))) goto done;
                if ((s = op->conv2d(be, &Xu, &U, &L->up_w, &L->up_b, 1, 1, 1, err))) goto done;
                h *= 2;
                w *= 2;
            }
        }
        /* GroupNorm, SiLU, conv_out to RGB */
        kiln_tensor Xf = kiln_view_4d(x, dt, 1, c, h, w), Nf = kiln_view_4d(t1, dt, 1, c, h, w);
        kiln_tensor OUT = kiln_f32_4d(img, 1, 3, h, w);
        if ((s = op->group_norm(be, &Nf, &Xf, m->groups, &m->norm_out_g, &m->norm_out_b, m->gn_eps, true, err)))
            goto done;
        if ((s = op->conv2d(be, &OUT, &Nf, &m->conv_out_w, &m->conv_out_b, 1, 1, 1, err))) goto done;
        s = op->sync(be, err);
    }
done:
    free_work(be, x, t1, t2, abuf);
    return s;
}

/* Largest C*H*W of the encoder path for an H x W image. */
static size_t enc_max_act(const kiln_flux2_vae *m, int h, int w) {
    size_t c = (size_t)m->enc_in_w.shape[0], best = (size_t)3 * h * w;
    if (c * h * w > best) best = c * h * w;
    for (int i = 0; i < m->n_down; i++) {
        const kiln_vae_up_level *L = &m->down[i];
        level_max_act(L, c, h, w, &best);
        if (L->upsample) {
            h /= 2;
            w /= 2;
        }
    }
    if ((size_t)2 * m->z_ch * h * w > best) best = (size_t)2 * m->z_ch * h * w;
    return best;
}

size_t kiln_flux2_vae_encode_workspace(const kiln_flux2_vae *m, int H, int W, kiln_dtype dt) {
    if (!m->has_encoder) return 0;
    size_t es = kiln_dtype_size(dt);
    return 3 * enc_max_act(m, H, W) * es + 4 * (size_t)m->enc_mid_res[0].cin * (size_t)(H / 8) * (size_t)(W / 8) * es + 64;
}

kiln_status kiln_flux2_vae_encode(const kiln_flux2_vae *m, kiln_backend *be, const float *img, int H, int W,
                                  float *mean, kiln_err *err) {
    if (!m->has_encoder) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "VAE: this file has no encoder weights");
    if (H <= 0 || W <= 0 || H % 8 || W % 8)
        return KILN_FAIL(err, KILN_E_INVALID, "VAE encode: image %dx%d is not a multiple of 8", W, H);
    const kiln_ops *op = be->ops;
    int h = H, w = W, c = (int)m->enc_in_w.shape[0];
    size_t big = enc_max_act(m, H, W), cmid = (size_t)m->enc_mid_res[0].cin;
    const kiln_dtype dt = kiln_backend_act_dtype(be);
    const size_t es = kiln_dtype_size(dt);
    /* as kiln_flux2_vae_encode_workspace counts them */
    void *x = op->alloc(be, big * es), *t1 = op->alloc(be, big * es), *t2 = op->alloc(be, big * es);
    void *abuf = op->alloc(be, 4 * cmid * (size_t)(H / 8) * (size_t)(W / 8) * es + 64);
    kiln_status s = KILN_OK;
    if (!x || !t1 || !t2 || !abuf) {
        s = KILN_FAIL(err, KILN_E_NOMEM, "VAE encode: out of memory for a %dx%d image", W, H);
        goto done;
    }
    {
        kiln_tensor IN = kiln_f32_4d((float *)img, 1, 3, h, w), X = kiln_view_4d(x, dt, 1, c, h, w);
        if ((s = op->conv2d(be, &X, &IN, &m->enc_in_w, &m->enc_in_b, 1, 1, 1, err))) goto done;
        /* down levels, finest first: ResNets, then a stride-2 conv padded only right/bottom */
        for (int i = 0; i < m->n_down; i++) {
            const kiln_vae_up_level *L = &m->down[i];
            if ((s = level_resnets(m, be, L, dt, x, t1, t2, h, w, &c, err))) goto done;
            if (L->upsample) {
                kiln_tensor Xs = kiln_view_4d(x, dt, 1, c, h, w), D = kiln_view_4d(t1, dt, 1, c, h / 2, w / 2);
                if ((s = op->conv2d(be, &D, &Xs, &L->up_w, &L->up_b, 2, 0, 1, err))) goto done;
                h /= 2;
                w /= 2;
                kiln_tensor Xd = kiln_view_4d(x, dt, 1, c, h, w);
                if ((s = op->copy(be, &Xd, &D, err))) goto done;
            }
        }
        /* mid: ResNet, attention, ResNet; then GroupNorm, SiLU, conv_out, quant_conv */
        if ((s = resnet(m, be, &m->enc_mid_res[0], dt, x, t1, t2, h, w, err))) goto done;
        if ((s = attn(m, be, &m->enc_mid_attn, dt, x, t1, abuf, h, w, err))) goto done;
        if ((s = resnet(m, be, &m->enc_mid_res[1], dt, x, t1, t2, h, w, err))) goto done;
        int z2 = 2 * m->z_ch;
        kiln_tensor Xf = kiln_view_4d(x, dt, 1, c, h, w), Nf = kiln_view_4d(t1, dt, 1, c, h, w);
        kiln_tensor O = kiln_view_4d(t2, dt, 1, z2, h, w), Q = kiln_view_4d(x, dt, 1, z2, h, w);
        kiln_tensor qcw = kiln_tensor_make(m->qc_w.data, m->qc_w.dtype, 4, (int64_t[]){z2, z2, 1, 1});
        if ((s = op->group_norm(be, &Nf, &Xf, m->groups, &m->enc_norm_g, &m->enc_norm_b, m->gn_eps, true, err)))
            goto done;
        if ((s = op->conv2d(be, &O, &Nf, &m->enc_out_w, &m->enc_out_b, 1, 1, 1, err))) goto done;
        if (m->qc_w.data) { /* FLUX.1: use_quant_conv false */
            if ((s = op->conv2d(be, &Q, &O, &qcw, &m->qc_b, 1, 0, 0, err))) goto done;
        } else if ((s = op->copy(be, &Q, &O, err))) {
            goto done;
        }
        /* the posterior mean is the first z channels (NCHW: a contiguous prefix) */
        kiln_tensor MEAN = kiln_f32_2d(mean, 1, (int64_t)m->z_ch * h * w);
        kiln_tensor QM = kiln_view_2d(x, dt, 1, (int64_t)m->z_ch * h * w);
        if ((s = op->copy(be, &MEAN, &QM, err))) goto done;
        s = op->sync(be, err);
    }
done:
    free_work(be, x, t1, t2, abuf);
    return s;
}

void kiln_flux1_vae_unscale(const kiln_flux2_vae *m, float *z, size_t n) {
    /* torch: latents / float + float on an f32 tensor: the python scalars become f32, each op rounds */
    float sc = (float)m->scaling_factor, sh = (float)m->shift_factor;
    for (size_t i = 0; i < n; i++) {
        volatile float q = z[i] / sc;
        z[i] = q + sh;
    }
}

/* flux1_dit.c - one FLUX.1 DiT evaluation, top to bottom, as diffusers' FluxTransformer2DModel.forward
 * (see flux1_dit.h).
 *
 * Activations for a batch of B: the double blocks keep the streams apart (img [B*N, D], txt [B*L, D]) so every
 * projection runs over the whole batch; the single blocks run on S [B*(L+N), D], sample-major, text first.
 * The conditioning vector differs per sample (the CLIP pooled vector), so every modulation is [B, k*D] and the
 * modulated norms and gated residuals are applied per sample (row ranges).
 */
#include <string.h>

#include "base/alloc.h"
#include "models/dit_attention.h"
#include "models/dit_ulysses.h"
#include "models/flux1_dit.h"
#include "models/flux2_dit.h"
#include "models/rope_tables.h"
#include "models/views.h"

struct kiln_flux1_dit_ws {
    int B, L, N;
    bool have_txt;        /* txt0 holds this request's context projection */
    /* The activations below are in dt (compute/ops.h kiln_backend_act_dtype: bf16 on CUDA in FAST, as diffusers
     * runs a bf16 transformer; f32 elsewhere), the vectors after them in f32 as the official code keeps them. */
    kiln_dtype dt;
    void *img, *txt;      /* stream states [B*N, D], [B*L, D] */
    void *txt0;           /* context_embedder(T5 features), cached [B*L, D] */
    void *nrm;            /* modulated LN output [B*(L+N), D] */
    void *qkv_i, *qkv_t;  /* [B*N, 3D], [B*L, 3D] */
    void *cat, *catout;   /* one sample's [L+N, 3D] q|k|v and [L+N, D] attention output */
    void *att_i, *att_t;  /* [B*N, D], [B*L, D] */
    void *ff;             /* [B*max(N, L), F] */
    void *proj;           /* [B*(L+N), D] a projection's output before its gated residual */
    void *S;              /* [B*(L+N), D] single-stream state */
    void *qkv_s;          /* [B*(L+N), 3D] */
    void *om;             /* [B*(L+N), D + F] attention out | GELU(mlp) */
    float *sinus;         /* [2 t_ch] timestep | guidance sinusoids (host-made, uploaded) */
    float *emb;           /* [4D] timestep hidden, timestep emb, guidance hidden, guidance emb */
    float *ph, *vec;      /* [B, D] pooled hidden; conditioning, then SiLU(conditioning) */
    float *mod_i, *mod_t; /* [B, 6D] */
    float *mod_s;         /* [B, 3D] */
    float *mod_o;         /* [B, 2D] norm_out: scale | shift */
    float *rcos, *rsin;   /* [L+N, Dh/2] (with sequence parallelism: L + all ranks' image tokens) */
    /* Ulysses sequence parallelism (dit_ulysses.h; sp.comm NULL: one rank), as in flux2_dit.c: N above is this
     * rank's share of the image tokens; forward slices its rows of x into x_l and all-gathers v from v_l. */
    kiln_dit_sp sp;
};

#define WS_NBUF 25

static void ws_bufs(const kiln_flux1_dit_ws *w, void *b[WS_NBUF]) {
    void *all[WS_NBUF] = {w->img,   w->txt,  w->txt0, w->nrm,   w->qkv_i, w->qkv_t, w->cat,   w->catout,
                           w->att_i, w->att_t, w->ff,  w->proj,  w->S,     w->qkv_s, w->om,    w->sinus,
                           w->emb,   w->ph,   w->vec,  w->mod_i, w->mod_t, w->mod_s, w->mod_o, w->rcos,
                           w->rsin};
    memcpy(b, all, sizeof all);
}

void kiln_flux1_text_ids(int64_t n_txt, int32_t *ids) { memset(ids, 0, (size_t)n_txt * 3 * sizeof *ids); }

void kiln_flux1_image_ids(int h, int w, int32_t *ids) {
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            int32_t *p = ids + 3 * ((int64_t)y * w + x);
            p[0] = 0;
            p[1] = y;
            p[2] = x;
        }
}

void kiln_flux1_dit_ws_free(kiln_backend *be, kiln_flux1_dit_ws *w) {
    if (!w) return;
    void *bufs[WS_NBUF];
    ws_bufs(w, bufs);
    for (int i = 0; i < WS_NBUF; i++)
        if (bufs[i]) be->ops->free(be, bufs[i]);
    kiln_dit_sp_free(&w->sp, be);
    kiln_free(w);
}

void kiln_flux1_dit_ws_new_text(kiln_flux1_dit_ws *ws) { ws->have_txt = false; }

kiln_dtype kiln_flux1_dit_ws_act_dtype(const kiln_flux1_dit_ws *ws) { return ws->dt; }

kiln_status kiln_flux1_dit_ws_create(const kiln_flux1_dit *m, kiln_backend *be, int batch, int n_txt, int h, int w,
                                     kiln_flux1_dit_ws **out, kiln_err *err) {
    return kiln_flux1_dit_ws_create_sp(m, be, NULL, batch, n_txt, h, w, out, err);
}

size_t kiln_flux1_dit_workspace(const kiln_flux1_dit *m, int batch, int n_txt, int n_img, int sp, kiln_dtype dt) {
    /* what ws_create_sp allocates on each rank, buffer by buffer in its order */
    if (sp < 1) sp = 1;
    if (sp > 1) dt = KILN_DT_F32;
    const size_t D = m->hidden, F = m->mlp_hidden, B = batch, L = n_txt, N = (size_t)n_img / sp, T = L + N;
    const size_t rmax = B * (N > L ? N : L), Dh2 = m->head_dim / 2;
    const size_t act[] = {B * N * D,     B * L * D, B * L * D, B * T * D, B * N * 3 * D, B * L * 3 * D, T * 3 * D,
                          T * D,         B * N * D, B * L * D, rmax * F,  B * T * D,     B * T * D,     B * T * 3 * D,
                          B * T * (D + F)};
    const size_t Tf = L + (size_t)n_img; /* the RoPE tables: every rank's tokens */
    const size_t f32[] = {2 * (size_t)m->t_ch, 4 * D, B * D, B * D, B * 6 * D, B * 6 * D, B * 3 * D, B * 2 * D,
                          Tf * Dh2, Tf * Dh2};
    size_t bytes = 0;
    for (size_t i = 0; i < sizeof act / sizeof *act; i++) bytes += kiln_backend_elems_bytes(act[i], dt);
    for (size_t i = 0; i < sizeof f32 / sizeof *f32; i++) bytes += kiln_backend_elems_bytes(f32[i], KILN_DT_F32);
    if (sp > 1) bytes += kiln_dit_sp_bytes(sp, batch, n_txt, n_img, (int64_t)D, m->in_ch, m->out_ch);
    return bytes;
}

kiln_status kiln_flux1_dit_ws_create_sp(const kiln_flux1_dit *m, kiln_backend *be, kiln_comm *comm, int batch,
                                        int n_txt, int h, int w, kiln_flux1_dit_ws **out, kiln_err *err) {
    if (batch < 1 || n_txt < 1 || h < 1 || w < 1)
        return KILN_FAIL(err, KILN_E_INVALID, "FLUX.1 DiT: batch %d, %d text tokens, %dx%d grid", batch, n_txt, h, w);
    const int P = comm ? comm->size : 1;
    const size_t Nf = (size_t)h * w, Tf = (size_t)n_txt + Nf;
    if (P > 1) KILN_TRY(kiln_dit_ulysses_check(P, m->heads, (int64_t)Nf, err));
    kiln_flux1_dit_ws *ws = kiln_calloc(1, sizeof *ws);
    if (!ws) return KILN_FAIL(err, KILN_E_NOMEM, "FLUX.1 DiT: out of memory");
    size_t D = m->hidden, F = m->mlp_hidden, B = batch, L = n_txt, N = Nf / P, T = L + N;
    size_t rmax = B * (N > L ? N : L), Dh2 = m->head_dim / 2;
    ws->B = batch;
    ws->L = n_txt;
    ws->N = (int)N;
    /* the communicator's collectives move f32 (comm.h): with sequence parallelism the DiT stays f32 */
    const kiln_dtype dt = ws->dt = P > 1 ? KILN_DT_F32 : kiln_backend_act_dtype(be);
    bool ok = true;
    ws->img = kiln_backend_alloc_elems(be, B * N * D, dt, &ok);
    ws->txt = kiln_backend_alloc_elems(be, B * L * D, dt, &ok);
    ws->txt0 = kiln_backend_alloc_elems(be, B * L * D, dt, &ok);
    ws->nrm = kiln_backend_alloc_elems(be, B * T * D, dt, &ok);
    ws->qkv_i = kiln_backend_alloc_elems(be, B * N * 3 * D, dt, &ok);
    ws->qkv_t = kiln_backend_alloc_elems(be, B * L * 3 * D, dt, &ok);
    ws->cat = kiln_backend_alloc_elems(be, T * 3 * D, dt, &ok);
    ws->catout = kiln_backend_alloc_elems(be, T * D, dt, &ok);
    ws->att_i = kiln_backend_alloc_elems(be, B * N * D, dt, &ok);
    ws->att_t = kiln_backend_alloc_elems(be, B * L * D, dt, &ok);
    ws->ff = kiln_backend_alloc_elems(be, rmax * F, dt, &ok);
    ws->proj = kiln_backend_alloc_elems(be, B * T * D, dt, &ok);
    ws->S = kiln_backend_alloc_elems(be, B * T * D, dt, &ok);
    ws->qkv_s = kiln_backend_alloc_elems(be, B * T * 3 * D, dt, &ok);
    ws->om = kiln_backend_alloc_elems(be, B * T * (D + F), dt, &ok);
    ws->sinus = kiln_backend_alloc_floats(be, 2 * (size_t)m->t_ch, &ok);
    ws->emb = kiln_backend_alloc_floats(be, 4 * D, &ok);
    ws->ph = kiln_backend_alloc_floats(be, B * D, &ok);
    ws->vec = kiln_backend_alloc_floats(be, B * D, &ok);
    ws->mod_i = kiln_backend_alloc_floats(be, B * 6 * D, &ok);
    ws->mod_t = kiln_backend_alloc_floats(be, B * 6 * D, &ok);
    ws->mod_s = kiln_backend_alloc_floats(be, B * 3 * D, &ok);
    ws->mod_o = kiln_backend_alloc_floats(be, B * 2 * D, &ok);
    ws->rcos = kiln_backend_alloc_floats(be, Tf * Dh2, &ok);
    ws->rsin = kiln_backend_alloc_floats(be, Tf * Dh2, &ok);
    if (P > 1)
        ok = kiln_dit_sp_alloc(&ws->sp, be, comm, (int64_t)B, (int64_t)L, (int64_t)Nf, (int64_t)D, m->in_ch,
                               m->out_ch) && ok;
    if (!ok) {
        kiln_flux1_dit_ws_free(be, ws);
        return KILN_FAIL(err, KILN_E_NOMEM, "FLUX.1 DiT: out of memory for activations (batch %d, %zu text + %zu "
                         "image tokens)", batch, L, N);
    }
    /* RoPE tables for [txt ids ; img ids], built on the host and uploaded */
    int32_t *ids = kiln_malloc(Tf * 3 * sizeof(int32_t));
    kiln_status s = ids ? KILN_OK : KILN_FAIL(err, KILN_E_NOMEM, "FLUX.1 DiT: out of memory");
    if (s == KILN_OK) {
        kiln_flux1_text_ids((int64_t)L, ids);
        kiln_flux1_image_ids(h, w, ids + 3 * L);
        s = kiln_dit_rope_upload(be, ids, (int64_t)Tf, m->axes, 3, m->theta, (int64_t)Dh2, ws->rcos, ws->rsin, err);
    }
    kiln_free(ids);
    if (s != KILN_OK) {
        kiln_flux1_dit_ws_free(be, ws);
        return s;
    }
    *out = ws;
    return KILN_OK;
}

#define CK(x) KILN_TRY(x)

static kiln_status lin(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, const kiln_flux1_linear *l,
                       kiln_err *err) {
    return kiln_matmul(be, y, x, &l->w, &l->b, err);
}

/* lin for the per-sample vectors (x [B, in]: conditioning, modulations), one sample at a time: a backend may pick
 * its kernel by the row count (a GPU BLAS does; the CPU matmul no longer does, docs/pitfalls.md O1), and a batch's
 * rows must get the bits a batch of one gets (image i of a batch equals the batch-1 run with seed + i). Costs B
 * reads of these weights per step instead of one. */
static kiln_status lin_each(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, const kiln_flux1_linear *l,
                            kiln_err *err) {
    for (int64_t b = 0; b < x->shape[0]; b++) {
        kiln_tensor yb = kiln_tensor_rows(y, b, 1), xb = kiln_tensor_rows(x, b, 1);
        CK(lin(be, &yb, &xb, l, err));
    }
    return KILN_OK;
}

/* y = (1 + scale_b) LN(x) + shift_b per sample b (rows b*rps ..), shift_b / scale_b at columns sh / sh + D of
 * row b of the modulation mod [B, k*D]. */
static kiln_status ln_mod(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, const kiln_tensor *mod, int64_t rps,
                          int64_t D, int64_t sh, int64_t sc, kiln_err *err) {
    for (int64_t b = 0; b < mod->shape[0]; b++) {
        kiln_tensor yb = kiln_tensor_rows(y, b * rps, rps), xb = kiln_tensor_rows(x, b * rps, rps);
        float *row = (float *)mod->data + b * mod->stride[0];
        kiln_tensor shift = kiln_f32_1d(row + sh, D), scale = kiln_f32_1d(row + sc, D);
        CK(be->ops->layer_norm_modulate(be, &yb, &xb, &shift, &scale, 1e-6f, err));
    }
    return KILN_OK;
}

/* x += gate_b * y per sample b, gate_b at column g of row b of mod. */
static kiln_status gated(kiln_backend *be, kiln_tensor *x, const kiln_tensor *y, const kiln_tensor *mod, int64_t rps,
                         int64_t D, int64_t g, kiln_err *err) {
    for (int64_t b = 0; b < mod->shape[0]; b++) {
        kiln_tensor xb = kiln_tensor_rows(x, b * rps, rps), yb = kiln_tensor_rows(y, b * rps, rps);
        kiln_tensor gate = kiln_f32_1d((float *)mod->data + b * mod->stride[0] + g, D);
        CK(be->ops->gated_add(be, &xb, &gate, &yb, err));
    }
    return KILN_OK;
}

/* q|k|v of x into the column blocks of qkv (each with its bias), then the per-head RMS norms of q and k. */
static kiln_status qkv_proj(kiln_backend *be, kiln_tensor *qkv, const kiln_tensor *x, const kiln_flux1_linear *q,
                            const kiln_flux1_linear *k, const kiln_flux1_linear *v, const kiln_tensor *qn,
                            const kiln_tensor *kn, int64_t D, kiln_err *err) {
    kiln_tensor Q = kiln_cols(qkv, 0, D), K = kiln_cols(qkv, D, D), V = kiln_cols(qkv, 2 * D, D);
    CK(lin(be, &Q, x, q, err));
    CK(lin(be, &K, x, k, err));
    CK(lin(be, &V, x, v, err));
    CK(be->ops->rms_norm(be, &Q, &Q, qn, 1e-6f, err));
    return be->ops->rms_norm(be, &K, &K, kn, 1e-6f, err);
}

static kiln_status double_block(const kiln_flux1_dit *m, kiln_backend *be, kiln_flux1_dit_ws *w,
                                const kiln_flux1_double *blk, kiln_err *err) {
    const int64_t D = m->hidden, F = m->mlp_hidden, B = w->B, L = w->L, N = w->N, T = L + N;
    kiln_tensor IMG = kiln_view_2d(w->img, w->dt, B * N, D), TXT = kiln_view_2d(w->txt, w->dt, B * L, D);
    kiln_tensor QKVI = kiln_view_2d(w->qkv_i, w->dt, B * N, 3 * D), QKVT = kiln_view_2d(w->qkv_t, w->dt, B * L, 3 * D);
    kiln_tensor ATI = kiln_view_2d(w->att_i, w->dt, B * N, D), ATT = kiln_view_2d(w->att_t, w->dt, B * L, D);
    kiln_tensor VEC = kiln_f32_2d(w->vec, B, D);
    kiln_tensor MOD[2] = {kiln_f32_2d(w->mod_i, B, 6 * D), kiln_f32_2d(w->mod_t, B, 6 * D)};

    /* AdaLayerNormZero: modulation, LN(x) (1 + scale_msa) + shift_msa; q|k|v and their norms */
    for (int s = 0; s < 2; s++) {
        const kiln_flux1_stream *st = s ? &blk->txt : &blk->img;
        kiln_tensor *X = s ? &TXT : &IMG, *QKV = s ? &QKVT : &QKVI;
        int64_t rps = s ? L : N;
        kiln_tensor nrm = kiln_view_2d(w->nrm, w->dt, B * rps, D);
        CK(lin_each(be, &MOD[s], &VEC, &st->mod, err));
        CK(ln_mod(be, &nrm, X, &MOD[s], rps, D, 0, D, err));
        CK(qkv_proj(be, QKV, &nrm, &st->q, &st->k, &st->v, &st->q_norm, &st->k_norm, D, err));
    }
    kiln_tensor CAT = kiln_view_2d(w->cat, w->dt, T, 3 * D), CATO = kiln_view_2d(w->catout, w->dt, T, D);
    kiln_tensor COS = kiln_f32_2d(w->rcos, T, m->head_dim / 2), SIN = kiln_f32_2d(w->rsin, T, m->head_dim / 2);
    kiln_dit_attn at = {B, L, N, D, m->heads, m->head_dim, &COS, &SIN};
    if (w->sp.comm) CK(kiln_dit_ulysses_batch(be, &w->sp, &at, &QKVT, &QKVI, &ATT, &ATI, err)); /* this rank's tokens */
    else CK(kiln_dit_joint_attention(be, &at, &QKVT, &QKVI, &CAT, &CATO, &ATT, &ATI, err));
    /* per stream: x += gate_msa out(attn); x += gate_mlp ff((1 + scale_mlp) LN(x) + shift_mlp) */
    for (int s = 0; s < 2; s++) {
        const kiln_flux1_stream *st = s ? &blk->txt : &blk->img;
        kiln_tensor *X = s ? &TXT : &IMG, *A = s ? &ATT : &ATI;
        int64_t rps = s ? L : N;
        kiln_tensor P = kiln_view_2d(w->proj, w->dt, B * rps, D), nrm = kiln_view_2d(w->nrm, w->dt, B * rps, D);
        kiln_tensor FF = kiln_view_2d(w->ff, w->dt, B * rps, F);
        CK(lin(be, &P, A, &st->out, err));
        CK(gated(be, X, &P, &MOD[s], rps, D, 2 * D, err));
        CK(ln_mod(be, &nrm, X, &MOD[s], rps, D, 3 * D, 4 * D, err));
        CK(lin(be, &FF, &nrm, &st->ff_in, err));
        CK(be->ops->gelu_tanh(be, &FF, &FF, err));
        CK(lin(be, &P, &FF, &st->ff_out, err));
        CK(gated(be, X, &P, &MOD[s], rps, D, 5 * D, err));
    }
    return KILN_OK;
}

static kiln_status single_block(const kiln_flux1_dit *m, kiln_backend *be, kiln_flux1_dit_ws *w,
                                const kiln_flux1_single *blk, kiln_err *err) {
    const int64_t D = m->hidden, F = m->mlp_hidden, B = w->B, T = (int64_t)w->L + w->N, R = B * T;
    kiln_tensor S = kiln_view_2d(w->S, w->dt, R, D), nrm = kiln_view_2d(w->nrm, w->dt, R, D);
    kiln_tensor QKV = kiln_view_2d(w->qkv_s, w->dt, R, 3 * D), OM = kiln_view_2d(w->om, w->dt, R, D + F);
    kiln_tensor P = kiln_view_2d(w->proj, w->dt, R, D), VEC = kiln_f32_2d(w->vec, B, D);
    kiln_tensor MOD = kiln_f32_2d(w->mod_s, B, 3 * D);
    kiln_tensor COS = kiln_f32_2d(w->rcos, T, m->head_dim / 2), SIN = kiln_f32_2d(w->rsin, T, m->head_dim / 2);

    CK(lin_each(be, &MOD, &VEC, &blk->mod, err));
    CK(ln_mod(be, &nrm, &S, &MOD, T, D, 0, D, err));
    kiln_tensor mlp = kiln_cols(&OM, D, F), att = kiln_cols(&OM, 0, D);
    CK(lin(be, &mlp, &nrm, &blk->mlp, err));
    CK(be->ops->gelu_tanh(be, &mlp, &mlp, err));
    CK(qkv_proj(be, &QKV, &nrm, &blk->q, &blk->k, &blk->v, &blk->q_norm, &blk->k_norm, D, err));
    kiln_dit_attn at = {B, w->L, w->N, D, m->heads, m->head_dim, &COS, &SIN};
    if (w->sp.comm) CK(kiln_dit_ulysses_batch(be, &w->sp, &at, &QKV, NULL, &att, NULL, err)); /* this rank's tokens */
    else CK(kiln_dit_single_attention(be, &at, &QKV, &att, err));
    CK(lin(be, &P, &OM, &blk->out, err));
    return gated(be, &S, &P, &MOD, T, D, 2 * D, err);
}

/* time_text_embed: conditioning_b = timestep_emb (+ guidance_emb) + text_embedder(pooled_b); vec = SiLU of it. */
static kiln_status conditioning(const kiln_flux1_dit *m, kiln_backend *be, kiln_flux1_dit_ws *w, const float *pooled,
                                float sigma, float guidance, kiln_err *err) {
    const kiln_ops *op = be->ops;
    const int64_t D = m->hidden, B = w->B;
    float host[2048];
    kiln_flux2_timestep_embedding(sigma * 1000.0f, m->t_ch, host);
    if (m->guidance) kiln_flux2_timestep_embedding(guidance * 1000.0f, m->t_ch, host + m->t_ch);
    CK(op->upload(be, w->sinus, host, (size_t)(m->guidance ? 2 : 1) * m->t_ch * sizeof(float), err));
    kiln_tensor ts = kiln_f32_2d(w->sinus, 1, m->t_ch), th = kiln_f32_2d(w->emb, 1, D);
    kiln_tensor te = kiln_f32_2d(w->emb + D, 1, D);
    CK(lin(be, &th, &ts, &m->t1, err));
    CK(op->silu(be, &th, &th, err));
    CK(lin(be, &te, &th, &m->t2, err));
    if (m->guidance) {
        kiln_tensor gs = kiln_f32_2d(w->sinus + m->t_ch, 1, m->t_ch), gh = kiln_f32_2d(w->emb + 2 * D, 1, D);
        kiln_tensor ge = kiln_f32_2d(w->emb + 3 * D, 1, D);
        CK(lin(be, &gh, &gs, &m->g1, err));
        CK(op->silu(be, &gh, &gh, err));
        CK(lin(be, &ge, &gh, &m->g2, err));
        CK(op->add(be, &te, &te, &ge, err));
    }
    kiln_tensor PO = kiln_tensor_make((void *)pooled, KILN_DT_F32, 2, (int64_t[]){B, m->pooled_dim});
    kiln_tensor PH = kiln_f32_2d(w->ph, B, D), VEC = kiln_f32_2d(w->vec, B, D);
    CK(lin_each(be, &PH, &PO, &m->p1, err));
    CK(op->silu(be, &PH, &PH, err));
    CK(lin_each(be, &VEC, &PH, &m->p2, err));
    for (int64_t b = 0; b < B; b++) {
        kiln_tensor vb = kiln_tensor_rows(&VEC, b, 1);
        CK(op->add(be, &vb, &vb, &te, err));
    }
    return op->silu(be, &VEC, &VEC, err);
}

kiln_status kiln_flux1_dit_forward(const kiln_flux1_dit *m, kiln_backend *be, kiln_flux1_dit_ws *w, const float *x,
                                   const float *txt, const float *pooled, float sigma, float guidance, float *v,
                                   kiln_err *err) {
    const kiln_ops *op = be->ops;
    const int64_t D = m->hidden, B = w->B, L = w->L, N = w->N, T = L + N;
    float *v_all = v;
    if (w->sp.comm) { /* this rank's rows of each sample's image tokens */
        CK(kiln_dit_sp_take_rows(be, &w->sp, x, B, m->in_ch, err));
        x = w->sp.x_l;
        v = w->sp.v_l;
    }
    CK(conditioning(m, be, w, pooled, sigma, guidance, err));

    kiln_tensor IMG = kiln_view_2d(w->img, w->dt, B * N, D), TXT = kiln_view_2d(w->txt, w->dt, B * L, D);
    kiln_tensor TXT0 = kiln_view_2d(w->txt0, w->dt, B * L, D);
    if (!w->have_txt) {
        kiln_tensor C = kiln_tensor_make((void *)txt, KILN_DT_F32, 2, (int64_t[]){B * L, m->ctx_dim});
        CK(lin(be, &TXT0, &C, &m->ctx_in, err));
        w->have_txt = true;
    }
    kiln_tensor X = kiln_tensor_make((void *)x, KILN_DT_F32, 2, (int64_t[]){B * N, m->in_ch});
    CK(lin(be, &IMG, &X, &m->x_in, err));
    CK(op->copy(be, &TXT, &TXT0, err));

    for (int i = 0; i < m->n_double; i++) CK(double_block(m, be, w, &m->dbl[i], err));

    kiln_tensor S = kiln_view_2d(w->S, w->dt, B * T, D);
    CK(kiln_dit_join_streams(be, &S, &TXT, &IMG, B, L, N, err));
    for (int i = 0; i < m->n_single; i++) CK(single_block(m, be, w, &m->sgl[i], err));
    CK(kiln_dit_split_image(be, &IMG, &S, B, L, N, err));

    /* AdaLayerNormContinuous: rows [scale; shift] of norm_out.linear(SiLU(conditioning)), then proj_out */
    kiln_tensor VEC = kiln_f32_2d(w->vec, B, D), MOD = kiln_f32_2d(w->mod_o, B, 2 * D);
    kiln_tensor nrm = kiln_view_2d(w->nrm, w->dt, B * N, D);
    CK(lin_each(be, &MOD, &VEC, &m->norm_out, err));
    CK(ln_mod(be, &nrm, &IMG, &MOD, N, D, m->bfl ? 0 : D, m->bfl ? D : 0, err));
    kiln_tensor V = kiln_f32_2d(v, B * N, m->out_ch);
    CK(lin(be, &V, &nrm, &m->proj_out, err));
    if (w->sp.comm) CK(kiln_dit_sp_gather_rows(be, &w->sp, v_all, B, m->out_ch, err)); /* every rank's rows */
    return KILN_OK;
}

/* flux2_dit.c - one FLUX.2 DiT evaluation, top to bottom (see flux2_dit.h; spec 1.2-1.5).
 *
 * Layout of the activations for a batch of B: the two streams of the double blocks are kept stream-major
 * (img [B*N, D], txt [B*L, D]) so every matmul runs over the whole batch at once; attention needs each sample's
 * [txt ; img] sequence (TEXT FIRST), so q/k/v are gathered per sample into `cat` and the output scattered back.
 * The single blocks run on S [B*(L+N), D], sample-major with text first in each sample.
 */
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "compute/graph.h"
#include "models/dit_attention.h"
#include "models/dit_ulysses.h"
#include "models/flux2_dit.h"
#include "models/rope_tables.h"
#include "models/views.h"

struct kiln_flux2_dit_ws {
    int B, L, N;
    bool have_txt;        /* txt0 holds this request's text projection */
    float *img, *txt;     /* stream states            [B*N, D], [B*L, D] */
    float *txt0;          /* txt_in(features), cached [B*L, D] */
    float *nrm;           /* modulated LN output      [max(B*N, B*L), D] (double), [B*(L+N), D] (single) */
    float *qkv_i, *qkv_t; /* [B*N, 3D], [B*L, 3D] */
    float *cat, *catout;  /* one sample's [L+N, 3D] q|k|v and [L+N, D] attention output */
    float *att_i, *att_t; /* [B*N, D], [B*L, D] */
    float *mlp, *act;     /* [max rows, 2F], [max rows, F] */
    float *S;             /* [B*(L+N), D] */
    float *P;             /* [B*(L+N), 3D + 2F]  single block linear1 output */
    float *OM;            /* [B*(L+N), D + F]    attention out | mlp activation */
    float *vec;           /* [D] timestep vector, then SiLU(vec) */
    float *temb;          /* [t_ch] sinusoidal (the per-step input: set_timestep uploads it) + [D] hidden */
    float *mods;          /* m_img [6D] | m_txt [6D] | m_sgl [3D] | final shift [D] | final scale [D] */
    float *rcos, *rsin;   /* [L+N, Dh/2] (with sequence parallelism: L + all ranks' image tokens) */
    /* Sequence parallelism (dit_ulysses.h; sp.comm NULL: one rank): N above is this rank's share of the image
     * tokens; run() slices its rows of x into x_l and all-gathers v from v_l. */
    kiln_dit_sp sp;
    float *x_l, *v_l;     /* [B*N, in_ch], [B*N, out_ch] */
};

float kiln_flux2_timestep_value(float sigma) {
    float t = sigma * 1000.0f; /* scheduler timesteps */
    t = t / 1000.0f;           /* the pipeline passes timestep / 1000 */
    return t * 1000.0f;        /* the model multiplies by 1000 again */
}

void kiln_flux2_timestep_embedding(float s, int t_ch, float *out) {
    int half = t_ch / 2;
    for (int i = 0; i < half; i++) {
        float e = (-9.210340371976184f * (float)i) / (float)half; /* -ln(10000) * i / half, in f32 */
        float arg = s * expf(e);
        out[i] = cosf(arg);
        out[half + i] = sinf(arg);
    }
}

size_t kiln_flux2_dit_workspace(const kiln_flux2_dit *m, int batch, int n_txt, int n_img) {
    size_t D = m->hidden, F = m->mlp_hidden, B = batch, L = n_txt, N = n_img, T = L + N;
    size_t rmax = B * (N > L ? N : L);
    size_t fl = B * N * D * 2 + B * L * D * 2 + B * T * D + B * N * 3 * D + B * L * 3 * D + T * 4 * D +
                B * N * D + B * L * D + rmax * 3 * F + B * T * D + B * T * (3 * D + 2 * F) + B * T * (D + F) +
                2 * D + (size_t)m->t_ch + 17 * D + T * (size_t)m->head_dim;
    return fl * sizeof(float);
}

static void *zalloc(kiln_backend *be, size_t floats, bool *ok) {
    void *p = be->ops->alloc(be, floats * sizeof(float) + 64);
    if (!p) *ok = false;
    return p;
}

kiln_status kiln_flux2_dit_ws_create(const kiln_flux2_dit *m, kiln_backend *be, int batch, int n_txt, int h16,
                                     int w16, kiln_flux2_dit_ws **out, kiln_err *err) {
    return kiln_flux2_dit_ws_create_full(m, be, NULL, batch, n_txt, h16, w16, 0, NULL, NULL, out, err);
}

kiln_status kiln_flux2_dit_ws_create_refs(const kiln_flux2_dit *m, kiln_backend *be, int batch, int n_txt, int h16,
                                          int w16, int n_refs, const int *ref_h16, const int *ref_w16,
                                          kiln_flux2_dit_ws **out, kiln_err *err) {
    return kiln_flux2_dit_ws_create_full(m, be, NULL, batch, n_txt, h16, w16, n_refs, ref_h16, ref_w16, out, err);
}

kiln_status kiln_flux2_dit_ws_create_sp(const kiln_flux2_dit *m, kiln_backend *be, kiln_comm *comm, int batch,
                                        int n_txt, int h16, int w16, kiln_flux2_dit_ws **out, kiln_err *err) {
    return kiln_flux2_dit_ws_create_full(m, be, comm, batch, n_txt, h16, w16, 0, NULL, NULL, out, err);
}

kiln_status kiln_flux2_dit_ws_create_full(const kiln_flux2_dit *m, kiln_backend *be, kiln_comm *comm, int batch,
                                          int n_txt, int h16, int w16, int n_refs, const int *ref_h16,
                                          const int *ref_w16, kiln_flux2_dit_ws **out, kiln_err *err) {
    size_t n_ref_tok = 0;
    for (int k = 0; k < n_refs; k++) n_ref_tok += (size_t)ref_h16[k] * ref_w16[k];
    int P = comm ? comm->size : 1;
    /* Nf: every image-stream token of a sample, the noisy ones first, then the references'; each rank holds
     * Nf / P of them */
    size_t Nf = (size_t)h16 * w16 + n_ref_tok, Tf = (size_t)n_txt + Nf;
    if (P > 1) KILN_TRY(kiln_dit_ulysses_check(P, m->heads, (int64_t)Nf, err));
    kiln_flux2_dit_ws *w = kiln_calloc(1, sizeof *w);
    if (!w) return KILN_FAIL(err, KILN_E_NOMEM, "DiT: out of memory");
    size_t D = m->hidden, F = m->mlp_hidden, B = batch, L = n_txt, N = Nf / P, T = L + N;
    size_t rmax = B * (N > L ? N : L), Dh2 = m->head_dim / 2;
    w->B = batch;
    w->L = n_txt;
    w->N = (int)N;
    bool ok = true;
    w->img = zalloc(be, B * N * D, &ok);
    w->txt = zalloc(be, B * L * D, &ok);
    w->txt0 = zalloc(be, B * L * D, &ok);
    w->nrm = zalloc(be, B * T * D, &ok);
    w->qkv_i = zalloc(be, B * N * 3 * D, &ok);
    w->qkv_t = zalloc(be, B * L * 3 * D, &ok);
    w->cat = zalloc(be, T * 3 * D, &ok);
    w->catout = zalloc(be, T * D, &ok);
    w->att_i = zalloc(be, B * N * D, &ok);
    w->att_t = zalloc(be, B * L * D, &ok);
    w->mlp = zalloc(be, rmax * 2 * F, &ok);
    w->act = zalloc(be, rmax * F, &ok);
    w->S = zalloc(be, B * T * D, &ok);
    w->P = zalloc(be, B * T * (3 * D + 2 * F), &ok);
    w->OM = zalloc(be, B * T * (D + F), &ok);
    w->vec = zalloc(be, D, &ok);
    w->temb = zalloc(be, (size_t)m->t_ch + D, &ok);
    w->mods = zalloc(be, 17 * D, &ok);
    w->rcos = zalloc(be, Tf * Dh2, &ok);
    w->rsin = zalloc(be, Tf * Dh2, &ok);
    if (P > 1) {
        kiln_dit_sp *sp = &w->sp;
        size_t Dp = D / P;
        sp->comm = comm;
        sp->N = (int64_t)Nf;
        sp->send = zalloc(be, N * 3 * D, &ok);
        sp->recv = zalloc(be, N * 3 * D, &ok);
        sp->cat = zalloc(be, Tf * 3 * Dp, &ok);
        sp->cato = zalloc(be, Tf * Dp, &ok);
        sp->tgather = zalloc(be, (size_t)P * L * Dp, &ok);
        w->x_l = zalloc(be, B * N * (size_t)m->in_ch, &ok);
        w->v_l = zalloc(be, B * N * (size_t)m->out_ch, &ok);
    }
    if (!ok) {
        kiln_flux2_dit_ws_free(be, w);
        return KILN_FAIL(err, KILN_E_NOMEM, "DiT: out of memory for activations (batch %d, %zu text + %zu image "
                         "tokens: %.1f MB)", batch, L, N, kiln_flux2_dit_workspace(m, batch, n_txt, (int)N) / 1e6);
    }
    /* RoPE tables for [txt ids ; img ids] (spec 1.5), built on the host and uploaded. */
    int32_t *ids = kiln_malloc(Tf * 4 * sizeof(int32_t));
    kiln_status s = ids ? KILN_OK : KILN_FAIL(err, KILN_E_NOMEM, "DiT: out of memory");
    if (s == KILN_OK) {
        kiln_flux2_text_ids((int64_t)L, ids);
        kiln_flux2_image_ids(h16, w16, ids + 4 * L);
        int32_t *p = ids + 4 * (L + (size_t)h16 * w16);
        for (int k = 0; k < n_refs; k++) { /* Flux2KleinPipeline._prepare_image_ids: t = 10 + 10 k (spec 1.5) */
            kiln_flux2_image_ids(ref_h16[k], ref_w16[k], p);
            for (int64_t i = 0; i < (int64_t)ref_h16[k] * ref_w16[k]; i++) p[4 * i] = 10 + 10 * k;
            p += 4 * (size_t)ref_h16[k] * ref_w16[k];
        }
        s = kiln_dit_rope_upload(be, ids, (int64_t)Tf, m->axes, 4, m->theta, (int64_t)Dh2, w->rcos, w->rsin, err);
    }
    kiln_free(ids);
    if (s != KILN_OK) {
        kiln_flux2_dit_ws_free(be, w);
        return s;
    }
    *out = w;
    return KILN_OK;
}

/* Every backend buffer of a workspace: for freeing, and for the graph key (a CUDA graph bakes in all of them). */
#define WS_NBUF 20
static void ws_bufs(const kiln_flux2_dit_ws *w, float *b[WS_NBUF]) {
    float *all[WS_NBUF] = {w->img, w->txt, w->txt0, w->nrm,  w->qkv_i, w->qkv_t, w->cat,  w->catout, w->att_i, w->att_t,
                           w->mlp, w->act, w->S,    w->P,    w->OM,    w->vec,   w->temb, w->mods,   w->rcos,  w->rsin};
    memcpy(b, all, sizeof all);
}

void kiln_flux2_dit_ws_free(kiln_backend *be, kiln_flux2_dit_ws *w) {
    if (!w) return;
    float *bufs[WS_NBUF];
    ws_bufs(w, bufs);
    for (int i = 0; i < WS_NBUF; i++)
        if (bufs[i]) be->ops->free(be, bufs[i]);
    float *sp[] = {w->sp.send, w->sp.recv, w->sp.cat, w->sp.cato, w->sp.tgather, w->x_l, w->v_l};
    for (size_t i = 0; i < sizeof sp / sizeof *sp; i++)
        if (sp[i]) be->ops->free(be, sp[i]);
    kiln_free(w);
}

uint64_t kiln_flux2_dit_ws_key(const kiln_flux2_dit_ws *w, uint64_t key) {
    float *bufs[WS_NBUF];
    ws_bufs(w, bufs);
    key = kiln_graph_key(kiln_graph_key(kiln_graph_key(key, w->B), w->L), w->N);
    for (int i = 0; i < WS_NBUF; i++) key = kiln_graph_key(key, (int64_t)(uintptr_t)bufs[i]);
    return key;
}

void kiln_flux2_dit_ws_new_text(kiln_flux2_dit_ws *ws) { ws->have_txt = false; }

#define CK(x) KILN_TRY(x)

/* q|k|v of one stream: one fused matmul (BFL) or three matmuls into the column blocks (diffusers). */
static kiln_status stream_qkv(kiln_backend *be, const kiln_flux2_stream *st, kiln_tensor *qkv, const kiln_tensor *x,
                              int64_t D, kiln_err *err) {
    if (st->qkv.data) return kiln_matmul(be, qkv, x, &st->qkv, NULL, err);
    kiln_tensor q = kiln_cols(qkv, 0, D), k = kiln_cols(qkv, D, D), v = kiln_cols(qkv, 2 * D, D);
    CK(kiln_matmul(be, &q, x, &st->q, NULL, err));
    CK(kiln_matmul(be, &k, x, &st->k, NULL, err));
    return kiln_matmul(be, &v, x, &st->v, NULL, err);
}

/* The MLP half of a double block for one stream: X += g2 * mlp_out(SwiGLU(mlp_in((1+sc2) LN(X) + sh2))). */
static kiln_status stream_mlp(const kiln_flux2_dit *m, kiln_backend *be, kiln_flux2_dit_ws *w,
                              const kiln_flux2_stream *st, kiln_tensor *X, const float *mod, kiln_err *err) {
    const kiln_ops *op = be->ops;
    int64_t D = m->hidden, F = m->mlp_hidden, R = X->shape[0];
    kiln_tensor sh2 = kiln_f32_1d((float *)mod + 3 * D, D), sc2 = kiln_f32_1d((float *)mod + 4 * D, D);
    kiln_tensor g2 = kiln_f32_1d((float *)mod + 5 * D, D);
    kiln_tensor nrm = kiln_f32_2d(w->nrm, R, D), mlp = kiln_f32_2d(w->mlp, R, 2 * F), act = kiln_f32_2d(w->act, R, F);
    kiln_epilogue gated = {KILN_EPI_GATED_RESIDUAL, &g2};
    CK(op->layer_norm_modulate(be, &nrm, X, &sh2, &sc2, m->eps, err));
    CK(kiln_matmul(be, &mlp, &nrm, &st->mlp_in, NULL, err));
    CK(op->swiglu(be, &act, &mlp, err));
    return kiln_matmul_epi(be, X, &act, &st->mlp_out, NULL, &gated, err);
}

static kiln_status double_block(const kiln_flux2_dit *m, kiln_backend *be, kiln_flux2_dit_ws *w,
                                const kiln_flux2_double *blk, kiln_err *err) {
    const kiln_ops *op = be->ops;
    const int64_t D = m->hidden, B = w->B, L = w->L, N = w->N, T = L + N;
    const float *mi = w->mods, *mt = w->mods + 6 * D;
    kiln_tensor IMG = kiln_f32_2d(w->img, B * N, D), TXT = kiln_f32_2d(w->txt, B * L, D);
    kiln_tensor QKVI = kiln_f32_2d(w->qkv_i, B * N, 3 * D), QKVT = kiln_f32_2d(w->qkv_t, B * L, 3 * D);
    kiln_tensor CAT = kiln_f32_2d(w->cat, T, 3 * D), CATO = kiln_f32_2d(w->catout, T, D);
    kiln_tensor ATI = kiln_f32_2d(w->att_i, B * N, D), ATT = kiln_f32_2d(w->att_t, B * L, D);

    /* 1-3. per stream: modulated LN, q|k|v, per-head RMS on q and k */
    for (int s = 0; s < 2; s++) {
        const kiln_flux2_stream *st = s ? &blk->txt : &blk->img;
        kiln_tensor *X = s ? &TXT : &IMG, *QKV = s ? &QKVT : &QKVI;
        const float *mod = s ? mt : mi;
        kiln_tensor sh1 = kiln_f32_1d((float *)mod, D), sc1 = kiln_f32_1d((float *)mod + D, D);
        kiln_tensor nrm = kiln_f32_2d(w->nrm, X->shape[0], D);
        CK(op->layer_norm_modulate(be, &nrm, X, &sh1, &sc1, m->eps, err));
        CK(stream_qkv(be, st, QKV, &nrm, D, err));
        kiln_tensor q = kiln_cols(QKV, 0, D), k = kiln_cols(QKV, D, D);
        CK(op->rms_norm(be, &q, &q, &st->q_norm, 1e-6f, err));
        CK(op->rms_norm(be, &k, &k, &st->k_norm, 1e-6f, err));
    }
    /* 4-5. per sample: [txt ; img] sequence, RoPE, joint attention, split back */
    kiln_tensor COS = kiln_f32_2d(w->rcos, T, m->head_dim / 2), SIN = kiln_f32_2d(w->rsin, T, m->head_dim / 2);
    kiln_dit_attn at = {B, L, N, D, m->heads, m->head_dim, &COS, &SIN};
    if (w->sp.comm) { /* Ulysses: this rank's N image tokens, the full [txt ; img] table */
        const int64_t Tf = L + w->sp.N;
        COS = kiln_f32_2d(w->rcos, Tf, m->head_dim / 2);
        SIN = kiln_f32_2d(w->rsin, Tf, m->head_dim / 2);
        for (int64_t b = 0; b < B; b++) {
            kiln_tensor qt = kiln_tensor_rows(&QKVT, b * L, L), qi = kiln_tensor_rows(&QKVI, b * N, N);
            kiln_tensor ot = kiln_tensor_rows(&ATT, b * L, L), oi = kiln_tensor_rows(&ATI, b * N, N);
            CK(kiln_dit_ulysses_attention(be, &w->sp, &at, &qt, &qi, &ot, &oi, err));
        }
    } else {
        CK(kiln_dit_joint_attention(be, &at, &QKVT, &QKVI, &CAT, &CATO, &ATT, &ATI, err));
    }
    /* 6-7. per stream: gated attention projection, then the gated SwiGLU MLP */
    for (int s = 0; s < 2; s++) {
        const kiln_flux2_stream *st = s ? &blk->txt : &blk->img;
        kiln_tensor *X = s ? &TXT : &IMG, *A = s ? &ATT : &ATI;
        const float *mod = s ? mt : mi;
        kiln_tensor g1 = kiln_f32_1d((float *)mod + 2 * D, D);
        kiln_epilogue gated = {KILN_EPI_GATED_RESIDUAL, &g1};
        CK(kiln_matmul_epi(be, X, A, &st->proj, NULL, &gated, err));
        CK(stream_mlp(m, be, w, st, X, mod, err));
    }
    return KILN_OK;
}

static kiln_status single_block(const kiln_flux2_dit *m, kiln_backend *be, kiln_flux2_dit_ws *w,
                                const kiln_flux2_single *blk, kiln_err *err) {
    const kiln_ops *op = be->ops;
    const int64_t D = m->hidden, F = m->mlp_hidden, B = w->B, T = (int64_t)w->L + w->N, R = B * T;
    const float *ms = w->mods + 12 * D;
    kiln_tensor sh = kiln_f32_1d((float *)ms, D), sc = kiln_f32_1d((float *)ms + D, D);
    kiln_tensor g = kiln_f32_1d((float *)ms + 2 * D, D);
    kiln_tensor S = kiln_f32_2d(w->S, R, D), nrm = kiln_f32_2d(w->nrm, R, D);
    kiln_tensor P = kiln_f32_2d(w->P, R, 3 * D + 2 * F), OM = kiln_f32_2d(w->OM, R, D + F);
    kiln_tensor COS = kiln_f32_2d(w->rcos, T, m->head_dim / 2), SIN = kiln_f32_2d(w->rsin, T, m->head_dim / 2);
    kiln_epilogue gated = {KILN_EPI_GATED_RESIDUAL, &g};

    CK(op->layer_norm_modulate(be, &nrm, &S, &sh, &sc, m->eps, err));
    CK(kiln_matmul(be, &P, &nrm, &blk->linear1, NULL, err));
    kiln_tensor q = kiln_cols(&P, 0, D), k = kiln_cols(&P, D, D);
    CK(op->rms_norm(be, &q, &q, &blk->q_norm, 1e-6f, err));
    CK(op->rms_norm(be, &k, &k, &blk->k_norm, 1e-6f, err));
    kiln_dit_attn at = {B, w->L, w->N, D, m->heads, m->head_dim, &COS, &SIN};
    if (w->sp.comm) { /* Ulysses: per sample, text rows then this rank's image rows */
        const int64_t L = w->L, N = w->N;
        COS = kiln_f32_2d(w->rcos, L + w->sp.N, m->head_dim / 2);
        SIN = kiln_f32_2d(w->rsin, L + w->sp.N, m->head_dim / 2);
        for (int64_t b = 0; b < B; b++) {
            kiln_tensor qt = kiln_tensor_rows(&P, b * T, L), qi = kiln_tensor_rows(&P, b * T + L, N);
            kiln_tensor ot = kiln_block(&OM, b * T, L, 0, D), oi = kiln_block(&OM, b * T + L, N, 0, D);
            CK(kiln_dit_ulysses_attention(be, &w->sp, &at, &qt, &qi, &ot, &oi, err));
        }
    } else {
        CK(kiln_dit_single_attention(be, &at, &P, &OM, err));
    }
    kiln_tensor ab = kiln_cols(&P, 3 * D, 2 * F), mo = kiln_cols(&OM, D, F);
    CK(op->swiglu(be, &mo, &ab, err));
    return kiln_matmul_epi(be, &S, &OM, &blk->linear2, NULL, &gated, err);
}

kiln_status kiln_flux2_dit_set_timestep(const kiln_flux2_dit *m, kiln_backend *be, kiln_flux2_dit_ws *w, float t,
                                       kiln_err *err) {
    float host_emb[1024];
    if (m->t_ch > 1024) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "DiT: %d timestep channels (max 1024)", m->t_ch);
    kiln_flux2_timestep_embedding(t, m->t_ch, host_emb);
    return be->ops->upload(be, w->temb, host_emb, (size_t)m->t_ch * sizeof(float), err);
}

kiln_status kiln_flux2_dit_set_text(const kiln_flux2_dit *m, kiln_backend *be, kiln_flux2_dit_ws *w, const float *txt,
                                    kiln_err *err) {
    kiln_tensor C = kiln_tensor_make((void *)txt, KILN_DT_F32, 2, (int64_t[]){(int64_t)w->B * w->L, m->ctx_dim});
    kiln_tensor TXT0 = kiln_f32_2d(w->txt0, (int64_t)w->B * w->L, m->hidden);
    CK(kiln_matmul(be, &TXT0, &C, &m->txt_in, NULL, err));
    w->have_txt = true;
    return KILN_OK;
}

kiln_status kiln_flux2_dit_run(const kiln_flux2_dit *m, kiln_backend *be, kiln_flux2_dit_ws *w, const float *x,
                               float *v, kiln_err *err) {
    const kiln_ops *op = be->ops;
    const int64_t D = m->hidden, B = w->B, L = w->L, N = w->N, T = L + N;
    if (!w->have_txt) return KILN_FAIL(err, KILN_E_INTERNAL, "DiT: run before kiln_flux2_dit_set_text");
    float *v_all = v;
    if (w->sp.comm) { /* this rank's rows of each sample's image tokens */
        const int64_t Nf = w->sp.N, r0 = (int64_t)w->sp.comm->rank * N;
        kiln_tensor XF = kiln_tensor_make((void *)x, KILN_DT_F32, 2, (int64_t[]){B * Nf, m->in_ch});
        kiln_tensor XL = kiln_f32_2d(w->x_l, B * N, m->in_ch);
        for (int64_t b = 0; b < B; b++) {
            kiln_tensor src = kiln_tensor_rows(&XF, b * Nf + r0, N), dst = kiln_tensor_rows(&XL, b * N, N);
            CK(op->copy(be, &dst, &src, err));
        }
        x = w->x_l;
        v = w->v_l;
    }

    /* 1. timestep vector: vec = t_out(SiLU(t_in(sinusoidal(t)))), the sinusoidal part uploaded by set_timestep */
    kiln_tensor temb = kiln_f32_2d(w->temb, 1, m->t_ch), th = kiln_f32_2d(w->temb + m->t_ch, 1, D);
    kiln_tensor vec = kiln_f32_2d(w->vec, 1, D);
    CK(kiln_matmul(be, &th, &temb, &m->t_in, NULL, err));
    CK(op->silu(be, &th, &th, err));
    CK(kiln_matmul(be, &vec, &th, &m->t_out, NULL, err));

    /* 2. shared modulation from SiLU(vec), once per forward; and the final layer's shift/scale */
    CK(op->silu(be, &vec, &vec, err));
    kiln_tensor m_img = kiln_f32_2d(w->mods, 1, 6 * D), m_txt = kiln_f32_2d(w->mods + 6 * D, 1, 6 * D);
    kiln_tensor m_sgl = kiln_f32_2d(w->mods + 12 * D, 1, 3 * D);
    kiln_tensor f_sh = kiln_f32_2d(w->mods + 15 * D, 1, D), f_sc = kiln_f32_2d(w->mods + 16 * D, 1, D);
    CK(kiln_matmul(be, &m_img, &vec, &m->mod_img, NULL, err));
    CK(kiln_matmul(be, &m_txt, &vec, &m->mod_txt, NULL, err));
    CK(kiln_matmul(be, &m_sgl, &vec, &m->mod_single, NULL, err));
    CK(kiln_matmul(be, &f_sh, &vec, &m->final_shift, NULL, err));
    CK(kiln_matmul(be, &f_sc, &vec, &m->final_scale, NULL, err));

    /* 3. input projections (the text one, txt0, is the same every step: made once by set_text) */
    kiln_tensor X = kiln_tensor_make((void *)x, KILN_DT_F32, 2, (int64_t[]){B * N, m->in_ch});
    kiln_tensor IMG = kiln_f32_2d(w->img, B * N, D), TXT = kiln_f32_2d(w->txt, B * L, D);
    kiln_tensor TXT0 = kiln_f32_2d(w->txt0, B * L, D);
    CK(kiln_matmul(be, &IMG, &X, &m->img_in, NULL, err));
    CK(op->copy(be, &TXT, &TXT0, err));

    /* 5. double-stream blocks */
    for (int i = 0; i < m->n_double; i++) CK(double_block(m, be, w, &m->dbl[i], err));

    /* 6. S = [txt ; img] per sample, then the single-stream blocks */
    kiln_tensor S = kiln_f32_2d(w->S, B * T, D);
    for (int64_t b = 0; b < B; b++) {
        kiln_tensor dt = kiln_tensor_rows(&S, b * T, L), di = kiln_tensor_rows(&S, b * T + L, N);
        kiln_tensor st = kiln_tensor_rows(&TXT, b * L, L), si = kiln_tensor_rows(&IMG, b * N, N);
        CK(op->copy(be, &dt, &st, err));
        CK(op->copy(be, &di, &si, err));
    }
    for (int i = 0; i < m->n_single; i++) CK(single_block(m, be, w, &m->sgl[i], err));

    /* 7-8. drop the text rows; final adaLN (shift, scale) and the output projection */
    for (int64_t b = 0; b < B; b++) {
        kiln_tensor di = kiln_tensor_rows(&IMG, b * N, N), si = kiln_tensor_rows(&S, b * T + L, N);
        CK(op->copy(be, &di, &si, err));
    }
    kiln_tensor nrm = kiln_f32_2d(w->nrm, B * N, D);
    kiln_tensor sh = kiln_f32_1d(w->mods + 15 * D, D), sc = kiln_f32_1d(w->mods + 16 * D, D);
    CK(op->layer_norm_modulate(be, &nrm, &IMG, &sh, &sc, 1e-6f, err));
    kiln_tensor V = kiln_f32_2d(v, B * N, m->out_ch);
    CK(kiln_matmul(be, &V, &nrm, &m->final_out, NULL, err));
    for (int64_t b = 0; w->sp.comm && b < B; b++) { /* every rank gets every rank's velocity rows */
        size_t per = (size_t)N * m->out_ch;
        kiln_comm *c = w->sp.comm;
        CK(c->ops->all_gather(c, be, v + b * per, v_all + b * per * c->size, per, err));
    }
    return KILN_OK;
}

kiln_status kiln_flux2_dit_forward(const kiln_flux2_dit *m, kiln_backend *be, kiln_flux2_dit_ws *w,
                                   const float *x, const float *txt, float t, float *v, kiln_err *err) {
    CK(kiln_flux2_dit_set_timestep(m, be, w, t, err));
    if (!w->have_txt) CK(kiln_flux2_dit_set_text(m, be, w, txt, err));
    return kiln_flux2_dit_run(m, be, w, x, v, err);
}

/* flux2_dit.c - one FLUX.2 DiT evaluation, top to bottom (see flux2_dit.h; spec 1.2-1.5).
 *
 * Layout of the activations for a batch of B: the two streams of the double blocks are kept stream-major
 * (img [B*N, D], txt [B*L, D]) so every matmul runs over the whole batch at once; attention needs each sample's
 * [txt ; img] sequence (TEXT FIRST), so q/k/v are gathered per sample into `cat` and the output scattered back.
 * The single blocks run on S [B*(L+N), D], sample-major with text first in each sample.
 *
 * Tensor parallelism (tp.comm, t ranks, this one r; docs/parallel.md): the residual streams, the modulation and
 * the input/output projections stay whole on every rank; each attention and MLP is split Megatron-style - the
 * projections into it column-parallel (rank r computes heads r*H/t.. and MLP units r*F/t.., from row views of the
 * weights), the projections out of it row-parallel (the matching column views: a partial product of the whole
 * width), summed by one all-reduce per block half (both streams' partials in one buffer), then gated into the
 * stream. With t = 1 every view is the whole weight and the fused matmuls and epilogues are the same calls.
 */
#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "compute/graph.h"
#include "models/dit_attention.h"
#include "models/dit_kv.h"
#include "models/dit_ulysses.h"
#include "models/flux2_dit.h"
#include "models/rope_tables.h"
#include "models/views.h"

struct kiln_flux2_dit_ws {
    int B, L, N;
    bool have_txt;        /* txt0 holds this request's text projection */
    /* The activations below are in dt (compute/ops.h kiln_backend_act_dtype: bf16 on CUDA in FAST, as diffusers
     * runs a bf16 transformer; f32 elsewhere), the vectors after them in f32 as the official code keeps them. */
    kiln_dtype dt;
    void *img, *txt;      /* stream states            [B*N, D], [B*L, D] */
    void *txt0;           /* txt_in(features), cached [B*L, D] */
    void *nrm;            /* modulated LN output      [max(B*N, B*L), D] (double), [B*(L+N), D] (single) */
    void *qkv_i, *qkv_t;  /* [B*N, 3D], [B*L, 3D] */
    void *cat, *catout;   /* one sample's [L+N, 3D] q|k|v and [L+N, D] attention output */
    void *att_i, *att_t;  /* [B*N, D], [B*L, D] */
    void *mlp, *act;      /* [max rows, 2F], [max rows, F] */
    void *S;              /* [B*(L+N), D] */
    void *P;              /* [B*(L+N), 3D + 2F]  single block linear1 output */
    void *OM;             /* [B*(L+N), D + F]    attention out | mlp activation */
    float *vec;           /* [D] timestep vector, then SiLU(vec) */
    float *temb;          /* [t_ch] sinusoidal (the per-step input: set_timestep uploads it) + [D] hidden */
    float *mods;          /* m_img [6D] | m_txt [6D] | m_sgl [3D] | final shift [D] | final scale [D] */
    float *rcos, *rsin;   /* [L+N, Dh/2] (with sequence parallelism: L + all ranks' image tokens) */
    /* Sequence parallelism (dit_ulysses.h; sp.comm NULL: one rank): N above is this rank's share of the image
     * tokens; run() slices its rows of x into x_l and all-gathers v from v_l. */
    kiln_dit_sp sp;
    /* Tensor parallelism (tp NULL: none): Dq = D/t attention and Fl = F/t MLP columns per rank */
    kiln_comm *tp;
    int64_t Dq, Fl;
    float *red;           /* [B*(L+N), D] the row-parallel partial products, all-reduced in place */
    /* 9B-KV (dit_kv.h; kv.mode OFF: none): N above is the current mode's image stream (Ni + R in EXTRACT, Ni
     * in CACHED; the buffers are sized for Nfull = Ni + R); the references' fixed-timestep sinusoid and
     * modulation; every block's cache, block i at kv_cache + i * B*R*2D elements (double blocks, then single). */
    kiln_dit_kv kv;
    int Nfull;
    float *temb_ref;      /* [t_ch] sinusoidal(KILN_FLUX2_KV_REF_TIMESTEP * 1000), uploaded once */
    float *mods_ref;      /* m_img [6D] | m_sgl [3D] at the fixed timestep */
    void *kv_cache;       /* [(n_double + n_single) * B*R, 2D] in dt */
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

/* A workspace's buffers, as one list: ws_make allocates it and kiln_flux2_dit_workspace sums it, so the memory plan
 * counts what is allocated. act: n elements in the activation dtype; else n f32. */
typedef struct ws_buf {
    void **slot;
    size_t n;
    bool act;
} ws_buf;
#define WS_LAYOUT_MAX 26

/* w's buffers for B samples of L text and N image tokens on this rank (Tf: the RoPE tables' rows, every rank's
 * tokens), Dq/Fl attention and MLP columns per tensor-parallel rank (tp: more than one), with the KV cache of
 * R reference tokens (kv). Returns the count. */
static size_t ws_layout(const kiln_flux2_dit *m, kiln_flux2_dit_ws *w, size_t B, size_t L, size_t N, size_t Tf,
                        size_t Dq, size_t Fl, bool tp, bool kv, size_t R, ws_buf b[WS_LAYOUT_MAX]) {
    const size_t D = m->hidden, T = L + N, rmax = B * (N > L ? N : L), Dh2 = (size_t)m->head_dim / 2;
    size_t k = 0;
#define BUF(p, count, is_act) (b[k++] = (ws_buf){(void **)&(p), (count), (is_act)})
    BUF(w->img, B * N * D, true);
    BUF(w->txt, B * L * D, true);
    BUF(w->txt0, B * L * D, true);
    BUF(w->nrm, B * T * D, true);
    BUF(w->qkv_i, B * N * 3 * Dq, true);
    BUF(w->qkv_t, B * L * 3 * Dq, true);
    BUF(w->cat, T * 3 * Dq, true);
    BUF(w->catout, T * Dq, true);
    BUF(w->att_i, B * N * Dq, true);
    BUF(w->att_t, B * L * Dq, true);
    BUF(w->mlp, rmax * 2 * Fl, true);
    BUF(w->act, rmax * Fl, true);
    BUF(w->S, B * T * D, true);
    BUF(w->P, B * T * (3 * Dq + 2 * Fl), true);
    BUF(w->OM, B * T * (Dq + Fl), true);
    if (tp) BUF(w->red, B * T * D, false);
    BUF(w->vec, D, false);
    BUF(w->temb, (size_t)m->t_ch + D, false);
    BUF(w->mods, 17 * D, false);
    BUF(w->rcos, Tf * Dh2, false);
    BUF(w->rsin, Tf * Dh2, false);
    if (kv) { /* the cache of every block, its scratch, and the references' own modulation */
        BUF(w->kv_cache, (size_t)(m->n_double + m->n_single) * B * R * 2 * D, true);
        BUF(w->kv.kv, T * 2 * D, true);
        BUF(w->temb_ref, (size_t)m->t_ch, false);
        BUF(w->mods_ref, 9 * D, false);
    }
#undef BUF
    return k;
}

static size_t layout_bytes(const ws_buf *b, size_t n, kiln_dtype dt) {
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++) bytes += kiln_backend_elems_bytes(b[i].n, b[i].act ? dt : KILN_DT_F32);
    return bytes;
}

size_t kiln_flux2_dit_workspace(const kiln_flux2_dit *m, int batch, int n_txt, int n_img, int n_ref_tok, bool kv,
                                int sp, int tp, kiln_dtype dt) {
    kiln_flux2_dit_ws w;
    ws_buf b[WS_LAYOUT_MAX];
    if (sp < 1) sp = 1;
    if (tp < 1) tp = 1;
    const size_t Nf = (size_t)n_img + (size_t)n_ref_tok, Dq = (size_t)m->hidden / tp;
    size_t n = ws_layout(m, &w, (size_t)batch, (size_t)n_txt, Nf / sp, (size_t)n_txt + Nf, Dq,
                         (size_t)m->mlp_hidden / tp, tp > 1, kv && n_ref_tok > 0, (size_t)n_ref_tok, b);
    size_t bytes = layout_bytes(b, n, sp > 1 || tp > 1 ? KILN_DT_F32 : dt);
    if (sp > 1) bytes += kiln_dit_sp_bytes(sp, batch, n_txt, (int64_t)Nf, (int64_t)Dq, m->in_ch, m->out_ch);
    return bytes;
}

kiln_status kiln_flux2_dit_ws_create(const kiln_flux2_dit *m, kiln_backend *be, int batch, int n_txt, int h16,
                                     int w16, kiln_flux2_dit_ws **out, kiln_err *err) {
    return kiln_flux2_dit_ws_create_full(m, be, NULL, NULL, batch, n_txt, h16, w16, 0, NULL, NULL, out, err);
}

kiln_status kiln_flux2_dit_ws_create_refs(const kiln_flux2_dit *m, kiln_backend *be, int batch, int n_txt, int h16,
                                          int w16, int n_refs, const int *ref_h16, const int *ref_w16,
                                          kiln_flux2_dit_ws **out, kiln_err *err) {
    return kiln_flux2_dit_ws_create_full(m, be, NULL, NULL, batch, n_txt, h16, w16, n_refs, ref_h16, ref_w16, out,
                                         err);
}

kiln_status kiln_flux2_dit_ws_create_sp(const kiln_flux2_dit *m, kiln_backend *be, kiln_comm *comm, int batch,
                                        int n_txt, int h16, int w16, kiln_flux2_dit_ws **out, kiln_err *err) {
    return kiln_flux2_dit_ws_create_full(m, be, comm, NULL, batch, n_txt, h16, w16, 0, NULL, NULL, out, err);
}

kiln_status kiln_flux2_dit_tp_check(const kiln_flux2_dit *m, int t, kiln_err *err) {
    if (t < 1 || m->heads % t || m->mlp_hidden % t)
        return KILN_FAIL(err, KILN_E_INVALID, "tensor parallelism over %d ranks: the DiT's %d heads and %d MLP units "
                         "are not both divisible by %d", t, m->heads, m->mlp_hidden, t);
    /* the projections out of a block take column views of their weights, which GGML blocks do not allow; a
     * LoRA's low-rank terms would have to be split with the weight views, which they are not */
    for (int i = 0; i < m->n_double + m->n_single; i++) {
        const kiln_flux2_stream *a = i < m->n_double ? &m->dbl[i].img : NULL, *b = a ? &m->dbl[i].txt : NULL;
        const kiln_flux2_single *g = a ? NULL : &m->sgl[i - m->n_double];
        const kiln_tensor *ws[] = {a ? &a->q : &g->linear1, a ? &a->k : &g->linear2, a ? &a->v : NULL,
                                   a ? &a->proj : NULL, a ? &a->mlp_in : NULL, a ? &a->mlp_out : NULL,
                                   b ? &b->q : NULL, b ? &b->k : NULL, b ? &b->v : NULL, b ? &b->proj : NULL,
                                   b ? &b->mlp_in : NULL, b ? &b->mlp_out : NULL};
        for (size_t j = 0; j < sizeof ws / sizeof *ws; j++)
            if (ws[j] && (ws[j]->dtype == KILN_DT_QBLOCK || ws[j]->lora))
                return KILN_FAIL(err, KILN_E_UNSUPPORTED, "tensor parallelism: the DiT's %s weights cannot be split "
                                 "(%s); run without --tp", ws[j]->lora ? "LoRA-patched" : "GGUF-quantised",
                                 ws[j]->lora ? "the low-rank terms are not sharded" : "blocks span the columns");
    }
    return KILN_OK;
}

static kiln_status ws_make(const kiln_flux2_dit *m, kiln_backend *be, kiln_comm *comm, kiln_comm *tp, int batch,
                           int n_txt, int h16, int w16, int n_refs, const int *ref_h16, const int *ref_w16, bool kv,
                           kiln_flux2_dit_ws **out, kiln_err *err);
static kiln_status set_ref_timestep(const kiln_flux2_dit *m, kiln_backend *be, kiln_flux2_dit_ws *w, kiln_err *err);

kiln_status kiln_flux2_dit_ws_create_full(const kiln_flux2_dit *m, kiln_backend *be, kiln_comm *comm, kiln_comm *tp,
                                          int batch, int n_txt, int h16, int w16, int n_refs, const int *ref_h16,
                                          const int *ref_w16, kiln_flux2_dit_ws **out, kiln_err *err) {
    return ws_make(m, be, comm, tp, batch, n_txt, h16, w16, n_refs, ref_h16, ref_w16, false, out, err);
}

kiln_status kiln_flux2_dit_ws_create_kv(const kiln_flux2_dit *m, kiln_backend *be, int batch, int n_txt, int h16,
                                        int w16, int n_refs, const int *ref_h16, const int *ref_w16,
                                        kiln_flux2_dit_ws **out, kiln_err *err) {
    if (n_refs < 1) return KILN_FAIL(err, KILN_E_INVALID, "DiT: a KV workspace needs reference images (without "
                                     "them the KV pipeline runs the standard forward)");
    return ws_make(m, be, NULL, NULL, batch, n_txt, h16, w16, n_refs, ref_h16, ref_w16, true, out, err);
}

void kiln_flux2_dit_kv_set_mode(kiln_flux2_dit_ws *w, bool cached) {
    if (w->kv.mode == KILN_DIT_KV_OFF) return;
    w->kv.mode = cached ? KILN_DIT_KV_CACHED : KILN_DIT_KV_EXTRACT;
    w->N = cached ? w->Nfull - (int)w->kv.R : w->Nfull;
}

static kiln_status ws_make(const kiln_flux2_dit *m, kiln_backend *be, kiln_comm *comm, kiln_comm *tp, int batch,
                           int n_txt, int h16, int w16, int n_refs, const int *ref_h16, const int *ref_w16, bool kv,
                           kiln_flux2_dit_ws **out, kiln_err *err) {
    size_t n_ref_tok = 0;
    for (int k = 0; k < n_refs; k++) n_ref_tok += (size_t)ref_h16[k] * ref_w16[k];
    int P = comm ? comm->size : 1, Tp = tp ? tp->size : 1;
    /* Nf: every image-stream token of a sample, the noisy ones first, then the references'; each rank holds
     * Nf / P of them */
    size_t Nf = (size_t)h16 * w16 + n_ref_tok, Tf = (size_t)n_txt + Nf;
    if (Tp > 1) KILN_TRY(kiln_flux2_dit_tp_check(m, Tp, err));
    if (P > 1) KILN_TRY(kiln_dit_ulysses_check(P, m->heads / Tp, (int64_t)Nf, err));
    kiln_flux2_dit_ws *w = kiln_calloc(1, sizeof *w);
    if (!w) return KILN_FAIL(err, KILN_E_NOMEM, "DiT: out of memory");
    size_t D = m->hidden, F = m->mlp_hidden, B = batch, L = n_txt, N = Nf / P;
    size_t Dh2 = m->head_dim / 2, Dq = D / Tp, Fl = F / Tp;
    w->Dq = (int64_t)Dq;
    w->Fl = (int64_t)Fl;
    w->B = batch;
    w->L = n_txt;
    w->N = w->Nfull = (int)N;
    /* the communicators' collectives move f32 (comm.h): with sequence or tensor parallelism the DiT stays f32 */
    const kiln_dtype dt = P > 1 || Tp > 1 ? KILN_DT_F32 : kiln_backend_act_dtype(be);
    w->dt = w->kv.dt = dt;
    if (kv && (P > 1 || Tp > 1)) {
        kiln_flux2_dit_ws_free(be, w);
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "DiT: Flux2KleinKVPipeline's reference cache with sequence or "
                         "tensor parallelism is not implemented");
    }
    if (Tp > 1) w->tp = tp;
    if (kv) {
        w->kv.mode = KILN_DIT_KV_EXTRACT;
        w->kv.R = (int64_t)n_ref_tok;
    }
    bool ok = true;
    ws_buf bufs[WS_LAYOUT_MAX];
    size_t nb = ws_layout(m, w, B, L, N, Tf, Dq, Fl, Tp > 1, kv, n_ref_tok, bufs);
    for (size_t i = 0; i < nb; i++) *bufs[i].slot = kiln_backend_alloc_elems(be, bufs[i].n, bufs[i].act ? dt : KILN_DT_F32, &ok);
    if (P > 1) /* Ulysses over the attention columns this rank holds (all of them without TP) */
        ok = kiln_dit_sp_alloc(&w->sp, be, comm, (int64_t)B, (int64_t)L, (int64_t)Nf, (int64_t)Dq, m->in_ch,
                               m->out_ch) && ok;
    if (!ok) {
        kiln_flux2_dit_ws_free(be, w);
        return KILN_FAIL(err, KILN_E_NOMEM, "DiT: out of memory for activations (batch %d, %zu text + %zu image "
                         "tokens: %.1f MB)", batch, L, N, layout_bytes(bufs, nb, dt) / 1e6);
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
    if (s == KILN_OK && kv) s = set_ref_timestep(m, be, w, err);
    if (s != KILN_OK) {
        kiln_flux2_dit_ws_free(be, w);
        return s;
    }
    *out = w;
    return KILN_OK;
}

/* Every backend buffer of a workspace: for freeing, and for the graph key (a CUDA graph bakes in all of them). */
#define WS_NBUF 24
static void ws_bufs(const kiln_flux2_dit_ws *w, void *b[WS_NBUF]) {
    void *all[WS_NBUF] = {w->img, w->txt, w->txt0, w->nrm,  w->qkv_i, w->qkv_t, w->cat,  w->catout, w->att_i, w->att_t,
                           w->mlp, w->act, w->S,    w->P,    w->OM,    w->vec,   w->temb, w->mods,   w->rcos,  w->rsin,
                           w->temb_ref, w->mods_ref, w->kv_cache, w->kv.kv};
    memcpy(b, all, sizeof all);
}

void kiln_flux2_dit_ws_free(kiln_backend *be, kiln_flux2_dit_ws *w) {
    if (!w) return;
    void *bufs[WS_NBUF];
    ws_bufs(w, bufs);
    for (int i = 0; i < WS_NBUF; i++)
        if (bufs[i]) be->ops->free(be, bufs[i]);
    kiln_dit_sp_free(&w->sp, be);
    if (w->red) be->ops->free(be, w->red);
    kiln_free(w);
}

uint64_t kiln_flux2_dit_ws_key(const kiln_flux2_dit_ws *w, uint64_t key) {
    void *bufs[WS_NBUF];
    ws_bufs(w, bufs);
    key = kiln_graph_key(kiln_graph_key(kiln_graph_key(kiln_graph_key(kiln_graph_key(key, w->B), w->L), w->N),
                                         w->kv.mode), w->dt);
    for (int i = 0; i < WS_NBUF; i++) key = kiln_graph_key(key, (int64_t)(uintptr_t)bufs[i]);
    return key;
}

void kiln_flux2_dit_ws_new_text(kiln_flux2_dit_ws *ws) { ws->have_txt = false; }

kiln_dtype kiln_flux2_dit_ws_act_dtype(const kiln_flux2_dit_ws *ws) { return ws->dt; }

#define CK(x) KILN_TRY(x)

/* q|k|v of one stream, this rank's heads (Dq columns of each): one fused matmul (BFL, no TP) or three matmuls of
 * row views into the column blocks (diffusers; and BFL's q/k/v row views under TP). */
static kiln_status stream_qkv(kiln_backend *be, const kiln_flux2_stream *st, kiln_tensor *qkv, const kiln_tensor *x,
                              int64_t D, int64_t Dq, int r, kiln_err *err) {
    if (st->qkv.data && Dq == D) return kiln_matmul(be, qkv, x, &st->qkv, NULL, err);
    const kiln_tensor *w[3] = {&st->q, &st->k, &st->v};
    for (int j = 0; j < 3; j++) {
        kiln_tensor y = kiln_cols(qkv, j * Dq, Dq), wr = kiln_tensor_rows(w[j], r * Dq, Dq);
        CK(kiln_matmul(be, &y, x, &wr, NULL, err));
    }
    return KILN_OK;
}

/* y (op)= x . w[:, c0 : c0 + x cols]^T: a row-parallel projection's share (the whole weight without TP). */
static kiln_status matmul_kslice(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, const kiln_tensor *w,
                                 int64_t c0, const kiln_epilogue *epi, kiln_err *err) {
    kiln_tensor wc = kiln_cols(w, c0, x->shape[1]);
    return kiln_matmul_epi(be, y, x, &wc, NULL, epi, err);
}

/* The 9B-KV extract step's per-position modulation (the pipeline's _blend_double_block_mods and
 * _blend_single_block_mods): in every sample of `period` rows, the R rows from `off` are reference tokens and take
 * the fixed-timestep modulation `ref` instead of the step's. ref NULL: the step's modulation for every row. */
typedef struct mod_rows {
    const float *ref;
    int64_t period, off, R;
} mod_rows;

/* Calls fn(rows [r0, r0 + n), that segment's modulation vector) over X's row segments: one call without rm. */
typedef kiln_status (*seg_fn)(kiln_backend *be, void *ctx, int64_t r0, int64_t n, const float *mod, kiln_err *err);
static kiln_status for_segments(kiln_backend *be, int64_t rows, const float *mod, const mod_rows *rm, seg_fn fn,
                                void *ctx, kiln_err *err) {
    if (!rm || !rm->ref) return fn(be, ctx, 0, rows, mod, err);
    for (int64_t r0 = 0; r0 < rows; r0 += rm->period) {
        const int64_t cut[4] = {r0, r0 + rm->off, r0 + rm->off + rm->R, r0 + rm->period};
        for (int s = 0; s < 3; s++)
            if (cut[s + 1] > cut[s]) CK(fn(be, ctx, cut[s], cut[s + 1] - cut[s], s == 1 ? rm->ref : mod, err));
    }
    return KILN_OK;
}

typedef struct seg_args {
    kiln_tensor *y;
    const kiln_tensor *x, *w;
    int64_t D;
    int i0, i1;    /* chunk indices in the modulation vector: shift, scale (LN) or the gate (i0) */
    float eps;
} seg_args;

static kiln_status seg_ln(kiln_backend *be, void *ctx, int64_t r0, int64_t n, const float *mod, kiln_err *err) {
    seg_args *a = ctx;
    kiln_tensor y = kiln_tensor_rows(a->y, r0, n), x = kiln_tensor_rows(a->x, r0, n);
    kiln_tensor sh = kiln_f32_1d((float *)mod + a->i0 * a->D, a->D), sc = kiln_f32_1d((float *)mod + a->i1 * a->D, a->D);
    return be->ops->layer_norm_modulate(be, &y, &x, &sh, &sc, a->eps, err);
}

static kiln_status seg_gated(kiln_backend *be, void *ctx, int64_t r0, int64_t n, const float *mod, kiln_err *err) {
    seg_args *a = ctx;
    kiln_tensor y = kiln_tensor_rows(a->y, r0, n), x = kiln_tensor_rows(a->x, r0, n);
    kiln_tensor g = kiln_f32_1d((float *)mod + a->i0 * a->D, a->D);
    kiln_epilogue gated = {KILN_EPI_GATED_RESIDUAL, &g};
    return kiln_matmul_epi(be, &y, &x, a->w, NULL, &gated, err);
}

/* y = (1 + scale) LN(x) + shift with the modulation's chunks ish, isc, per segment. */
static kiln_status ln_mod_rows(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, const float *mod,
                               const mod_rows *rm, int64_t D, int ish, int isc, float eps, kiln_err *err) {
    seg_args a = {y, x, NULL, D, ish, isc, eps};
    return for_segments(be, x->shape[0], mod, rm, seg_ln, &a, err);
}

/* X += gate * (A . W^T) with the modulation's chunk ig as the gate, per segment. */
static kiln_status gated_rows(kiln_backend *be, kiln_tensor *X, const kiln_tensor *A, const kiln_tensor *W,
                              const float *mod, const mod_rows *rm, int64_t D, int ig, kiln_err *err) {
    seg_args a = {X, A, W, D, ig, 0, 0.0f};
    return for_segments(be, X->shape[0], mod, rm, seg_gated, &a, err);
}

/* The MLP of a double block for one stream: X += g2 * mlp_out(SwiGLU(mlp_in((1+sc2) LN(X) + sh2))); under TP this
 * rank's Fl units, and the product goes to `part` (all-reduced and gated by the caller) instead of into X. */
static kiln_status stream_mlp(const kiln_flux2_dit *m, kiln_backend *be, kiln_flux2_dit_ws *w,
                              const kiln_flux2_stream *st, kiln_tensor *X, const float *mod, const mod_rows *rm,
                              kiln_tensor *part, kiln_err *err) {
    const kiln_ops *op = be->ops;
    int64_t D = m->hidden, F = m->mlp_hidden, Fl = w->Fl, R = X->shape[0];
    int r = w->tp ? w->tp->rank : 0;
    kiln_tensor nrm = kiln_view_2d(w->nrm, w->dt, R, D), mlp = kiln_view_2d(w->mlp, w->dt, R, 2 * Fl);
    kiln_tensor act = kiln_view_2d(w->act, w->dt, R, Fl);
    CK(ln_mod_rows(be, &nrm, X, mod, rm, D, 3, 4, m->eps, err));
    if (!part) {
        CK(kiln_matmul(be, &mlp, &nrm, &st->mlp_in, NULL, err));
        CK(op->swiglu(be, &act, &mlp, err));
        return gated_rows(be, X, &act, &st->mlp_out, mod, rm, D, 5, err);
    }
    for (int j = 0; j < 2; j++) { /* gate units r*Fl.., value units F + r*Fl.. */
        kiln_tensor y = kiln_cols(&mlp, j * Fl, Fl), wr = kiln_tensor_rows(&st->mlp_in, j * F + r * Fl, Fl);
        CK(kiln_matmul(be, &y, &nrm, &wr, NULL, err));
    }
    CK(op->swiglu(be, &act, &mlp, err));
    return matmul_kslice(be, part, &act, &st->mlp_out, r * Fl, NULL, err);
}

/* Tensor parallelism: the partial products of both streams (img rows, then txt rows of w->red) summed over the
 * ranks, then X += gate * sum per stream. */
static kiln_status tp_reduce_gate(kiln_backend *be, kiln_flux2_dit_ws *w, kiln_tensor *X[], kiln_tensor *part[],
                                  const kiln_tensor *gate[], int n, kiln_err *err) {
    size_t rows = 0;
    for (int i = 0; i < n; i++) rows += (size_t)X[i]->shape[0];
    CK(w->tp->ops->all_reduce(w->tp, be, w->red, rows * (size_t)X[0]->shape[1], err));
    for (int i = 0; i < n; i++) CK(be->ops->gated_add(be, X[i], gate[i], part[i], err));
    return KILN_OK;
}

/* This block's view of the reference cache (9B-KV; mode OFF: none). bi: double blocks 0.., single blocks after. */
static kiln_dit_kv block_kv(const kiln_flux2_dit *m, const kiln_flux2_dit_ws *w, int bi) {
    kiln_dit_kv kv = w->kv;
    if (kv.mode != KILN_DIT_KV_OFF)
        kv.cache = (char *)w->kv_cache + (size_t)bi * w->B * kv.R * 2 * m->hidden * kiln_dtype_size(w->dt);
    return kv;
}

static kiln_status double_block(const kiln_flux2_dit *m, kiln_backend *be, kiln_flux2_dit_ws *w,
                                const kiln_flux2_double *blk, int bi, kiln_err *err) {
    const kiln_ops *op = be->ops;
    const int64_t D = m->hidden, Dq = w->Dq, B = w->B, L = w->L, N = w->N, T = L + N;
    const int r = w->tp ? w->tp->rank : 0, heads = m->heads / (int)(D / Dq);
    const float *mi = w->mods, *mt = w->mods + 6 * D;
    kiln_tensor IMG = kiln_view_2d(w->img, w->dt, B * N, D), TXT = kiln_view_2d(w->txt, w->dt, B * L, D);
    kiln_tensor QKVI = kiln_view_2d(w->qkv_i, w->dt, B * N, 3 * Dq);
    kiln_tensor QKVT = kiln_view_2d(w->qkv_t, w->dt, B * L, 3 * Dq);
    kiln_tensor CAT = kiln_view_2d(w->cat, w->dt, T, 3 * Dq), CATO = kiln_view_2d(w->catout, w->dt, T, Dq);
    kiln_tensor ATI = kiln_view_2d(w->att_i, w->dt, B * N, Dq), ATT = kiln_view_2d(w->att_t, w->dt, B * L, Dq);
    /* TP: partial products of the img rows then the txt rows */
    kiln_tensor PI = kiln_f32_2d(w->red, B * N, D), PT = kiln_f32_2d(w->red ? w->red + B * N * D : NULL, B * L, D);
    /* 9B-KV extract: each sample's image stream is [Ni noisy ; R reference] rows, the latter modulated apart */
    const kiln_dit_kv kv = block_kv(m, w, bi);
    const mod_rows rmi = {kv.mode == KILN_DIT_KV_EXTRACT ? w->mods_ref : NULL, N, N - kv.R, kv.R};

    /* 1-3. per stream: modulated LN, q|k|v, per-head RMS on q and k */
    for (int s = 0; s < 2; s++) {
        const kiln_flux2_stream *st = s ? &blk->txt : &blk->img;
        kiln_tensor *X = s ? &TXT : &IMG, *QKV = s ? &QKVT : &QKVI;
        const float *mod = s ? mt : mi;
        kiln_tensor nrm = kiln_view_2d(w->nrm, w->dt, X->shape[0], D);
        CK(ln_mod_rows(be, &nrm, X, mod, s ? NULL : &rmi, D, 0, 1, m->eps, err));
        CK(stream_qkv(be, st, QKV, &nrm, D, Dq, r, err));
        kiln_tensor q = kiln_cols(QKV, 0, Dq), k = kiln_cols(QKV, Dq, Dq);
        CK(op->rms_norm(be, &q, &q, &st->q_norm, 1e-6f, err));
        CK(op->rms_norm(be, &k, &k, &st->k_norm, 1e-6f, err));
    }
    /* 4-5. per sample: [txt ; img] sequence, RoPE, joint attention (this rank's heads), split back */
    kiln_tensor COS = kiln_f32_2d(w->rcos, T, m->head_dim / 2), SIN = kiln_f32_2d(w->rsin, T, m->head_dim / 2);
    kiln_dit_attn at = {B, L, N, Dq, heads, m->head_dim, &COS, &SIN, kv.mode ? kiln_dit_kv_attend : NULL, &kv};
    if (w->sp.comm) CK(kiln_dit_ulysses_batch(be, &w->sp, &at, &QKVT, &QKVI, &ATT, &ATI, err)); /* this rank's tokens */
    else CK(kiln_dit_joint_attention(be, &at, &QKVT, &QKVI, &CAT, &CATO, &ATT, &ATI, err));
    /* 6-7. per stream: gated attention projection, then the gated SwiGLU MLP */
    if (!w->tp) {
        for (int s = 0; s < 2; s++) {
            const kiln_flux2_stream *st = s ? &blk->txt : &blk->img;
            kiln_tensor *X = s ? &TXT : &IMG, *A = s ? &ATT : &ATI;
            const float *mod = s ? mt : mi;
            const mod_rows *rm = s ? NULL : &rmi;
            CK(gated_rows(be, X, A, &st->proj, mod, rm, D, 2, err));
            CK(stream_mlp(m, be, w, st, X, mod, rm, NULL, err));
        }
        return KILN_OK;
    }
    /* TP: both streams' projection shares, one all-reduce; then both MLP shares, one all-reduce */
    kiln_tensor *X[2] = {&IMG, &TXT}, *PART[2] = {&PI, &PT};
    kiln_tensor g1[2] = {kiln_f32_1d((float *)mi + 2 * D, D), kiln_f32_1d((float *)mt + 2 * D, D)};
    kiln_tensor g2[2] = {kiln_f32_1d((float *)mi + 5 * D, D), kiln_f32_1d((float *)mt + 5 * D, D)};
    const kiln_tensor *G1[2] = {&g1[0], &g1[1]}, *G2[2] = {&g2[0], &g2[1]};
    CK(matmul_kslice(be, &PI, &ATI, &blk->img.proj, r * Dq, NULL, err));
    CK(matmul_kslice(be, &PT, &ATT, &blk->txt.proj, r * Dq, NULL, err));
    CK(tp_reduce_gate(be, w, X, PART, G1, 2, err));
    CK(stream_mlp(m, be, w, &blk->img, &IMG, mi, NULL, &PI, err));
    CK(stream_mlp(m, be, w, &blk->txt, &TXT, mt, NULL, &PT, err));
    return tp_reduce_gate(be, w, X, PART, G2, 2, err);
}

static kiln_status single_block(const kiln_flux2_dit *m, kiln_backend *be, kiln_flux2_dit_ws *w,
                                const kiln_flux2_single *blk, int bi, kiln_err *err) {
    const kiln_ops *op = be->ops;
    const int64_t D = m->hidden, F = m->mlp_hidden, Dq = w->Dq, Fl = w->Fl, B = w->B, T = (int64_t)w->L + w->N;
    const int64_t R = B * T;
    const int r = w->tp ? w->tp->rank : 0, heads = m->heads / (int)(D / Dq);
    const float *ms = w->mods + 12 * D;
    kiln_tensor g = kiln_f32_1d((float *)ms + 2 * D, D); /* (tensor parallelism's gate) */
    kiln_tensor S = kiln_view_2d(w->S, w->dt, R, D), nrm = kiln_view_2d(w->nrm, w->dt, R, D);
    kiln_tensor P = kiln_view_2d(w->P, w->dt, R, 3 * Dq + 2 * Fl), OM = kiln_view_2d(w->OM, w->dt, R, Dq + Fl);
    kiln_tensor COS = kiln_f32_2d(w->rcos, T, m->head_dim / 2), SIN = kiln_f32_2d(w->rsin, T, m->head_dim / 2);
    /* 9B-KV extract: each sample is [L text ; Ni noisy ; R reference] rows, the last modulated apart */
    const kiln_dit_kv kv = block_kv(m, w, bi);
    const mod_rows rms = {kv.mode == KILN_DIT_KV_EXTRACT ? w->mods_ref + 6 * D : NULL, T, T - kv.R, kv.R};

    CK(ln_mod_rows(be, &nrm, &S, ms, &rms, D, 0, 1, m->eps, err));
    if (!w->tp) {
        CK(kiln_matmul(be, &P, &nrm, &blk->linear1, NULL, err));
    } else { /* this rank's rows of linear1: q, k, v of its heads, then its gate and value units */
        const int64_t row0[5] = {r * Dq, D + r * Dq, 2 * D + r * Dq, 3 * D + r * Fl, 3 * D + F + r * Fl};
        const int64_t col0[5] = {0, Dq, 2 * Dq, 3 * Dq, 3 * Dq + Fl}, n[5] = {Dq, Dq, Dq, Fl, Fl};
        for (int j = 0; j < 5; j++) {
            kiln_tensor y = kiln_cols(&P, col0[j], n[j]), wr = kiln_tensor_rows(&blk->linear1, row0[j], n[j]);
            CK(kiln_matmul(be, &y, &nrm, &wr, NULL, err));
        }
    }
    kiln_tensor q = kiln_cols(&P, 0, Dq), k = kiln_cols(&P, Dq, Dq);
    CK(op->rms_norm(be, &q, &q, &blk->q_norm, 1e-6f, err));
    CK(op->rms_norm(be, &k, &k, &blk->k_norm, 1e-6f, err));
    kiln_dit_attn at = {B, w->L, w->N, Dq, heads, m->head_dim, &COS, &SIN, kv.mode ? kiln_dit_kv_attend : NULL, &kv};
    kiln_tensor att = kiln_cols(&OM, 0, Dq);
    if (w->sp.comm) CK(kiln_dit_ulysses_batch(be, &w->sp, &at, &P, NULL, &att, NULL, err)); /* this rank's tokens */
    else CK(kiln_dit_single_attention(be, &at, &P, &OM, err));
    kiln_tensor ab = kiln_cols(&P, 3 * Dq, 2 * Fl), mo = kiln_cols(&OM, Dq, Fl);
    CK(op->swiglu(be, &mo, &ab, err));
    if (!w->tp) return gated_rows(be, &S, &OM, &blk->linear2, ms, &rms, D, 2, err);
    /* TP: linear2's columns of this rank's heads and units, summed into one partial, one all-reduce */
    kiln_tensor part = kiln_f32_2d(w->red, R, D), oa = kiln_cols(&OM, 0, Dq);
    kiln_epilogue add = {KILN_EPI_ADD, NULL};
    CK(matmul_kslice(be, &part, &oa, &blk->linear2, r * Dq, NULL, err));
    CK(matmul_kslice(be, &part, &mo, &blk->linear2, D + r * Fl, &add, err));
    kiln_tensor *X[1] = {&S}, *PART[1] = {&part};
    const kiln_tensor *G[1] = {&g};
    return tp_reduce_gate(be, w, X, PART, G, 1, err);
}

kiln_status kiln_flux2_dit_set_timestep(const kiln_flux2_dit *m, kiln_backend *be, kiln_flux2_dit_ws *w, float t,
                                       kiln_err *err) {
    float host_emb[1024];
    if (m->t_ch > 1024) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "DiT: %d timestep channels (max 1024)", m->t_ch);
    kiln_flux2_timestep_embedding(t, m->t_ch, host_emb);
    return be->ops->upload(be, w->temb, host_emb, (size_t)m->t_ch * sizeof(float), err);
}

/* The references' timestep (KV workspaces): the pipeline's ref_timestep = full_like(timestep,
 * ref_fixed_timestep * 1000), embedded like any timestep. Constant, so uploaded once at ws creation. */
static kiln_status set_ref_timestep(const kiln_flux2_dit *m, kiln_backend *be, kiln_flux2_dit_ws *w,
                                                   kiln_err *err) {
    float host_emb[1024];
    if (m->t_ch > 1024) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "DiT: %d timestep channels (max 1024)", m->t_ch);
    kiln_flux2_timestep_embedding(KILN_FLUX2_KV_REF_TIMESTEP * 1000.0f, m->t_ch, host_emb);
    return be->ops->upload(be, w->temb_ref, host_emb, (size_t)m->t_ch * sizeof(float), err);
}

kiln_status kiln_flux2_dit_set_text(const kiln_flux2_dit *m, kiln_backend *be, kiln_flux2_dit_ws *w, const float *txt,
                                    kiln_err *err) {
    kiln_tensor C = kiln_tensor_make((void *)txt, KILN_DT_F32, 2, (int64_t[]){(int64_t)w->B * w->L, m->ctx_dim});
    kiln_tensor TXT0 = kiln_view_2d(w->txt0, w->dt, (int64_t)w->B * w->L, m->hidden);
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
        CK(kiln_dit_sp_take_rows(be, &w->sp, x, B, m->in_ch, err));
        x = w->sp.x_l;
        v = w->sp.v_l;
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
    if (w->kv.mode == KILN_DIT_KV_EXTRACT) { /* 9B-KV: the references' modulation from the fixed timestep */
        kiln_tensor tref = kiln_f32_2d(w->temb_ref, 1, m->t_ch);
        kiln_tensor r_img = kiln_f32_2d(w->mods_ref, 1, 6 * D), r_sgl = kiln_f32_2d(w->mods_ref + 6 * D, 1, 3 * D);
        CK(kiln_matmul(be, &th, &tref, &m->t_in, NULL, err));
        CK(op->silu(be, &th, &th, err));
        CK(kiln_matmul(be, &vec, &th, &m->t_out, NULL, err));
        CK(op->silu(be, &vec, &vec, err));
        CK(kiln_matmul(be, &r_img, &vec, &m->mod_img, NULL, err));
        CK(kiln_matmul(be, &r_sgl, &vec, &m->mod_single, NULL, err));
    }

    /* 3. input projections (the text one, txt0, is the same every step: made once by set_text) */
    kiln_tensor X = kiln_tensor_make((void *)x, KILN_DT_F32, 2, (int64_t[]){B * N, m->in_ch});
    kiln_tensor IMG = kiln_view_2d(w->img, w->dt, B * N, D), TXT = kiln_view_2d(w->txt, w->dt, B * L, D);
    kiln_tensor TXT0 = kiln_view_2d(w->txt0, w->dt, B * L, D);
    CK(kiln_matmul(be, &IMG, &X, &m->img_in, NULL, err));
    CK(op->copy(be, &TXT, &TXT0, err));

    /* 5. double-stream blocks */
    for (int i = 0; i < m->n_double; i++) CK(double_block(m, be, w, &m->dbl[i], i, err));

    /* 6. S = [txt ; img] per sample, then the single-stream blocks */
    kiln_tensor S = kiln_view_2d(w->S, w->dt, B * T, D);
    CK(kiln_dit_join_streams(be, &S, &TXT, &IMG, B, L, N, err));
    for (int i = 0; i < m->n_single; i++) CK(single_block(m, be, w, &m->sgl[i], m->n_double + i, err));

    /* 7-8. drop the text rows; final adaLN (shift, scale) and the output projection */
    CK(kiln_dit_split_image(be, &IMG, &S, B, L, N, err));
    kiln_tensor nrm = kiln_view_2d(w->nrm, w->dt, B * N, D);
    kiln_tensor sh = kiln_f32_1d(w->mods + 15 * D, D), sc = kiln_f32_1d(w->mods + 16 * D, D);
    CK(op->layer_norm_modulate(be, &nrm, &IMG, &sh, &sc, 1e-6f, err));
    kiln_tensor V = kiln_f32_2d(v, B * N, m->out_ch);
    CK(kiln_matmul(be, &V, &nrm, &m->final_out, NULL, err));
    if (w->sp.comm) CK(kiln_dit_sp_gather_rows(be, &w->sp, v_all, B, m->out_ch, err)); /* every rank's rows */
    return KILN_OK;
}

kiln_status kiln_flux2_dit_forward(const kiln_flux2_dit *m, kiln_backend *be, kiln_flux2_dit_ws *w,
                                   const float *x, const float *txt, float t, float *v, kiln_err *err) {
    CK(kiln_flux2_dit_set_timestep(m, be, w, t, err));
    if (!w->have_txt) CK(kiln_flux2_dit_set_text(m, be, w, txt, err));
    return kiln_flux2_dit_run(m, be, w, x, v, err);
}

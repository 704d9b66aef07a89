/* dit_ulysses.c - Ulysses sequence-parallel attention (see dit_ulysses.h). */
#include <math.h>
#include <string.h>

#include "models/dit_ulysses.h"
#include "models/views.h"

kiln_status kiln_dit_ulysses_check(int size, int heads, int64_t n_img, kiln_err *err) {
    if (size < 1 || heads % size)
        return KILN_FAIL(err, KILN_E_INVALID, "sequence parallelism over %d ranks: the DiT's %d heads are not "
                         "divisible by %d", size, heads, size);
    if (n_img % size)
        return KILN_FAIL(err, KILN_E_INVALID, "sequence parallelism over %d ranks: %lld image tokens are not "
                         "divisible by %d", size, (long long)n_img, size);
    return KILN_OK;
}

/* The buffers' sizes in floats, in kiln_dit_sp's order (send, recv, cat, cato, tgather, x_l, v_l). */
static void sp_sizes(int64_t P, int64_t B, int64_t L, int64_t Nf, int64_t D, int64_t in_ch, int64_t out_ch,
                     int64_t n[7]) {
    const int64_t Nl = Nf / P, Dp = D / P;
    const int64_t all[7] = {Nl * 3 * D, Nl * 3 * D, (L + Nf) * 3 * Dp, (L + Nf) * Dp, P * L * Dp, B * Nl * in_ch,
                            B * Nl * out_ch};
    memcpy(n, all, sizeof all);
}

size_t kiln_dit_sp_bytes(int P, int64_t B, int64_t L, int64_t Nf, int64_t D, int64_t in_ch, int64_t out_ch) {
    int64_t n[7];
    sp_sizes(P, B, L, Nf, D, in_ch, out_ch, n);
    size_t bytes = 0;
    for (int i = 0; i < 7; i++) bytes += kiln_backend_elems_bytes((size_t)n[i], KILN_DT_F32);
    return bytes;
}

bool kiln_dit_sp_alloc(kiln_dit_sp *sp, kiln_backend *be, kiln_comm *comm, int64_t B, int64_t L, int64_t Nf,
                       int64_t D, int64_t in_ch, int64_t out_ch) {
    float **buf[] = {&sp->send, &sp->recv, &sp->cat, &sp->cato, &sp->tgather, &sp->x_l, &sp->v_l};
    int64_t n[7];
    sp_sizes(comm->size, B, L, Nf, D, in_ch, out_ch, n);
    sp->comm = comm;
    sp->N = Nf;
    bool ok = true;
    for (size_t i = 0; i < sizeof buf / sizeof *buf; i++) *buf[i] = kiln_backend_alloc_floats(be, (size_t)n[i], &ok);
    return ok;
}

void kiln_dit_sp_free(kiln_dit_sp *sp, kiln_backend *be) {
    float *buf[] = {sp->send, sp->recv, sp->cat, sp->cato, sp->tgather, sp->x_l, sp->v_l};
    for (size_t i = 0; i < sizeof buf / sizeof *buf; i++)
        if (buf[i]) be->ops->free(be, buf[i]);
}

kiln_status kiln_dit_sp_take_rows(kiln_backend *be, const kiln_dit_sp *sp, const float *x, int64_t B, int64_t in_ch,
                                  kiln_err *err) {
    const int64_t Nf = sp->N, N = Nf / sp->comm->size, r0 = (int64_t)sp->comm->rank * N;
    kiln_tensor XF = kiln_tensor_make((void *)x, KILN_DT_F32, 2, (int64_t[]){B * Nf, in_ch});
    kiln_tensor XL = kiln_f32_2d(sp->x_l, B * N, in_ch);
    for (int64_t b = 0; b < B; b++) {
        kiln_tensor src = kiln_tensor_rows(&XF, b * Nf + r0, N), dst = kiln_tensor_rows(&XL, b * N, N);
        KILN_TRY(be->ops->copy(be, &dst, &src, err));
    }
    return KILN_OK;
}

kiln_status kiln_dit_sp_gather_rows(kiln_backend *be, const kiln_dit_sp *sp, float *v, int64_t B, int64_t out_ch,
                                    kiln_err *err) {
    kiln_comm *c = sp->comm;
    const size_t per = (size_t)(sp->N / c->size * out_ch);
    for (int64_t b = 0; b < B; b++)
        KILN_TRY(c->ops->all_gather(c, be, sp->v_l + b * per, v + b * per * c->size, per, err));
    return KILN_OK;
}

kiln_status kiln_dit_ulysses_batch(kiln_backend *be, const kiln_dit_sp *sp, const kiln_dit_attn *a,
                                   const kiln_tensor *qkv_t, const kiln_tensor *qkv_i, kiln_tensor *att_t,
                                   kiln_tensor *att_i, kiln_err *err) {
    const int64_t L = a->L, N = a->N, T = L + N, Tf = L + sp->N;
    kiln_tensor cs = *a->cos, sn = *a->sin; /* the full [txt ; img] tables, not this rank's length */
    cs.shape[0] = sn.shape[0] = Tf;
    kiln_dit_attn full = *a;
    full.cos = &cs;
    full.sin = &sn;
    for (int64_t b = 0; b < a->B; b++) {
        const bool dbl = qkv_i != NULL; /* double blocks: separate streams; single: one sample-major sequence */
        kiln_tensor qt = kiln_tensor_rows(qkv_t, dbl ? b * L : b * T, L);
        kiln_tensor qi = dbl ? kiln_tensor_rows(qkv_i, b * N, N) : kiln_tensor_rows(qkv_t, b * T + L, N);
        kiln_tensor ot = kiln_tensor_rows(att_t, dbl ? b * L : b * T, L);
        kiln_tensor oi = dbl ? kiln_tensor_rows(att_i, b * N, N) : kiln_tensor_rows(att_t, b * T + L, N);
        KILN_TRY(kiln_dit_ulysses_attention(be, sp, &full, &qt, &qi, &ot, &oi, err));
    }
    return KILN_OK;
}

size_t kiln_dit_ulysses_floats(int64_t L, int64_t N, int64_t D, int P) {
    int64_t Nl = N / P, Dp = D / P;
    return (size_t)(2 * Nl * 3 * D + (L + N) * 4 * Dp + (int64_t)P * L * Dp);
}

kiln_status kiln_dit_ulysses_attention(kiln_backend *be, const kiln_dit_sp *sp, const kiln_dit_attn *a,
                                       const kiln_tensor *qkv_t, const kiln_tensor *qkv_i, kiln_tensor *att_t,
                                       kiln_tensor *att_i, kiln_err *err) {
    const kiln_ops *op = be->ops;
    kiln_comm *c = sp->comm;
    const int P = c->size, R = c->rank, Hp = a->heads / P;
    const int64_t D = a->D, Dp = D / P, L = a->L, N = sp->N, Nl = N / P;
    /* 1. pack: block s of send = [Nl, 3Dp], the q | k | v columns of head group s */
    kiln_tensor SEND = kiln_f32_2d(sp->send, (int64_t)P * Nl, 3 * Dp);
    for (int s = 0; s < P; s++)
        for (int j = 0; j < 3; j++) {
            kiln_tensor src = kiln_cols(qkv_i, j * D + s * Dp, Dp);
            kiln_tensor blk = kiln_tensor_rows(&SEND, s * Nl, Nl), dst = kiln_cols(&blk, j * Dp, Dp);
            KILN_TRY(op->copy(be, &dst, &src, err));
        }
    KILN_TRY(c->ops->all_to_all(c, be, sp->send, sp->recv, (size_t)(Nl * 3 * Dp), err));
    /* 2. [txt (my head group) ; img (all tokens, my head group)], RoPE, attention over H/P heads */
    kiln_tensor CAT = kiln_f32_2d(sp->cat, L + N, 3 * Dp), CATO = kiln_f32_2d(sp->cato, L + N, Dp);
    kiln_tensor ct = kiln_tensor_rows(&CAT, 0, L), ci = kiln_tensor_rows(&CAT, L, N);
    for (int j = 0; j < 3; j++) {
        kiln_tensor src = kiln_cols(qkv_t, j * D + R * Dp, Dp), dst = kiln_cols(&ct, j * Dp, Dp);
        KILN_TRY(op->copy(be, &dst, &src, err));
    }
    kiln_tensor RECV = kiln_f32_2d(sp->recv, N, 3 * Dp);
    KILN_TRY(op->copy(be, &ci, &RECV, err));
    kiln_tensor q = kiln_cols(&CAT, 0, Dp), k = kiln_cols(&CAT, Dp, Dp), v = kiln_cols(&CAT, 2 * Dp, Dp);
    KILN_TRY(op->rope(be, &q, a->cos, a->sin, Hp, true, err));
    KILN_TRY(op->rope(be, &k, a->cos, a->sin, Hp, true, err));
    KILN_TRY(op->attention(be, &CATO, &q, &k, &v, Hp, Hp, 1.0f / sqrtf((float)a->head_dim), false, NULL, NULL, err));
    /* 3. image rows back to their ranks (all head groups of my tokens), text head groups gathered everywhere */
    KILN_TRY(c->ops->all_to_all(c, be, sp->cato + L * Dp, sp->recv, (size_t)(Nl * Dp), err));
    KILN_TRY(c->ops->all_gather(c, be, sp->cato, sp->tgather, (size_t)(L * Dp), err));
    for (int s = 0; s < P; s++) {
        kiln_tensor bi = kiln_f32_2d(sp->recv + (size_t)s * Nl * Dp, Nl, Dp), di = kiln_cols(att_i, s * Dp, Dp);
        kiln_tensor bt = kiln_f32_2d(sp->tgather + (size_t)s * L * Dp, L, Dp), dt = kiln_cols(att_t, s * Dp, Dp);
        KILN_TRY(op->copy(be, &di, &bi, err));
        KILN_TRY(op->copy(be, &dt, &bt, err));
    }
    return KILN_OK;
}

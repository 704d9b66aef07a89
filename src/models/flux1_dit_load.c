/* flux1_dit_load.c - FLUX.1 DiT weights under diffusers names (FluxTransformer2DModel) and the config keys it
 * reads (see flux1_dit.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "models/config.h"
#include "models/flux1_dit.h"

/* "<name>.weight" [rows, cols] (-1 = any) and "<name>.bias" [rows]; name printf-formatted. */
static kiln_status w_lin(kiln_wset *ws, kiln_flux1_linear *l, int64_t rows, int64_t cols, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static kiln_status w_lin(kiln_wset *ws, kiln_flux1_linear *l, int64_t rows, int64_t cols, const char *fmt, ...) {
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    KILN_TRY(kiln_w_mat(ws, &l->w, rows, cols, "%s.weight", name));
    return kiln_w_vec(ws, &l->b, l->w.shape[0], "%s.bias", name);
}

static int count_blocks(const kiln_wset *ws, const char *list, const char *leaf) {
    int n = 0;
    while (kiln_w_has(ws, "%s.%d.%s", list, n, leaf)) n++;
    return n;
}

static kiln_status load_stream(kiln_wset *ws, const kiln_flux1_dit *m, int i, bool txt, kiln_flux1_stream *st) {
    const int D = m->hidden, Dh = m->head_dim, F = m->mlp_hidden;
    const char *b = "transformer_blocks";
    KILN_TRY(w_lin(ws, &st->mod, 6 * D, D, "%s.%d.%s.linear", b, i, txt ? "norm1_context" : "norm1"));
    KILN_TRY(w_lin(ws, &st->q, D, D, "%s.%d.attn.%s", b, i, txt ? "add_q_proj" : "to_q"));
    KILN_TRY(w_lin(ws, &st->k, D, D, "%s.%d.attn.%s", b, i, txt ? "add_k_proj" : "to_k"));
    KILN_TRY(w_lin(ws, &st->v, D, D, "%s.%d.attn.%s", b, i, txt ? "add_v_proj" : "to_v"));
    KILN_TRY(kiln_w_vec(ws, &st->q_norm, Dh, "%s.%d.attn.%s.weight", b, i, txt ? "norm_added_q" : "norm_q"));
    KILN_TRY(kiln_w_vec(ws, &st->k_norm, Dh, "%s.%d.attn.%s.weight", b, i, txt ? "norm_added_k" : "norm_k"));
    KILN_TRY(w_lin(ws, &st->out, D, D, "%s.%d.attn.%s", b, i, txt ? "to_add_out" : "to_out.0"));
    KILN_TRY(w_lin(ws, &st->ff_in, F, D, "%s.%d.%s.net.0.proj", b, i, txt ? "ff_context" : "ff"));
    return w_lin(ws, &st->ff_out, D, F, "%s.%d.%s.net.2", b, i, txt ? "ff_context" : "ff");
}

static kiln_status load_single(kiln_wset *ws, const kiln_flux1_dit *m, int i, kiln_flux1_single *s) {
    const int D = m->hidden, Dh = m->head_dim, F = m->mlp_hidden;
    const char *b = "single_transformer_blocks";
    KILN_TRY(w_lin(ws, &s->mod, 3 * D, D, "%s.%d.norm.linear", b, i));
    KILN_TRY(w_lin(ws, &s->q, D, D, "%s.%d.attn.to_q", b, i));
    KILN_TRY(w_lin(ws, &s->k, D, D, "%s.%d.attn.to_k", b, i));
    KILN_TRY(w_lin(ws, &s->v, D, D, "%s.%d.attn.to_v", b, i));
    KILN_TRY(kiln_w_vec(ws, &s->q_norm, Dh, "%s.%d.attn.norm_q.weight", b, i));
    KILN_TRY(kiln_w_vec(ws, &s->k_norm, Dh, "%s.%d.attn.norm_k.weight", b, i));
    KILN_TRY(w_lin(ws, &s->mlp, F, D, "%s.%d.proj_mlp", b, i));
    return w_lin(ws, &s->out, D, D + F, "%s.%d.proj_out", b, i);
}

/* The config.json keys FluxTransformer2DModel reads: sizes must agree with the weights; patch_size only 1;
 * guidance_embeds must agree with the guidance_embedder weights; axes_dims_rope read. */
static kiln_status read_config_json(kiln_flux1_dit *m, const json_t *c, kiln_err *err) {
    const char *what = "FLUX.1 DiT config";
    const struct {
        const char *key;
        int have;
    } sizes[] = {{"in_channels", m->in_ch},       {"out_channels", m->out_ch},
                 {"num_layers", m->n_double},     {"num_single_layers", m->n_single},
                 {"attention_head_dim", m->head_dim}, {"num_attention_heads", m->heads},
                 {"joint_attention_dim", m->ctx_dim}, {"pooled_projection_dim", m->pooled_dim}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        double v = sizes[i].have;
        KILN_TRY(kiln_cfg_number(c, what, sizes[i].key, &v, err));
        if (v != sizes[i].have)
            return KILN_FAIL(err, KILN_E_FORMAT, "FLUX.1 DiT: config %s is %g, the weights' %d", sizes[i].key, v,
                             sizes[i].have);
    }
    double v = 1;
    KILN_TRY(kiln_cfg_number(c, what, "patch_size", &v, err));
    if (v != 1)
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "FLUX.1 DiT: config patch_size %g (FLUX.1 packs 2x2 outside the "
                         "model; only 1 is supported)", v);
    bool g = m->guidance;
    KILN_TRY(kiln_cfg_boolean(c, what, "guidance_embeds", &g, err));
    if (g != m->guidance)
        return KILN_FAIL(err, KILN_E_FORMAT, "FLUX.1 DiT: config guidance_embeds is %s but the weights %s a "
                         "guidance_embedder", g ? "true" : "false", m->guidance ? "have" : "lack");
    int axes[3] = {16, 56, 56};
    const json_t *ax = kiln_cfg_get(c, "axes_dims_rope");
    if (ax) {
        if (!json_is_array(ax))
            return KILN_FAIL(err, KILN_E_FORMAT, "FLUX.1 DiT config: axes_dims_rope is not an array");
        if (json_array_size(ax) != 3)
            return KILN_FAIL(err, KILN_E_FORMAT, "FLUX.1 DiT config: axes_dims_rope has %zu axes (FLUX.1 has 3)",
                             json_array_size(ax));
        for (int a = 0; a < 3; a++) {
            const json_t *e = json_array_get(ax, (size_t)a);
            if (!json_is_integer(e) || json_integer_value(e) > 4096)
                return KILN_FAIL(err, KILN_E_FORMAT, "FLUX.1 DiT config: axes_dims_rope[%d] is not an integer "
                                 "up to 4096", a);
            axes[a] = (int)json_integer_value(e);
        }
    }
    int sum = 0;
    for (int a = 0; a < 3; a++) {
        if (axes[a] <= 0 || axes[a] % 2)
            return KILN_FAIL(err, KILN_E_FORMAT, "FLUX.1 DiT config: RoPE axis of %d dims (must be even and > 0)",
                             axes[a]);
        m->axes[a] = axes[a];
        sum += axes[a];
    }
    if (sum != m->head_dim)
        return KILN_FAIL(err, KILN_E_FORMAT, "FLUX.1 DiT: RoPE axes sum to %d, the head dim is %d", sum, m->head_dim);
    return KILN_OK;
}

/* Reads config.json (absent: the weights' sizes and FLUX.1's RoPE axes stand). */
static kiln_status read_config(kiln_flux1_dit *m, const char *path, kiln_err *err) {
    json_t *c = NULL;
    KILN_TRY(kiln_config_open(path, &c, err));
    kiln_status s = read_config_json(m, c, err);
    json_decref(c);
    return s;
}

/* y = x W^T + b over the rows [start, start + n) of a fused linear (BFL qkv, linear1): views, no copies. */
static kiln_flux1_linear lin_rows(const kiln_flux1_linear *l, int64_t start, int64_t n) {
    kiln_flux1_linear r = {kiln_tensor_rows(&l->w, start, n), kiln_tensor_rows(&l->b, start, n)};
    return r;
}

/* One stream of a BFL double block: double_blocks.i.{img,txt}_{mod.lin, attn.qkv, attn.norm.*_norm.scale,
 * attn.proj, mlp.0, mlp.2} (the names diffusers' convert_flux_transformer_checkpoint_to_diffusers maps). */
static kiln_status load_stream_bfl(kiln_wset *ws, const kiln_flux1_dit *m, int i, bool txt, kiln_flux1_stream *st) {
    const int D = m->hidden, Dh = m->head_dim, F = m->mlp_hidden;
    const char *s = txt ? "txt" : "img";
    kiln_flux1_linear qkv;
    KILN_TRY(w_lin(ws, &st->mod, 6 * D, D, "double_blocks.%d.%s_mod.lin", i, s));
    KILN_TRY(w_lin(ws, &qkv, 3 * D, D, "double_blocks.%d.%s_attn.qkv", i, s));
    st->q = lin_rows(&qkv, 0, D);
    st->k = lin_rows(&qkv, D, D);
    st->v = lin_rows(&qkv, 2 * D, D);
    KILN_TRY(kiln_w_vec(ws, &st->q_norm, Dh, "double_blocks.%d.%s_attn.norm.query_norm.scale", i, s));
    KILN_TRY(kiln_w_vec(ws, &st->k_norm, Dh, "double_blocks.%d.%s_attn.norm.key_norm.scale", i, s));
    KILN_TRY(w_lin(ws, &st->out, D, D, "double_blocks.%d.%s_attn.proj", i, s));
    KILN_TRY(w_lin(ws, &st->ff_in, F, D, "double_blocks.%d.%s_mlp.0", i, s));
    return w_lin(ws, &st->ff_out, D, F, "double_blocks.%d.%s_mlp.2", i, s);
}

/* A BFL single block: linear1 rows [q; k; v; mlp], linear2 = proj_out, modulation.lin = norm.linear. */
static kiln_status load_single_bfl(kiln_wset *ws, const kiln_flux1_dit *m, int i, kiln_flux1_single *s) {
    const int D = m->hidden, Dh = m->head_dim, F = m->mlp_hidden;
    kiln_flux1_linear l1;
    KILN_TRY(w_lin(ws, &s->mod, 3 * D, D, "single_blocks.%d.modulation.lin", i));
    KILN_TRY(w_lin(ws, &l1, 3 * D + F, D, "single_blocks.%d.linear1", i));
    s->q = lin_rows(&l1, 0, D);
    s->k = lin_rows(&l1, D, D);
    s->v = lin_rows(&l1, 2 * D, D);
    s->mlp = lin_rows(&l1, 3 * D, F);
    KILN_TRY(kiln_w_vec(ws, &s->q_norm, Dh, "single_blocks.%d.norm.query_norm.scale", i));
    KILN_TRY(kiln_w_vec(ws, &s->k_norm, Dh, "single_blocks.%d.norm.key_norm.scale", i));
    return w_lin(ws, &s->out, D, D + F, "single_blocks.%d.linear2", i);
}

/* The names of the model-level tensors and of the blocks in one layout; the blocks' own tensors are read by its
 * stream and single loaders. */
typedef struct flux1_names {
    const char *x_in, *q_norm0, *mlp0, *ctx_in, *t1, *t2, *g1, *g2, *p1, *p2, *norm_out, *proj_out;
    const char *dbl, *dbl_probe, *sgl, *sgl_probe; /* block prefixes and a tensor every block has */
    kiln_status (*stream)(kiln_wset *, const kiln_flux1_dit *, int, bool, kiln_flux1_stream *);
    kiln_status (*single)(kiln_wset *, const kiln_flux1_dit *, int, kiln_flux1_single *);
} flux1_names;

static const flux1_names names_bfl = {
    "img_in", "double_blocks.0.img_attn.norm.query_norm.scale", "double_blocks.0.img_mlp.0.weight", "txt_in",
    "time_in.in_layer", "time_in.out_layer", "guidance_in.in_layer", "guidance_in.out_layer", "vector_in.in_layer",
    "vector_in.out_layer", "final_layer.adaLN_modulation.1", "final_layer.linear",
    "double_blocks", "img_mod.lin.weight", "single_blocks", "modulation.lin.weight", load_stream_bfl, load_single_bfl};

static const flux1_names names_diffusers = {
    "x_embedder", "transformer_blocks.0.attn.norm_q.weight", "transformer_blocks.0.ff.net.0.proj.weight",
    "context_embedder", "time_text_embed.timestep_embedder.linear_1", "time_text_embed.timestep_embedder.linear_2",
    "time_text_embed.guidance_embedder.linear_1", "time_text_embed.guidance_embedder.linear_2",
    "time_text_embed.text_embedder.linear_1", "time_text_embed.text_embedder.linear_2", "norm_out.linear", "proj_out",
    "transformer_blocks", "norm1.linear.weight", "single_transformer_blocks", "norm.linear.weight", load_stream,
    load_single};

/* The shapes and weights of a layout: sizes come from the tensors, checked against each other. */
static kiln_status load_layout(kiln_flux1_dit *m, const flux1_names *n, kiln_err *err) {
    kiln_wset *ws = &m->ws;
    KILN_TRY(w_lin(ws, &m->x_in, -1, -1, "%s", n->x_in));
    m->hidden = (int)m->x_in.w.shape[0];
    m->in_ch = (int)m->x_in.w.shape[1];
    const int D = m->hidden;
    kiln_tensor qn, t;
    KILN_TRY(kiln_w_vec(ws, &qn, -1, "%s", n->q_norm0));
    m->head_dim = (int)qn.shape[0];
    if (m->head_dim <= 0 || D % m->head_dim || m->head_dim % 2)
        return KILN_FAIL(err, KILN_E_FORMAT, "FLUX.1 DiT: hidden size %d is not a multiple of the head dim %d (or "
                         "the head dim is odd)", D, m->head_dim);
    m->heads = D / m->head_dim;
    KILN_TRY(kiln_w_mat(ws, &t, -1, D, "%s", n->mlp0));
    m->mlp_hidden = (int)t.shape[0];
    KILN_TRY(w_lin(ws, &m->ctx_in, D, -1, "%s", n->ctx_in));
    m->ctx_dim = (int)m->ctx_in.w.shape[1];
    KILN_TRY(w_lin(ws, &m->t1, D, -1, "%s", n->t1));
    m->t_ch = (int)m->t1.w.shape[1];
    if (m->t_ch % 2 || m->t_ch > 1024)
        return KILN_FAIL(err, KILN_E_FORMAT, "FLUX.1 DiT: %d timestep channels (even, at most 1024)", m->t_ch);
    KILN_TRY(w_lin(ws, &m->t2, D, D, "%s", n->t2));
    m->guidance = kiln_w_has(ws, "%s.weight", n->g1);
    if (m->guidance) {
        KILN_TRY(w_lin(ws, &m->g1, D, m->t_ch, "%s", n->g1));
        KILN_TRY(w_lin(ws, &m->g2, D, D, "%s", n->g2));
    }
    KILN_TRY(w_lin(ws, &m->p1, D, -1, "%s", n->p1));
    m->pooled_dim = (int)m->p1.w.shape[1];
    KILN_TRY(w_lin(ws, &m->p2, D, D, "%s", n->p2));
    KILN_TRY(w_lin(ws, &m->norm_out, 2 * D, D, "%s", n->norm_out));
    KILN_TRY(w_lin(ws, &m->proj_out, -1, D, "%s", n->proj_out));
    m->out_ch = (int)m->proj_out.w.shape[0];
    m->n_double = count_blocks(ws, n->dbl, n->dbl_probe);
    m->n_single = count_blocks(ws, n->sgl, n->sgl_probe);
    if (m->n_single == 0)
        return KILN_FAIL(err, KILN_E_FORMAT, "FLUX.1 DiT: %d double and no single blocks found", m->n_double);
    m->dbl = kiln_calloc((size_t)m->n_double, sizeof *m->dbl);
    m->sgl = kiln_calloc((size_t)m->n_single, sizeof *m->sgl);
    if (!m->dbl || !m->sgl) return KILN_FAIL(err, KILN_E_NOMEM, "FLUX.1 DiT: out of memory");
    for (int i = 0; i < m->n_double; i++) {
        KILN_TRY(n->stream(ws, m, i, false, &m->dbl[i].img));
        KILN_TRY(n->stream(ws, m, i, true, &m->dbl[i].txt));
    }
    for (int i = 0; i < m->n_single; i++) KILN_TRY(n->single(ws, m, i, &m->sgl[i]));
    m->theta = 10000.0; /* FluxPosEmbed(theta=10000): not a config key */
    return KILN_OK;
}

/* The BFL layout (no config file: FLUX.1's RoPE axes). */
static kiln_status load_bfl(kiln_flux1_dit *m, kiln_err *err) {
    m->bfl = true;
    KILN_TRY(load_layout(m, &names_bfl, err));
    m->axes[0] = 16;
    m->axes[1] = 56;
    m->axes[2] = 56;
    return KILN_OK;
}

/* Without a config (a BFL single file): FLUX.1's axes (16, 56, 56) must fill the head. */
static kiln_status check_default_axes(const kiln_flux1_dit *m, kiln_err *err) {
    if (m->axes[0] + m->axes[1] + m->axes[2] != m->head_dim)
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "FLUX.1 DiT: head dim %d is not FLUX.1's 128 (RoPE axes 16, 56, 56); "
                         "a BFL file carries no config to say other axes", m->head_dim);
    return KILN_OK;
}

static kiln_status load_all(kiln_flux1_dit *m, const char *config_json, kiln_err *err) {
    kiln_wset *ws = &m->ws;
    if (!kiln_w_has(ws, "transformer_blocks.0.norm1.linear.weight")) {
        if (kiln_w_has(ws, "double_blocks.0.img_mod.lin.weight")) {
            KILN_TRY(load_bfl(m, err));
            return config_json ? read_config(m, config_json, err) : check_default_axes(m, err);
        }
        if (kiln_w_has(ws, "double_stream_modulation_img.linear.weight") ||
            kiln_w_has(ws, "double_stream_modulation_img.lin.weight"))
            return KILN_FAIL(err, KILN_E_UNSUPPORTED, "FLUX.1 DiT: this is a FLUX.2 checkpoint (shared modulation)");
        return KILN_FAIL(err, KILN_E_FORMAT, "FLUX.1 DiT: not a FluxTransformer2DModel (no "
                         "transformer_blocks.0.norm1.linear.weight)");
    }
    KILN_TRY(load_layout(m, &names_diffusers, err));
    return read_config(m, config_json, err);
}

kiln_status kiln_flux1_dit_load(const kiln_st_file *ck, const char *config_json, kiln_flux1_dit **out, kiln_err *err) {
    kiln_flux1_dit *m = kiln_calloc(1, sizeof *m);
    if (!m) return KILN_FAIL(err, KILN_E_NOMEM, "FLUX.1 DiT: out of memory");
    kiln_wset_init(&m->ws, ck, "FLUX.1 DiT", err);
    kiln_status s = load_all(m, config_json, err);
    if (s != KILN_OK) {
        kiln_flux1_dit_free(m);
        return s;
    }
    *out = m;
    return KILN_OK;
}

void kiln_flux1_dit_free(kiln_flux1_dit *m) {
    if (!m) return;
    kiln_wset_free(&m->ws);
    kiln_free(m->dbl);
    kiln_free(m->sgl);
    kiln_free(m);
}

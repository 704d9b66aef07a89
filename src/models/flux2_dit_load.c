/* flux2_dit_load.c - FLUX.2 DiT weights from a BFL/ComfyUI single file or a diffusers transformer folder into
 * one struct (see flux2_dit.h, spec 1.6-1.7). */
#include <string.h>

#include "base/alloc.h"
#include "models/config.h"
#include "models/flux2_dit.h"

/* Counts blocks 0, 1, 2, ... while "<list>.<n>.<leaf>" exists. */
static int count_blocks(const kiln_wset *ws, const char *list, const char *leaf) {
    int n = 0;
    while (kiln_w_has(ws, "%s.%d.%s", list, n, leaf)) n++;
    return n;
}

static kiln_status load_bfl_stream(kiln_wset *ws, kiln_flux2_dit *m, int i, const char *s, kiln_flux2_stream *st) {
    int D = m->hidden, Dh = m->head_dim, F = m->mlp_hidden;
    KILN_TRY(kiln_w_mat(ws, &st->qkv, 3 * D, D, "double_blocks.%d.%s_attn.qkv.weight", i, s));
    st->q = kiln_tensor_rows(&st->qkv, 0, D);
    st->k = kiln_tensor_rows(&st->qkv, D, D);
    st->v = kiln_tensor_rows(&st->qkv, 2 * D, D);
    KILN_TRY(kiln_w_vec(ws, &st->q_norm, Dh, "double_blocks.%d.%s_attn.norm.query_norm.scale", i, s));
    KILN_TRY(kiln_w_vec(ws, &st->k_norm, Dh, "double_blocks.%d.%s_attn.norm.key_norm.scale", i, s));
    KILN_TRY(kiln_w_mat(ws, &st->proj, D, D, "double_blocks.%d.%s_attn.proj.weight", i, s));
    KILN_TRY(kiln_w_mat(ws, &st->mlp_in, 2 * F, D, "double_blocks.%d.%s_mlp.0.weight", i, s));
    KILN_TRY(kiln_w_mat(ws, &st->mlp_out, D, F, "double_blocks.%d.%s_mlp.2.weight", i, s));
    return KILN_OK;
}

static kiln_status load_diffusers_stream(kiln_wset *ws, kiln_flux2_dit *m, int i, bool txt, kiln_flux2_stream *st) {
    int D = m->hidden, Dh = m->head_dim, F = m->mlp_hidden;
    const char *b = "transformer_blocks";
    memset(&st->qkv, 0, sizeof st->qkv);
    KILN_TRY(kiln_w_mat(ws, &st->q, D, D, "%s.%d.attn.%s.weight", b, i, txt ? "add_q_proj" : "to_q"));
    KILN_TRY(kiln_w_mat(ws, &st->k, D, D, "%s.%d.attn.%s.weight", b, i, txt ? "add_k_proj" : "to_k"));
    KILN_TRY(kiln_w_mat(ws, &st->v, D, D, "%s.%d.attn.%s.weight", b, i, txt ? "add_v_proj" : "to_v"));
    KILN_TRY(kiln_w_vec(ws, &st->q_norm, Dh, "%s.%d.attn.%s.weight", b, i, txt ? "norm_added_q" : "norm_q"));
    KILN_TRY(kiln_w_vec(ws, &st->k_norm, Dh, "%s.%d.attn.%s.weight", b, i, txt ? "norm_added_k" : "norm_k"));
    KILN_TRY(kiln_w_mat(ws, &st->proj, D, D, "%s.%d.attn.%s.weight", b, i, txt ? "to_add_out" : "to_out.0"));
    KILN_TRY(kiln_w_mat(ws, &st->mlp_in, 2 * F, D, "%s.%d.%s.linear_in.weight", b, i, txt ? "ff_context" : "ff"));
    KILN_TRY(kiln_w_mat(ws, &st->mlp_out, D, F, "%s.%d.%s.linear_out.weight", b, i, txt ? "ff_context" : "ff"));
    return KILN_OK;
}

/* An integer key that must describe the weights (the official loader fails on a mismatch). */
static kiln_status agree(const json_t *c, const char *key, int got, kiln_err *err) {
    int v = got;
    KILN_TRY(kiln_cfg_int(c, "transformer/config.json", key, &v, err));
    if (v != got)
        return KILN_FAIL(err, KILN_E_FORMAT, "transformer/config.json: %s %d, the weights have %d", key, v, got);
    return KILN_OK;
}

/* transformer/config.json: rope_theta, eps, axes_dims_rope read; the sizes must agree with the weights; what
 * FLUX.2 [klein] does not have is refused by name. */
static kiln_status read_config(kiln_flux2_dit *m, const json_t *c, kiln_err *err) {
    const char *w = "transformer/config.json";
    int Dh = m->head_dim;
    double theta = m->theta, eps = m->eps;
    KILN_TRY(kiln_cfg_number(c, w, "rope_theta", &theta, err));
    KILN_TRY(kiln_cfg_number(c, w, "eps", &eps, err));
    if (!(theta > 0 && eps > 0))
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: rope_theta %g and eps %g must be positive", w, theta, eps);
    m->theta = theta;
    m->eps = (float)eps;
    if (kiln_cfg_true(c, "guidance_embeds"))
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: guidance_embeds true (FLUX.2 dev?) is not supported", w);
    int patch = 1;
    KILN_TRY(kiln_cfg_int(c, w, "patch_size", &patch, err));
    if (patch != 1)
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: patch_size %d is not supported (FLUX.2: 1)", w, patch);
    KILN_TRY(agree(c, "in_channels", m->in_ch, err));
    if (kiln_cfg_get(c, "out_channels")) KILN_TRY(agree(c, "out_channels", m->out_ch, err));
    KILN_TRY(agree(c, "num_layers", m->n_double, err));
    KILN_TRY(agree(c, "num_single_layers", m->n_single, err));
    KILN_TRY(agree(c, "attention_head_dim", m->head_dim, err));
    KILN_TRY(agree(c, "num_attention_heads", m->heads, err));
    KILN_TRY(agree(c, "joint_attention_dim", m->ctx_dim, err));
    KILN_TRY(agree(c, "timestep_guidance_channels", m->t_ch, err));
    int axes[4] = {Dh / 4, Dh / 4, Dh / 4, Dh / 4}, na = 4;
    const json_t *ax = kiln_cfg_get(c, "axes_dims_rope");
    if (ax) {
        na = json_is_array(ax) ? (int)json_array_size(ax) : -1;
        if (na != 4)
            return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: axes_dims_rope has %d axes (FLUX.2 has 4: the ids are "
                             "(t, h, w, l))", w, na);
        for (int a = 0; a < 4; a++) axes[a] = (int)json_integer_value(json_array_get(ax, (size_t)a));
    }
    int sum = 0;
    for (int a = 0; a < 4; a++) {
        if (axes[a] <= 0 || axes[a] % 2)
            return KILN_FAIL(err, KILN_E_FORMAT, "%s: axes_dims_rope[%d] = %d must be positive and even", w, a,
                             axes[a]);
        m->axes[a] = axes[a];
        sum += axes[a];
    }
    if (sum != Dh)
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: axes_dims_rope sum to %d, the head dim (attention_head_dim) is %d",
                         w, sum, Dh);
    return KILN_OK;
}

static kiln_status load_all(kiln_flux2_dit *m, const char *config_json, kiln_err *err) {
    kiln_wset *ws = &m->ws;
    bool bfl = kiln_w_has(ws, "double_stream_modulation_img.lin.weight");
    bool dif = kiln_w_has(ws, "double_stream_modulation_img.linear.weight");
    if (!bfl && !dif) {
        if (kiln_w_has(ws, "double_blocks.0.img_mod.lin.weight") || kiln_w_has(ws, "transformer_blocks.0.norm1.linear.weight"))
            return KILN_FAIL(err, KILN_E_UNSUPPORTED, "DiT: this is a FLUX.1 checkpoint (per-block modulation); "
                             "kiln runs FLUX.2 [klein]");
        return KILN_FAIL(err, KILN_E_FORMAT, "DiT: not a FLUX.2 transformer (no double_stream_modulation_img "
                         "weight under BFL or diffusers names)");
    }
    m->layout = bfl ? KILN_LAYOUT_BFL : KILN_LAYOUT_DIFFUSERS;
    const char *n_img_in = bfl ? "img_in.weight" : "x_embedder.weight";
    KILN_TRY(kiln_w_mat(ws, &m->img_in, -1, -1, "%s", n_img_in));
    m->hidden = (int)m->img_in.shape[0];
    m->in_ch = (int)m->img_in.shape[1];
    int D = m->hidden;
    kiln_tensor qn;
    KILN_TRY(kiln_w_vec(ws, &qn, -1, bfl ? "double_blocks.0.img_attn.norm.query_norm.scale"
                                         : "transformer_blocks.0.attn.norm_q.weight"));
    m->head_dim = (int)qn.shape[0];
    if (m->head_dim <= 0 || D % m->head_dim || m->head_dim % 8)
        return KILN_FAIL(err, KILN_E_FORMAT, "DiT: hidden size %d is not a multiple of the head dim %d (or the "
                         "head dim is not a multiple of 8)", D, m->head_dim);
    m->heads = D / m->head_dim;
    kiln_tensor t;
    KILN_TRY(kiln_w_mat(ws, &t, -1, D, bfl ? "double_blocks.0.img_mlp.0.weight" : "transformer_blocks.0.ff.linear_in.weight"));
    m->mlp_hidden = (int)(t.shape[0] / 2);
    KILN_TRY(kiln_w_mat(ws, &m->txt_in, D, -1, bfl ? "txt_in.weight" : "context_embedder.weight"));
    m->ctx_dim = (int)m->txt_in.shape[1];
    KILN_TRY(kiln_w_mat(ws, &m->t_in, D, -1, bfl ? "time_in.in_layer.weight"
                                                 : "time_guidance_embed.timestep_embedder.linear_1.weight"));
    m->t_ch = (int)m->t_in.shape[1];
    if (m->t_ch % 2) return KILN_FAIL(err, KILN_E_FORMAT, "DiT: odd timestep channel count %d", m->t_ch);
    KILN_TRY(kiln_w_mat(ws, &m->t_out, D, D, bfl ? "time_in.out_layer.weight"
                                                 : "time_guidance_embed.timestep_embedder.linear_2.weight"));
    const char *lin = bfl ? "lin" : "linear";
    KILN_TRY(kiln_w_mat(ws, &m->mod_img, 6 * D, D, "double_stream_modulation_img.%s.weight", lin));
    KILN_TRY(kiln_w_mat(ws, &m->mod_txt, 6 * D, D, "double_stream_modulation_txt.%s.weight", lin));
    KILN_TRY(kiln_w_mat(ws, &m->mod_single, 3 * D, D, "single_stream_modulation.%s.weight", lin));
    kiln_tensor ada;
    KILN_TRY(kiln_w_mat(ws, &ada, 2 * D, D, bfl ? "final_layer.adaLN_modulation.1.weight" : "norm_out.linear.weight"));
    /* BFL LastLayer chunks (shift, scale); diffusers AdaLayerNormContinuous chunks (scale, shift). */
    m->final_shift = kiln_tensor_rows(&ada, bfl ? 0 : D, D);
    m->final_scale = kiln_tensor_rows(&ada, bfl ? D : 0, D);
    KILN_TRY(kiln_w_mat(ws, &m->final_out, -1, D, bfl ? "final_layer.linear.weight" : "proj_out.weight"));
    m->out_ch = (int)m->final_out.shape[0];
    if (kiln_w_has(ws, bfl ? "guidance_in.in_layer.weight" : "time_guidance_embed.guidance_embedder.linear_1.weight"))
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "DiT: has a guidance embedding (FLUX.2 dev?); kiln runs klein");

    m->n_double = bfl ? count_blocks(ws, "double_blocks", "img_attn.proj.weight")
                      : count_blocks(ws, "transformer_blocks", "attn.to_out.0.weight");
    m->n_single = bfl ? count_blocks(ws, "single_blocks", "linear1.weight")
                      : count_blocks(ws, "single_transformer_blocks", "attn.to_qkv_mlp_proj.weight");
    if (m->n_double == 0 || m->n_single == 0)
        return KILN_FAIL(err, KILN_E_FORMAT, "DiT: %d double and %d single blocks found (need at least one of each)",
                         m->n_double, m->n_single);
    m->dbl = kiln_calloc((size_t)m->n_double, sizeof *m->dbl);
    m->sgl = kiln_calloc((size_t)m->n_single, sizeof *m->sgl);
    if (!m->dbl || !m->sgl) return KILN_FAIL(err, KILN_E_NOMEM, "DiT: out of memory");
    for (int i = 0; i < m->n_double; i++) {
        if (bfl) {
            KILN_TRY(load_bfl_stream(ws, m, i, "img", &m->dbl[i].img));
            KILN_TRY(load_bfl_stream(ws, m, i, "txt", &m->dbl[i].txt));
        } else {
            KILN_TRY(load_diffusers_stream(ws, m, i, false, &m->dbl[i].img));
            KILN_TRY(load_diffusers_stream(ws, m, i, true, &m->dbl[i].txt));
        }
    }
    int F = m->mlp_hidden, Dh = m->head_dim;
    for (int i = 0; i < m->n_single; i++) {
        kiln_flux2_single *s = &m->sgl[i];
        if (bfl) {
            KILN_TRY(kiln_w_mat(ws, &s->linear1, 3 * D + 2 * F, D, "single_blocks.%d.linear1.weight", i));
            KILN_TRY(kiln_w_mat(ws, &s->linear2, D, D + F, "single_blocks.%d.linear2.weight", i));
            KILN_TRY(kiln_w_vec(ws, &s->q_norm, Dh, "single_blocks.%d.norm.query_norm.scale", i));
            KILN_TRY(kiln_w_vec(ws, &s->k_norm, Dh, "single_blocks.%d.norm.key_norm.scale", i));
        } else {
            const char *b = "single_transformer_blocks";
            KILN_TRY(kiln_w_mat(ws, &s->linear1, 3 * D + 2 * F, D, "%s.%d.attn.to_qkv_mlp_proj.weight", b, i));
            KILN_TRY(kiln_w_mat(ws, &s->linear2, D, D + F, "%s.%d.attn.to_out.weight", b, i));
            KILN_TRY(kiln_w_vec(ws, &s->q_norm, Dh, "%s.%d.attn.norm_q.weight", b, i));
            KILN_TRY(kiln_w_vec(ws, &s->k_norm, Dh, "%s.%d.attn.norm_k.weight", b, i));
        }
    }

    /* What shapes cannot tell: RoPE split and theta (config when there is one, else klein's). */
    m->theta = 2000.0;
    m->eps = 1e-6f;
    json_t *c;
    KILN_TRY(kiln_config_open(config_json, &c, err));
    kiln_status s = read_config(m, c, err);
    json_decref(c);
    return s;
}

kiln_status kiln_flux2_dit_load(const kiln_st_file *ck, const char *config_json, kiln_flux2_dit **out,
                                kiln_err *err) {
    kiln_flux2_dit *m = kiln_calloc(1, sizeof *m);
    if (!m) return KILN_FAIL(err, KILN_E_NOMEM, "DiT: out of memory");
    kiln_wset_init(&m->ws, ck, "DiT", err);
    kiln_status s = load_all(m, config_json, err);
    if (s != KILN_OK) {
        kiln_flux2_dit_free(m);
        return s;
    }
    *out = m;
    return KILN_OK;
}

void kiln_flux2_dit_free(kiln_flux2_dit *m) {
    if (!m) return;
    kiln_wset_free(&m->ws);
    kiln_free(m->dbl);
    kiln_free(m->sgl);
    kiln_free(m);
}

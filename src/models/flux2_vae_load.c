/* flux2_vae_load.c - FLUX.2 VAE decoder weights under diffusers or BFL/ldm names (see flux2_vae.h, spec 3.5). */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "models/flux2_vae.h"

static kiln_status load_resnet(kiln_wset *ws, const char *pre, bool bfl, int cin, int cout, kiln_vae_resnet *r) {
    KILN_TRY(kiln_w_conv(ws, &r->conv1_w, cout, cin, 3, "%s.conv1.weight", pre));
    r->cin = (int)r->conv1_w.shape[1];
    r->cout = (int)r->conv1_w.shape[0];
    cin = r->cin;
    cout = r->cout;
    KILN_TRY(kiln_w_vec(ws, &r->n1_g, cin, "%s.norm1.weight", pre));
    KILN_TRY(kiln_w_vec(ws, &r->n1_b, cin, "%s.norm1.bias", pre));
    KILN_TRY(kiln_w_vec(ws, &r->conv1_b, cout, "%s.conv1.bias", pre));
    KILN_TRY(kiln_w_vec(ws, &r->n2_g, cout, "%s.norm2.weight", pre));
    KILN_TRY(kiln_w_vec(ws, &r->n2_b, cout, "%s.norm2.bias", pre));
    KILN_TRY(kiln_w_conv(ws, &r->conv2_w, cout, cout, 3, "%s.conv2.weight", pre));
    KILN_TRY(kiln_w_vec(ws, &r->conv2_b, cout, "%s.conv2.bias", pre));
    const char *sc = bfl ? "nin_shortcut" : "conv_shortcut";
    if (cin != cout) {
        KILN_TRY(kiln_w_conv(ws, &r->sc_w, cout, cin, 1, "%s.%s.weight", pre, sc));
        KILN_TRY(kiln_w_vec(ws, &r->sc_b, cout, "%s.%s.bias", pre, sc));
    }
    return KILN_OK;
}

static kiln_status load_attn(kiln_wset *ws, bool bfl, const char *part, int c, kiln_vae_attn *a) {
    char pre[64];
    snprintf(pre, sizeof pre, bfl ? "%s.mid.attn_1" : "%s.mid_block.attentions.0", part);
    const char *n = bfl ? "norm" : "group_norm";
    const char *q = bfl ? "q" : "to_q", *k = bfl ? "k" : "to_k", *v = bfl ? "v" : "to_v";
    const char *o = bfl ? "proj_out" : "to_out.0";
    a->c = c;
    KILN_TRY(kiln_w_vec(ws, &a->n_g, c, "%s.%s.weight", pre, n));
    KILN_TRY(kiln_w_vec(ws, &a->n_b, c, "%s.%s.bias", pre, n));
    KILN_TRY(kiln_w_mat(ws, &a->q_w, c, c, "%s.%s.weight", pre, q));
    KILN_TRY(kiln_w_mat(ws, &a->k_w, c, c, "%s.%s.weight", pre, k));
    KILN_TRY(kiln_w_mat(ws, &a->v_w, c, c, "%s.%s.weight", pre, v));
    KILN_TRY(kiln_w_mat(ws, &a->o_w, c, c, "%s.%s.weight", pre, o));
    KILN_TRY(kiln_w_vec(ws, &a->q_b, c, "%s.%s.bias", pre, q));
    KILN_TRY(kiln_w_vec(ws, &a->k_b, c, "%s.%s.bias", pre, k));
    KILN_TRY(kiln_w_vec(ws, &a->v_b, c, "%s.%s.bias", pre, v));
    KILN_TRY(kiln_w_vec(ws, &a->o_b, c, "%s.%s.bias", pre, o));
    return KILN_OK;
}

static kiln_status load_all(kiln_flux2_vae *m, kiln_err *err) {
    kiln_wset *ws = &m->ws;
    bool dif = kiln_w_has(ws, "decoder.mid_block.resnets.0.conv1.weight");
    bool bfl = kiln_w_has(ws, "decoder.mid.block_1.conv1.weight");
    if (!dif && !bfl)
        return KILN_FAIL(err, KILN_E_FORMAT, "VAE: no decoder found (neither decoder.mid_block.resnets.0 nor "
                         "decoder.mid.block_1 weights)");
    m->bfl_names = bfl && !dif;
    bfl = m->bfl_names;
    m->groups = 32;
    m->gn_eps = 1e-6f;
    m->bn_eps = 1e-4f;
    KILN_TRY(kiln_w_mat(ws, &m->pq_w, -1, -1, "%s", bfl ? "decoder.post_quant_conv.weight" : "post_quant_conv.weight"));
    m->z_ch = (int)m->pq_w.shape[0];
    if (m->pq_w.shape[1] != m->z_ch) return KILN_FAIL(err, KILN_E_FORMAT, "VAE: post_quant_conv is not square");
    KILN_TRY(kiln_w_vec(ws, &m->pq_b, m->z_ch, "%s", bfl ? "decoder.post_quant_conv.bias" : "post_quant_conv.bias"));
    KILN_TRY(kiln_w_conv(ws, &m->conv_in_w, -1, m->z_ch, 3, "decoder.conv_in.weight"));
    int cmid = (int)m->conv_in_w.shape[0];
    KILN_TRY(kiln_w_vec(ws, &m->conv_in_b, cmid, "decoder.conv_in.bias"));
    for (int i = 0; i < 2; i++) {
        char pre[128];
        if (bfl) snprintf(pre, sizeof pre, "decoder.mid.block_%d", i + 1);
        else snprintf(pre, sizeof pre, "decoder.mid_block.resnets.%d", i);
        KILN_TRY(load_resnet(ws, pre, bfl, cmid, cmid, &m->mid_res[i]));
    }
    KILN_TRY(load_attn(ws, bfl, "decoder", cmid, &m->mid_attn));
    int n = 0;
    while (n < KILN_VAE_MAX_LEVELS + 1 && (bfl ? kiln_w_has(ws, "decoder.up.%d.block.0.conv1.weight", n)
                                               : kiln_w_has(ws, "decoder.up_blocks.%d.resnets.0.conv1.weight", n)))
        n++;
    if (n == 0 || n > KILN_VAE_MAX_LEVELS)
        return KILN_FAIL(err, KILN_E_FORMAT, "VAE: %d decoder levels (expected 1..%d)", n, KILN_VAE_MAX_LEVELS);
    m->n_levels = n;
    int c = cmid;
    for (int i = 0; i < n; i++) {
        kiln_vae_up_level *L = &m->up[i];
        int lv = bfl ? n - 1 - i : i; /* BFL numbers levels finest first */
        char pre[128];
        for (int j = 0; j <= KILN_VAE_MAX_RES; j++) {
            if (bfl) snprintf(pre, sizeof pre, "decoder.up.%d.block.%d", lv, j);
            else snprintf(pre, sizeof pre, "decoder.up_blocks.%d.resnets.%d", lv, j);
            if (!kiln_w_has(ws, "%s.conv1.weight", pre)) break;
            if (j == KILN_VAE_MAX_RES)
                return KILN_FAIL(err, KILN_E_FORMAT, "VAE: more than %d ResNets in level %d", KILN_VAE_MAX_RES, i);
            KILN_TRY(load_resnet(ws, pre, bfl, c, -1, &L->res[j]));
            c = L->res[j].cout;
            L->n_res = j + 1;
        }
        if (bfl) snprintf(pre, sizeof pre, "decoder.up.%d.upsample.conv", lv);
        else snprintf(pre, sizeof pre, "decoder.up_blocks.%d.upsamplers.0.conv", lv);
        L->upsample = kiln_w_has(ws, "%s.weight", pre);
        if (L->upsample) {
            KILN_TRY(kiln_w_conv(ws, &L->up_w, c, c, 3, "%s.weight", pre));
            KILN_TRY(kiln_w_vec(ws, &L->up_b, c, "%s.bias", pre));
        }
    }
    const char *no = bfl ? "decoder.norm_out" : "decoder.conv_norm_out";
    KILN_TRY(kiln_w_vec(ws, &m->norm_out_g, c, "%s.weight", no));
    KILN_TRY(kiln_w_vec(ws, &m->norm_out_b, c, "%s.bias", no));
    KILN_TRY(kiln_w_conv(ws, &m->conv_out_w, 3, c, 3, "decoder.conv_out.weight"));
    KILN_TRY(kiln_w_vec(ws, &m->conv_out_b, 3, "decoder.conv_out.bias"));
    KILN_TRY(kiln_w_vec(ws, &m->bn_mean, 4 * m->z_ch, "bn.running_mean"));
    KILN_TRY(kiln_w_vec(ws, &m->bn_var, 4 * m->z_ch, "bn.running_var"));
    return KILN_OK;
}

/* The encoder, when the file has one (spec 3.3; names as the decoder's, "down" for "up"). */
static kiln_status load_encoder(kiln_flux2_vae *m, kiln_err *err) {
    kiln_wset *ws = &m->ws;
    bool bfl = m->bfl_names;
    m->has_encoder = kiln_w_has(ws, "encoder.conv_in.weight");
    if (!m->has_encoder) return KILN_OK;
    KILN_TRY(kiln_w_conv(ws, &m->enc_in_w, -1, 3, 3, "encoder.conv_in.weight"));
    int c = (int)m->enc_in_w.shape[0];
    KILN_TRY(kiln_w_vec(ws, &m->enc_in_b, c, "encoder.conv_in.bias"));
    int n = 0;
    while (n < KILN_VAE_MAX_LEVELS + 1 && (bfl ? kiln_w_has(ws, "encoder.down.%d.block.0.conv1.weight", n)
                                               : kiln_w_has(ws, "encoder.down_blocks.%d.resnets.0.conv1.weight", n)))
        n++;
    if (n == 0 || n > KILN_VAE_MAX_LEVELS)
        return KILN_FAIL(err, KILN_E_FORMAT, "VAE: %d encoder levels (expected 1..%d)", n, KILN_VAE_MAX_LEVELS);
    m->n_down = n;
    for (int i = 0; i < n; i++) {
        kiln_vae_up_level *L = &m->down[i];
        char pre[128];
        for (int j = 0; j <= KILN_VAE_MAX_RES; j++) {
            if (bfl) snprintf(pre, sizeof pre, "encoder.down.%d.block.%d", i, j);
            else snprintf(pre, sizeof pre, "encoder.down_blocks.%d.resnets.%d", i, j);
            if (!kiln_w_has(ws, "%s.conv1.weight", pre)) break;
            if (j == KILN_VAE_MAX_RES)
                return KILN_FAIL(err, KILN_E_FORMAT, "VAE: more than %d ResNets in encoder level %d", KILN_VAE_MAX_RES, i);
            KILN_TRY(load_resnet(ws, pre, bfl, c, -1, &L->res[j]));
            c = L->res[j].cout;
            L->n_res = j + 1;
        }
        if (bfl) snprintf(pre, sizeof pre, "encoder.down.%d.downsample.conv", i);
        else snprintf(pre, sizeof pre, "encoder.down_blocks.%d.downsamplers.0.conv", i);
        L->upsample = kiln_w_has(ws, "%s.weight", pre);
        if (L->upsample) {
            KILN_TRY(kiln_w_conv(ws, &L->up_w, c, c, 3, "%s.weight", pre));
            KILN_TRY(kiln_w_vec(ws, &L->up_b, c, "%s.bias", pre));
        }
    }
    for (int i = 0; i < 2; i++) {
        char pre[128];
        if (bfl) snprintf(pre, sizeof pre, "encoder.mid.block_%d", i + 1);
        else snprintf(pre, sizeof pre, "encoder.mid_block.resnets.%d", i);
        KILN_TRY(load_resnet(ws, pre, bfl, c, c, &m->enc_mid_res[i]));
    }
    KILN_TRY(load_attn(ws, bfl, "encoder", c, &m->enc_mid_attn));
    const char *no = bfl ? "encoder.norm_out" : "encoder.conv_norm_out";
    KILN_TRY(kiln_w_vec(ws, &m->enc_norm_g, c, "%s.weight", no));
    KILN_TRY(kiln_w_vec(ws, &m->enc_norm_b, c, "%s.bias", no));
    KILN_TRY(kiln_w_conv(ws, &m->enc_out_w, 2 * m->z_ch, c, 3, "encoder.conv_out.weight"));
    KILN_TRY(kiln_w_vec(ws, &m->enc_out_b, 2 * m->z_ch, "encoder.conv_out.bias"));
    const char *qc = bfl ? "encoder.quant_conv" : "quant_conv";
    KILN_TRY(kiln_w_mat(ws, &m->qc_w, 2 * m->z_ch, 2 * m->z_ch, "%s.weight", qc));
    KILN_TRY(kiln_w_vec(ws, &m->qc_b, 2 * m->z_ch, "%s.bias", qc));
    return KILN_OK;
}

kiln_status kiln_flux2_vae_load(const kiln_st_file *ck, kiln_flux2_vae **out, kiln_err *err) {
    kiln_flux2_vae *m = kiln_calloc(1, sizeof *m);
    if (!m) return KILN_FAIL(err, KILN_E_NOMEM, "VAE: out of memory");
    kiln_wset_init(&m->ws, ck, "VAE", err);
    kiln_status s = load_all(m, err);
    if (s == KILN_OK) s = load_encoder(m, err);
    if (s != KILN_OK) {
        kiln_flux2_vae_free(m);
        return s;
    }
    *out = m;
    return KILN_OK;
}

void kiln_flux2_vae_free(kiln_flux2_vae *m) {
    if (!m) return;
    kiln_wset_free(&m->ws);
    kiln_free(m);
}

int kiln_flux2_vae_scale(const kiln_flux2_vae *m) {
    int s = 1;
    for (int i = 0; i < m->n_levels; i++)
        if (m->up[i].upsample) s *= 2;
    return s;
}

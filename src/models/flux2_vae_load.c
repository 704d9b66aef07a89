/* flux2_vae_load.c - FLUX.2 (and FLUX.1, flux1_vae.h) VAE weights under diffusers or BFL/ldm names (see flux2_vae.h, spec 3.5). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "models/config.h"
#include "models/flux1_vae.h"
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
    const char *pq = bfl ? "decoder.post_quant_conv" : "post_quant_conv";
    if (m->flux1 && kiln_w_has(ws, "bn.running_mean"))
        return KILN_FAIL(err, KILN_E_FORMAT, "VAE: this file has bn.running_mean: a FLUX.2 VAE, not FLUX.1's");
    /* FLUX.1's AutoencoderKL config turns post_quant_conv off; FLUX.2 always has it */
    if (!m->flux1 || kiln_w_has(ws, "%s.weight", pq)) {
        KILN_TRY(kiln_w_mat(ws, &m->pq_w, -1, -1, "%s.weight", pq));
        m->z_ch = (int)m->pq_w.shape[0];
        if (m->pq_w.shape[1] != m->z_ch) return KILN_FAIL(err, KILN_E_FORMAT, "VAE: post_quant_conv is not square");
        KILN_TRY(kiln_w_vec(ws, &m->pq_b, m->z_ch, "%s.bias", pq));
    }
    KILN_TRY(kiln_w_conv(ws, &m->conv_in_w, -1, m->pq_w.data ? m->z_ch : -1, 3, "decoder.conv_in.weight"));
    m->z_ch = (int)m->conv_in_w.shape[1];
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
    if (m->flux1) return KILN_OK; /* AutoencoderKL has no latent batch norm */
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
    if (m->flux1 && !kiln_w_has(ws, "%s.weight", qc)) return KILN_OK; /* use_quant_conv false */
    KILN_TRY(kiln_w_mat(ws, &m->qc_w, 2 * m->z_ch, 2 * m->z_ch, "%s.weight", qc));
    KILN_TRY(kiln_w_vec(ws, &m->qc_b, 2 * m->z_ch, "%s.bias", qc));
    return KILN_OK;
}

/* Every string of the array key must be want (absent: OK). */
static kiln_status expect_blocks(const json_t *c, const char *w, const char *key, const char *want, kiln_err *err) {
    const json_t *a = kiln_cfg_get(c, key);
    if (!a) return KILN_OK;
    if (!json_is_array(a)) return KILN_FAIL(err, KILN_E_FORMAT, "%s: %s must be a list", w, key);
    for (size_t i = 0; i < json_array_size(a); i++) {
        const char *t = json_string_value(json_array_get(a, i));
        if (!t || strcmp(t, want))
            return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: %s[%zu] \"%s\" is not supported (kiln implements %s)", w,
                             key, i, t ? t : "?", want);
    }
    return KILN_OK;
}

static kiln_status expect_int(const json_t *c, const char *w, const char *key, int want, kiln_err *err) {
    int v = want;
    KILN_TRY(kiln_cfg_int(c, w, key, &v, err));
    if (v != want) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: %s %d is not supported (%d)", w, key, v, want);
    return KILN_OK;
}

/* GroupNorm needs every normalised channel count divisible by the group count. */
static kiln_status check_groups(const kiln_flux2_vae *m, int c, const char *where, kiln_err *err) {
    if (c % m->groups)
        return KILN_FAIL(err, KILN_E_FORMAT, "VAE: norm_num_groups %d does not divide the %d channels of %s",
                         m->groups, c, where);
    return KILN_OK;
}

/* FLUX.1 (AutoencoderKL): the latent scale and shift FluxPipeline applies, and the optional 1x1 convs, whose
 * config flags (default true) must agree with the weights. */
static kiln_status read_config_flux1(kiln_flux2_vae *m, const json_t *c, const char *w, kiln_err *err) {
    m->scaling_factor = 0.18215; /* AutoencoderKL's default */
    KILN_TRY(kiln_cfg_number(c, w, "scaling_factor", &m->scaling_factor, err));
    const json_t *sh = kiln_cfg_get(c, "shift_factor");
    if (!sh || json_is_null(sh))
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: shift_factor is null or missing (FluxPipeline adds it to the "
                         "latents: FLUX.1's is 0.1159)", w);
    KILN_TRY(kiln_cfg_number(c, w, "shift_factor", &m->shift_factor, err));
    if (!(fabs(m->scaling_factor) > 1e-12 && isfinite(m->scaling_factor)) || !isfinite(m->shift_factor))
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: scaling_factor %g / shift_factor %g must be finite, scaling non-zero",
                         w, m->scaling_factor, m->shift_factor);
    const char *keys[2] = {"use_post_quant_conv", "use_quant_conv"};
    bool have[2] = {m->pq_w.data != NULL, !m->has_encoder || m->qc_w.data != NULL};
    for (int i = 0; i < 2; i++) {
        bool on = true;
        KILN_TRY(kiln_cfg_boolean(c, w, keys[i], &on, err));
        if (on != have[i])
            return KILN_FAIL(err, KILN_E_FORMAT, "%s: %s is %s but the weights %s it", w, keys[i], on ? "true" : "false",
                             have[i] ? "have" : "lack");
    }
    return KILN_OK;
}

static kiln_status read_config(kiln_flux2_vae *m, const json_t *c, kiln_err *err) {
    const char *w = "vae/config.json";
    KILN_TRY(kiln_cfg_int(c, w, "norm_num_groups", &m->groups, err));
    if (m->groups < 1) return KILN_FAIL(err, KILN_E_FORMAT, "%s: norm_num_groups %d must be positive", w, m->groups);
    if (m->flux1) {
        KILN_TRY(read_config_flux1(m, c, w, err));
    } else {
        double bn_eps = m->bn_eps;
        KILN_TRY(kiln_cfg_number(c, w, "batch_norm_eps", &bn_eps, err));
        if (!(bn_eps > 0)) return KILN_FAIL(err, KILN_E_FORMAT, "%s: batch_norm_eps %g must be positive", w, bn_eps);
        m->bn_eps = (float)bn_eps;
    }
    KILN_TRY(kiln_cfg_expect_str(c, w, "act_fn", "silu", err));
    KILN_TRY(expect_blocks(c, w, "up_block_types", "UpDecoderBlock2D", err));
    KILN_TRY(expect_blocks(c, w, "down_block_types", "DownEncoderBlock2D", err));
    KILN_TRY(expect_int(c, w, "in_channels", 3, err));
    KILN_TRY(expect_int(c, w, "out_channels", 3, err));
    KILN_TRY(expect_int(c, w, "latent_channels", m->z_ch, err));
    static const char *const must_be_true[] = {"mid_block_add_attention", "use_post_quant_conv", "use_quant_conv"};
    size_t n_true = m->flux1 ? 1 : sizeof must_be_true / sizeof must_be_true[0]; /* FLUX.1: read_config_flux1 */
    for (size_t i = 0; i < n_true; i++) {
        bool on = true;
        KILN_TRY(kiln_cfg_boolean(c, w, must_be_true[i], &on, err));
        if (!on) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: %s false is not supported", w, must_be_true[i]);
    }
    const json_t *ps = m->flux1 ? NULL : kiln_cfg_get(c, "patch_size"); /* AutoencoderKL has no patch_size */
    if (ps && !(json_is_array(ps) && json_array_size(ps) == 2 && json_integer_value(json_array_get(ps, 0)) == 2 &&
                json_integer_value(json_array_get(ps, 1)) == 2))
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: patch_size is not supported (FLUX.2 latents are [2, 2] "
                         "patches)", w);
    /* structure: must describe the weights kiln found */
    const json_t *dec = kiln_cfg_get(c, "decoder_block_out_channels");
    if (!dec) dec = kiln_cfg_get(c, "block_out_channels");
    if (json_is_array(dec) && (int)json_array_size(dec) != m->n_levels)
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: %zu decoder levels in the config, %d in the weights", w,
                         json_array_size(dec), m->n_levels);
    int lpb = m->up[0].n_res - 1;
    KILN_TRY(kiln_cfg_int(c, w, "layers_per_block", &lpb, err));
    for (int i = 0; i < m->n_levels; i++)
        if (m->up[i].n_res != lpb + 1)
            return KILN_FAIL(err, KILN_E_FORMAT, "%s: layers_per_block %d means %d ResNets per decoder level; "
                             "level %d of the weights has %d", w, lpb, lpb + 1, i, m->up[i].n_res);
    return KILN_OK;
}

static kiln_status check_all_groups(const kiln_flux2_vae *m, kiln_err *err) {
    for (int i = 0; i < 2; i++) {
        KILN_TRY(check_groups(m, m->mid_res[i].cin, "the mid block", err));
        KILN_TRY(check_groups(m, m->mid_res[i].cout, "the mid block", err));
    }
    for (int i = 0; i < m->n_levels; i++)
        for (int j = 0; j < m->up[i].n_res; j++) {
            KILN_TRY(check_groups(m, m->up[i].res[j].cin, "a decoder ResNet", err));
            KILN_TRY(check_groups(m, m->up[i].res[j].cout, "a decoder ResNet", err));
        }
    for (int i = 0; m->has_encoder && i < m->n_down; i++)
        for (int j = 0; j < m->down[i].n_res; j++) {
            KILN_TRY(check_groups(m, m->down[i].res[j].cin, "an encoder ResNet", err));
            KILN_TRY(check_groups(m, m->down[i].res[j].cout, "an encoder ResNet", err));
        }
    return KILN_OK;
}

kiln_status kiln_flux2_vae_load(const kiln_st_file *ck, kiln_flux2_vae **out, kiln_err *err) {
    return kiln_flux2_vae_load_config(ck, NULL, out, err);
}

static kiln_status load_family(const kiln_st_file *ck, const char *config_json, bool flux1, kiln_flux2_vae **out,
                               kiln_err *err);

kiln_status kiln_flux2_vae_load_config(const kiln_st_file *ck, const char *config_json, kiln_flux2_vae **out,
                                       kiln_err *err) {
    return load_family(ck, config_json, false, out, err);
}

kiln_status kiln_flux1_vae_load_config(const kiln_st_file *ck, const char *config_json, kiln_flux2_vae **out,
                                       kiln_err *err) {
    return load_family(ck, config_json, true, out, err);
}

static kiln_status load_family(const kiln_st_file *ck, const char *config_json, bool flux1, kiln_flux2_vae **out,
                               kiln_err *err) {
    *out = NULL;
    json_t *c;
    KILN_TRY(kiln_config_open(config_json, &c, err));
    kiln_flux2_vae *m = kiln_calloc(1, sizeof *m);
    if (!m) {
        json_decref(c);
        return KILN_FAIL(err, KILN_E_NOMEM, "VAE: out of memory");
    }
    m->flux1 = flux1;
    m->scaling_factor = KILN_FLUX1_VAE_SCALING;
    m->shift_factor = KILN_FLUX1_VAE_SHIFT;
    kiln_wset_init(&m->ws, ck, "VAE", err);
    kiln_status s = load_all(m, err);
    if (s == KILN_OK) s = load_encoder(m, err);
    if (s == KILN_OK && c) s = read_config(m, c, err);
    if (s == KILN_OK) s = check_all_groups(m, err);
    json_decref(c);
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

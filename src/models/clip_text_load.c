/* clip_text_load.c - CLIP text model weights and config (see clip_text.h). */
#include <jansson.h>
#include <string.h>

#include "base/alloc.h"
#include "models/clip_text.h"

/* Reads the keys CLIPTextModel's forward depends on that shapes cannot give; checks the sizes it states. */
static kiln_status read_config(kiln_clip_text *m, const char *path, kiln_err *err) {
    m->n_heads = 12; /* CLIP-L's (ComfyUI's clip_l file carries no config) */
    m->eps = 1e-5f;
    m->eos_token_id = 2;
    if (!path) return KILN_OK;
    json_error_t je;
    json_t *c = json_load_file(path, 0, &je);
    if (!json_is_object(c)) {
        json_decref(c);
        return KILN_FAIL(err, KILN_E_FORMAT, "CLIP: %s: %s", path, je.text);
    }
    kiln_status s = KILN_OK;
    const json_t *act = json_object_get(c, "hidden_act");
    if (act && (!json_is_string(act) || strcmp(json_string_value(act), "quick_gelu")))
        s = KILN_FAIL(err, KILN_E_UNSUPPORTED, "CLIP: hidden_act %s is not supported (only quick_gelu)",
                      json_is_string(act) ? json_string_value(act) : "(not a string)");
    const json_t *v;
    if (s == KILN_OK && (v = json_object_get(c, "num_attention_heads"))) {
        if (!json_is_integer(v) || json_integer_value(v) <= 0 || m->hidden % json_integer_value(v))
            s = KILN_FAIL(err, KILN_E_FORMAT, "CLIP: num_attention_heads does not divide hidden_size %d", m->hidden);
        else m->n_heads = (int)json_integer_value(v);
    }
    if (s == KILN_OK && (v = json_object_get(c, "layer_norm_eps"))) {
        if (!json_is_number(v) || json_number_value(v) <= 0)
            s = KILN_FAIL(err, KILN_E_FORMAT, "CLIP: layer_norm_eps is not a positive number");
        else m->eps = (float)json_number_value(v);
    }
    if (s == KILN_OK && (v = json_object_get(c, "eos_token_id"))) {
        if (!json_is_integer(v)) s = KILN_FAIL(err, KILN_E_FORMAT, "CLIP: eos_token_id is not an integer");
        else m->eos_token_id = (int32_t)json_integer_value(v);
    }
    const struct {
        const char *key;
        long long have;
    } sizes[] = {{"hidden_size", m->hidden}, {"intermediate_size", m->ffn}, {"num_hidden_layers", m->n_layers},
                 {"vocab_size", m->vocab}, {"max_position_embeddings", m->n_positions}};
    for (size_t i = 0; s == KILN_OK && i < sizeof sizes / sizeof sizes[0]; i++) {
        v = json_object_get(c, sizes[i].key);
        if (v && (!json_is_integer(v) || json_integer_value(v) != sizes[i].have))
            s = KILN_FAIL(err, KILN_E_FORMAT, "CLIP: config %s is not the weights' %lld", sizes[i].key, sizes[i].have);
    }
    json_decref(c);
    return s;
}

/* A LayerNorm's weight as (weight - 1) and its bias, f32. The (weight - 1) is made in the f32 copy kiln_w_vec
 * hands out (owned by the wset and one of its ranges), so it is placed with the other weights: a buffer of its
 * own would be host memory a GPU op cannot read (the strict-residency check). */
static kiln_status layer_norm(kiln_clip_text *m, kiln_tensor *scale, kiln_tensor *bias, const char *name) {
    kiln_wset *ws = &m->ws;
    KILN_TRY(kiln_w_vec(ws, scale, m->hidden, "%s.weight", name));
    KILN_TRY(kiln_w_vec(ws, bias, m->hidden, "%s.bias", name));
    float *d = scale->data;
    for (int i = 0; i < m->hidden; i++) d[i] -= 1.0f;
    return KILN_OK;
}

kiln_status kiln_clip_text_load(const kiln_st_file *ck, const char *config_json, kiln_clip_text **out,
                                kiln_err *err) {
    *out = NULL;
    kiln_clip_text *m = kiln_calloc(1, sizeof *m);
    if (!m) return KILN_FAIL(err, KILN_E_NOMEM, "CLIP: out of memory");
    kiln_wset_init(&m->ws, ck, "text encoder (CLIP)", err);
    kiln_wset *ws = &m->ws;
    kiln_status s;
    const char *p = "text_model.encoder.layers";
    if ((s = kiln_w_mat(ws, &m->tok_embed, -1, -1, "text_model.embeddings.token_embedding.weight"))) goto fail;
    m->vocab = m->tok_embed.shape[0];
    m->hidden = (int)m->tok_embed.shape[1];
    if ((s = kiln_w_mat(ws, &m->pos_embed, -1, m->hidden, "text_model.embeddings.position_embedding.weight")))
        goto fail;
    m->n_positions = m->pos_embed.shape[0];
    kiln_tensor t;
    if ((s = kiln_w_mat(ws, &t, -1, m->hidden, "%s.0.mlp.fc1.weight", p))) goto fail;
    m->ffn = (int)t.shape[0];
    while (kiln_w_has(ws, "%s.%d.layer_norm1.weight", p, m->n_layers)) m->n_layers++;
    if ((s = read_config(m, config_json, err))) goto fail;
    if (m->hidden % m->n_heads) {
        s = KILN_FAIL(err, KILN_E_FORMAT, "CLIP: %d heads do not divide hidden size %d", m->n_heads, m->hidden);
        goto fail;
    }
    m->head_dim = m->hidden / m->n_heads;
    m->layers = kiln_calloc((size_t)m->n_layers, sizeof *m->layers);
    if (!m->layers) {
        s = KILN_FAIL(err, KILN_E_NOMEM, "CLIP: out of memory");
        goto fail;
    }
    int D = m->hidden, F = m->ffn;
    char name[128];
    for (int i = 0; i < m->n_layers; i++) {
        kiln_clip_layer *L = &m->layers[i];
        snprintf(name, sizeof name, "%s.%d.layer_norm1", p, i);
        if ((s = layer_norm(m, &L->ln1_scale, &L->ln1_b, name))) goto fail;
        snprintf(name, sizeof name, "%s.%d.layer_norm2", p, i);
        if ((s = layer_norm(m, &L->ln2_scale, &L->ln2_b, name))) goto fail;
        if ((s = kiln_w_mat(ws, &L->wq, D, D, "%s.%d.self_attn.q_proj.weight", p, i)) ||
            (s = kiln_w_vec(ws, &L->bq, D, "%s.%d.self_attn.q_proj.bias", p, i)) ||
            (s = kiln_w_mat(ws, &L->wk, D, D, "%s.%d.self_attn.k_proj.weight", p, i)) ||
            (s = kiln_w_vec(ws, &L->bk, D, "%s.%d.self_attn.k_proj.bias", p, i)) ||
            (s = kiln_w_mat(ws, &L->wv, D, D, "%s.%d.self_attn.v_proj.weight", p, i)) ||
            (s = kiln_w_vec(ws, &L->bv, D, "%s.%d.self_attn.v_proj.bias", p, i)) ||
            (s = kiln_w_mat(ws, &L->wo, D, D, "%s.%d.self_attn.out_proj.weight", p, i)) ||
            (s = kiln_w_vec(ws, &L->bo, D, "%s.%d.self_attn.out_proj.bias", p, i)) ||
            (s = kiln_w_mat(ws, &L->w1, F, D, "%s.%d.mlp.fc1.weight", p, i)) ||
            (s = kiln_w_vec(ws, &L->b1, F, "%s.%d.mlp.fc1.bias", p, i)) ||
            (s = kiln_w_mat(ws, &L->w2, D, F, "%s.%d.mlp.fc2.weight", p, i)) ||
            (s = kiln_w_vec(ws, &L->b2, D, "%s.%d.mlp.fc2.bias", p, i)))
            goto fail;
    }
    if ((s = layer_norm(m, &m->final_scale, &m->final_b, "text_model.final_layer_norm"))) goto fail;
    if (m->n_layers == 0) {
        s = KILN_FAIL(err, KILN_E_FORMAT, "CLIP: no encoder layers");
        goto fail;
    }
    *out = m;
    return KILN_OK;
fail:
    kiln_clip_text_free(m);
    return s;
}

void kiln_clip_text_free(kiln_clip_text *m) {
    if (!m) return;
    kiln_wset_free(&m->ws);
    kiln_free(m->layers);
    kiln_free(m);
}

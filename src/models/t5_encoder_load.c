/* t5_encoder_load.c - T5 encoder weights and config (see t5_encoder.h). */
#include <jansson.h>
#include <string.h>

#include "base/alloc.h"
#include "models/t5_encoder.h"

static kiln_status int_key(const json_t *c, const char *key, int *out, kiln_err *err) {
    const json_t *v = json_object_get(c, key);
    if (!v) return KILN_OK;
    if (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > (1 << 24))
        return KILN_FAIL(err, KILN_E_FORMAT, "T5: config %s is not a positive integer", key);
    *out = (int)json_integer_value(v);
    return KILN_OK;
}

/* The keys T5EncoderModel's forward depends on that shapes cannot give. */
static kiln_status read_config(kiln_t5_encoder *m, const char *path, kiln_err *err) {
    m->d_kv = 64; /* T5 v1.1 XXL (ComfyUI's t5xxl files carry no config) */
    m->num_buckets = 32;
    m->max_distance = 128;
    m->eps = 1e-6f;
    if (!path) return KILN_OK;
    json_error_t je;
    json_t *c = json_load_file(path, 0, &je);
    if (!json_is_object(c)) {
        json_decref(c);
        return KILN_FAIL(err, KILN_E_FORMAT, "T5: %s: %s", path, je.text);
    }
    kiln_status s = KILN_OK;
    const json_t *ff = json_object_get(c, "feed_forward_proj"), *act = json_object_get(c, "dense_act_fn");
    const json_t *gated = json_object_get(c, "is_gated_act");
    /* transformers: "gated-gelu" means dense_act_fn gelu_new, is_gated_act true */
    if (ff && (!json_is_string(ff) || strcmp(json_string_value(ff), "gated-gelu")))
        s = KILN_FAIL(err, KILN_E_UNSUPPORTED, "T5: feed_forward_proj %s is not supported (only gated-gelu)",
                      json_is_string(ff) ? json_string_value(ff) : "(not a string)");
    if (s == KILN_OK && act && (!json_is_string(act) || strcmp(json_string_value(act), "gelu_new")))
        s = KILN_FAIL(err, KILN_E_UNSUPPORTED, "T5: dense_act_fn %s is not supported (only gelu_new)",
                      json_is_string(act) ? json_string_value(act) : "(not a string)");
    if (s == KILN_OK && gated && !json_is_true(gated))
        s = KILN_FAIL(err, KILN_E_UNSUPPORTED, "T5: is_gated_act false is not supported");
    int heads = 0;
    if (s == KILN_OK) s = int_key(c, "d_kv", &m->d_kv, err);
    if (s == KILN_OK) s = int_key(c, "num_heads", &heads, err);
    if (s == KILN_OK) s = int_key(c, "relative_attention_num_buckets", &m->num_buckets, err);
    if (s == KILN_OK) s = int_key(c, "relative_attention_max_distance", &m->max_distance, err);
    const json_t *v = json_object_get(c, "layer_norm_epsilon");
    if (s == KILN_OK && v) {
        if (!json_is_number(v) || json_number_value(v) <= 0)
            s = KILN_FAIL(err, KILN_E_FORMAT, "T5: layer_norm_epsilon is not a positive number");
        else m->eps = (float)json_number_value(v);
    }
    if (s == KILN_OK && heads) m->n_heads = heads; /* checked against the weights by the caller */
    const struct {
        const char *key;
        long long have;
    } sizes[] = {{"d_model", m->d_model}, {"d_ff", m->d_ff}, {"num_layers", m->n_layers}, {"vocab_size", m->vocab}};
    for (size_t i = 0; s == KILN_OK && i < sizeof sizes / sizeof sizes[0]; i++) {
        v = json_object_get(c, sizes[i].key);
        if (v && (!json_is_integer(v) || json_integer_value(v) != sizes[i].have))
            s = KILN_FAIL(err, KILN_E_FORMAT, "T5: config %s is not the weights' %lld", sizes[i].key, sizes[i].have);
    }
    json_decref(c);
    return s;
}

kiln_status kiln_t5_encoder_load(const kiln_st_file *ck, const char *config_json, kiln_t5_encoder **out,
                                 kiln_err *err) {
    *out = NULL;
    kiln_t5_encoder *m = kiln_calloc(1, sizeof *m);
    if (!m) return KILN_FAIL(err, KILN_E_NOMEM, "T5: out of memory");
    kiln_wset_init(&m->ws, ck, "text encoder (T5)", err);
    kiln_wset *ws = &m->ws;
    kiln_status s;
    const kiln_gguf_te *te = kiln_st_gguf_te(ck);
    if (te && te->kind != KILN_GGUF_TE_T5) {
        s = KILN_FAIL(err, KILN_E_FORMAT, "T5: %s is a %s GGUF, not a T5 encoder", kiln_st_label(ck), te->arch);
        goto fail;
    }
    const char *p = "encoder.block";
    const char *emb = kiln_w_has(ws, "shared.weight") ? "shared.weight" : "encoder.embed_tokens.weight";
    if ((s = kiln_w_mat(ws, &m->embed, -1, -1, "%s", emb))) goto fail;
    m->vocab = m->embed.shape[0];
    m->d_model = (int)m->embed.shape[1];
    kiln_tensor t;
    if ((s = kiln_w_mat(ws, &t, -1, m->d_model, "%s.0.layer.1.DenseReluDense.wi_0.weight", p))) goto fail;
    m->d_ff = (int)t.shape[0];
    while (kiln_w_has(ws, "%s.%d.layer.0.layer_norm.weight", p, m->n_layers)) m->n_layers++;
    if ((s = kiln_w_mat(ws, &t, -1, m->d_model, "%s.0.layer.0.SelfAttention.q.weight", p))) goto fail;
    int inner = (int)t.shape[0];
    if (te) { /* a llama.cpp GGUF: its metadata is the config (validated against the tensors at open) */
        m->d_kv = te->head_dim;                          /* t5encoder.attention.key_length */
        m->n_heads = te->n_heads;                        /* attention.head_count */
        m->num_buckets = te->num_buckets;                /* attention.relative_buckets_count */
        m->max_distance = KILN_GGUF_T5_MAX_DISTANCE;     /* not in the file: 128, as llama.cpp */
        m->eps = (float)te->eps;                         /* attention.layer_norm_rms_epsilon */
    } else if ((s = read_config(m, config_json, err))) {
        goto fail;
    }
    if (inner % m->d_kv || (m->n_heads && m->n_heads * m->d_kv != inner)) {
        s = KILN_FAIL(err, KILN_E_FORMAT, "T5: q projection of %d rows is not num_heads x d_kv (%d x %d)", inner,
                      m->n_heads, m->d_kv);
        goto fail;
    }
    m->n_heads = inner / m->d_kv;
    if ((s = kiln_w_mat(ws, &m->rel_bias, m->num_buckets, m->n_heads,
                        "%s.0.layer.0.SelfAttention.relative_attention_bias.weight", p)))
        goto fail;
    if (m->n_layers == 0) {
        s = KILN_FAIL(err, KILN_E_FORMAT, "T5: no encoder blocks");
        goto fail;
    }
    m->layers = kiln_calloc((size_t)m->n_layers, sizeof *m->layers);
    if (!m->layers) {
        s = KILN_FAIL(err, KILN_E_NOMEM, "T5: out of memory");
        goto fail;
    }
    int D = m->d_model, I = inner, F = m->d_ff;
    for (int i = 0; i < m->n_layers; i++) {
        kiln_t5_layer *L = &m->layers[i];
        if ((s = kiln_w_vec(ws, &L->attn_norm, D, "%s.%d.layer.0.layer_norm.weight", p, i)) ||
            (s = kiln_w_mat(ws, &L->wq, I, D, "%s.%d.layer.0.SelfAttention.q.weight", p, i)) ||
            (s = kiln_w_mat(ws, &L->wk, I, D, "%s.%d.layer.0.SelfAttention.k.weight", p, i)) ||
            (s = kiln_w_mat(ws, &L->wv, I, D, "%s.%d.layer.0.SelfAttention.v.weight", p, i)) ||
            (s = kiln_w_mat(ws, &L->wo, D, I, "%s.%d.layer.0.SelfAttention.o.weight", p, i)) ||
            (s = kiln_w_vec(ws, &L->ffn_norm, D, "%s.%d.layer.1.layer_norm.weight", p, i)) ||
            (s = kiln_w_mat(ws, &L->wi0, F, D, "%s.%d.layer.1.DenseReluDense.wi_0.weight", p, i)) ||
            (s = kiln_w_mat(ws, &L->wi1, F, D, "%s.%d.layer.1.DenseReluDense.wi_1.weight", p, i)) ||
            (s = kiln_w_mat(ws, &L->wo_ff, D, F, "%s.%d.layer.1.DenseReluDense.wo.weight", p, i)))
            goto fail;
    }
    if ((s = kiln_w_vec(ws, &m->final_norm, D, "encoder.final_layer_norm.weight"))) goto fail;
    *out = m;
    return KILN_OK;
fail:
    kiln_t5_encoder_free(m);
    return s;
}

void kiln_t5_encoder_free(kiln_t5_encoder *m) {
    if (!m) return;
    kiln_wset_free(&m->ws);
    kiln_free(m->layers);
    kiln_free(m);
}

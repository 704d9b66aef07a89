/* gguf_te.c - llama.cpp-named Qwen3 / T5 text-encoder GGUFs: metadata validation and the name map (gguf_te.h).
 *
 * One table per architecture says, for every tensor the converter writes, its transformers name and its shape
 * in terms of the metadata (sym); the same table renames, checks presence and checks shapes, so a name cannot be
 * mapped without also being validated. */
#include "io/gguf_te.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The sizes a shape is written in. */
typedef enum sym { S_D, S_Q, S_KV, S_F, S_DH, S_NB, S_H, S_VOCAB, S_COUNT } sym;

static const char *const sym_says[S_COUNT] = {
    "embedding_length", "attention.head_count x key_length", "attention.head_count_kv x key_length",
    "feed_forward_length", "attention.key_length", "attention.relative_buckets_count", "attention.head_count",
    "token_embd's rows"};

typedef struct tmap {
    const char *gguf, *hf; /* per block: the suffix after "blk.N." / "model.layers.N." */
    int ndim;
    sym dims[2];           /* PyTorch order */
    unsigned flags;
} tmap;
#define T_OPTIONAL 1u   /* may be absent */
#define T_BLOCK0 2u     /* in block 0 only */

static const tmap qwen3_block[] = {
    {"attn_norm.weight", "input_layernorm.weight", 1, {S_D}, 0},
    {"attn_q.weight", "self_attn.q_proj.weight", 2, {S_Q, S_D}, 0},
    {"attn_k.weight", "self_attn.k_proj.weight", 2, {S_KV, S_D}, 0},
    {"attn_v.weight", "self_attn.v_proj.weight", 2, {S_KV, S_D}, 0},
    {"attn_output.weight", "self_attn.o_proj.weight", 2, {S_D, S_Q}, 0},
    {"attn_q_norm.weight", "self_attn.q_norm.weight", 1, {S_DH}, 0},
    {"attn_k_norm.weight", "self_attn.k_norm.weight", 1, {S_DH}, 0},
    {"ffn_norm.weight", "post_attention_layernorm.weight", 1, {S_D}, 0},
    {"ffn_gate.weight", "mlp.gate_proj.weight", 2, {S_F, S_D}, 0},
    {"ffn_up.weight", "mlp.up_proj.weight", 2, {S_F, S_D}, 0},
    {"ffn_down.weight", "mlp.down_proj.weight", 2, {S_D, S_F}, 0},
};
static const tmap qwen3_global[] = {
    {"token_embd.weight", "model.embed_tokens.weight", 2, {S_VOCAB, S_D}, 0},
    {"output_norm.weight", "model.norm.weight", 1, {S_D}, 0},
    {"output.weight", "lm_head.weight", 2, {S_VOCAB, S_D}, T_OPTIONAL}, /* untied models (8B); never read */
};
static const tmap t5_block[] = {
    {"attn_norm.weight", "layer.0.layer_norm.weight", 1, {S_D}, 0},
    {"attn_q.weight", "layer.0.SelfAttention.q.weight", 2, {S_Q, S_D}, 0},
    {"attn_k.weight", "layer.0.SelfAttention.k.weight", 2, {S_Q, S_D}, 0},
    {"attn_v.weight", "layer.0.SelfAttention.v.weight", 2, {S_Q, S_D}, 0},
    {"attn_o.weight", "layer.0.SelfAttention.o.weight", 2, {S_D, S_Q}, 0},
    {"attn_rel_b.weight", "layer.0.SelfAttention.relative_attention_bias.weight", 2, {S_NB, S_H}, T_BLOCK0},
    {"ffn_norm.weight", "layer.1.layer_norm.weight", 1, {S_D}, 0},
    {"ffn_gate.weight", "layer.1.DenseReluDense.wi_0.weight", 2, {S_F, S_D}, 0},
    {"ffn_up.weight", "layer.1.DenseReluDense.wi_1.weight", 2, {S_F, S_D}, 0},
    {"ffn_down.weight", "layer.1.DenseReluDense.wo.weight", 2, {S_D, S_F}, 0},
};
static const tmap t5_global[] = {
    {"token_embd.weight", "shared.weight", 2, {S_VOCAB, S_D}, 0},
    {"enc.output_norm.weight", "encoder.final_layer_norm.weight", 1, {S_D}, 0},
    {"output.weight", "lm_head.weight", 2, {S_VOCAB, S_D}, T_OPTIONAL},
};

typedef struct arch {
    kiln_gguf_te_kind kind;
    const char *block_gguf, *block_hf;
    const tmap *block, *global;
    size_t n_block, n_global;
    const char *const *keys; /* every ARCH.* key kiln reads (anything else is refused) */
} arch;

static const char *const qwen3_keys[] = {
    "block_count", "context_length", "embedding_length", "feed_forward_length", "attention.head_count",
    "attention.head_count_kv", "attention.key_length", "attention.value_length", "attention.layer_norm_rms_epsilon",
    "rope.freq_base", "rope.dimension_count", "vocab_size", "rope.scaling.type", "rope.scaling.factor", NULL};
static const char *const t5_keys[] = {
    "block_count", "context_length", "embedding_length", "feed_forward_length", "attention.head_count",
    "attention.key_length", "attention.value_length", "attention.relative_buckets_count",
    "attention.layer_norm_rms_epsilon", "attention.layer_norm_epsilon", "decoder_start_token_id", NULL};

#define N(a) (sizeof(a) / sizeof((a)[0]))
static const arch QWEN3 = {KILN_GGUF_TE_QWEN3, "blk.", "model.layers.", qwen3_block, qwen3_global,
                           N(qwen3_block), N(qwen3_global), qwen3_keys};
static const arch T5 = {KILN_GGUF_TE_T5, "enc.blk.", "encoder.block.", t5_block, t5_global, N(t5_block),
                        N(t5_global), t5_keys};

static const arch *arch_of(kiln_gguf_te_kind k) { return k == KILN_GGUF_TE_QWEN3 ? &QWEN3 : k == KILN_GGUF_TE_T5 ? &T5 : NULL; }

const char *kiln_gguf_te_kind_name(kiln_gguf_te_kind k) {
    return k == KILN_GGUF_TE_QWEN3 ? "qwen3" : k == KILN_GGUF_TE_T5 ? "t5" : "none";
}

/* Which table entry a GGUF name is: *layer the block (-1 for a global tensor). NULL when the architecture has no
 * such tensor. A "t5" file's decoder tensors give NULL with *decoder set. */
static const tmap *classify(const arch *a, const char *name, long *layer, bool *decoder) {
    *layer = -1;
    *decoder = a->kind == KILN_GGUF_TE_T5 && !strncmp(name, "dec.", 4);
    if (*decoder) return NULL;
    size_t pl = strlen(a->block_gguf);
    if (!strncmp(name, a->block_gguf, pl)) {
        const char *p = name + pl;
        if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] != '.')) return NULL; /* digits, no leading zeros */
        char *end;
        long l = strtol(p, &end, 10);
        if (*end != '.' || l > (1L << 20)) return NULL;
        *layer = l;
        for (size_t i = 0; i < a->n_block; i++)
            if (!strcmp(end + 1, a->block[i].gguf)) return &a->block[i];
        return NULL;
    }
    for (size_t i = 0; i < a->n_global; i++)
        if (!strcmp(name, a->global[i].gguf)) return &a->global[i];
    return NULL;
}

bool kiln_gguf_te_hf_name(kiln_gguf_te_kind kind, const char *name, char *out, size_t cap) {
    const arch *a = arch_of(kind);
    if (!a) return false;
    long layer;
    bool dec;
    const tmap *m = classify(a, name, &layer, &dec);
    int n;
    if (dec) n = snprintf(out, cap, "%s", name);
    else if (!m) return false;
    else if (layer < 0) n = snprintf(out, cap, "%s", m->hf);
    else n = snprintf(out, cap, "%s%ld.%s", a->block_hf, layer, m->hf);
    return n > 0 && (size_t)n < cap;
}

/* ---- metadata ------------------------------------------------------------------------------------------------- */

typedef struct ctx {
    const kiln_gguf_file *g;
    const char *arch;
    kiln_err *err;
} ctx;

static const kiln_gguf_kv *key(const ctx *c, const char *suffix) {
    char k[128];
    snprintf(k, sizeof k, "%s.%s", c->arch, suffix);
    return kiln_gguf_kv_find(c->g, k);
}

/* A scalar positive integer ARCH.suffix (at most 2^24; 2^40 for context_length); *out keeps its default when
 * absent and not required. */
static kiln_status get_uint(const ctx *c, const char *suffix, bool required, int64_t *out) {
    const kiln_gguf_kv *kv = key(c, suffix);
    const char *l = kiln_gguf_label(c->g);
    if (!kv) {
        if (required)
            return KILN_FAIL(c->err, KILN_E_FORMAT, "%s: metadata %s.%s is missing (a %s GGUF must have it)", l,
                             c->arch, suffix, c->arch);
        return KILN_OK;
    }
    if (kv->type == KILN_GGUF_ARRAY)
        return KILN_FAIL(c->err, KILN_E_UNSUPPORTED, "%s: metadata %s.%s is an array (per-layer values): kiln "
                         "supports one value for every layer", l, c->arch, suffix);
    uint64_t v;
    uint64_t max = strcmp(suffix, "context_length") ? (1u << 24) : (1ull << 40);
    if (!kiln_gguf_kv_uint(kv, 0, &v) || kv->type == KILN_GGUF_BOOL || v == 0 || v > max)
        return KILN_FAIL(c->err, KILN_E_FORMAT, "%s: metadata %s.%s must be a positive integer up to %llu (it is a "
                         "%s%s)", l, c->arch, suffix, (unsigned long long)max, kiln_gguf_vtype_name(kv->type),
                         kiln_gguf_kv_uint(kv, 0, &v) ? " out of range" : "");
    *out = (int64_t)v;
    return KILN_OK;
}

static kiln_status get_float(const ctx *c, const char *suffix, bool required, double *out) {
    const kiln_gguf_kv *kv = key(c, suffix);
    const char *l = kiln_gguf_label(c->g);
    if (!kv) {
        if (required)
            return KILN_FAIL(c->err, KILN_E_FORMAT, "%s: metadata %s.%s is missing (a %s GGUF must have it)", l,
                             c->arch, suffix, c->arch);
        return KILN_OK;
    }
    double v;
    if (kv->type == KILN_GGUF_ARRAY || !kiln_gguf_kv_float(kv, 0, &v) || !(v == v) || v < -1e300 || v > 1e300)
        return KILN_FAIL(c->err, KILN_E_FORMAT, "%s: metadata %s.%s must be one finite f32 or f64 (it is a %s)", l,
                         c->arch, suffix, kiln_gguf_vtype_name(kv->type));
    *out = v;
    return KILN_OK;
}

/* Every ARCH.* key is one kiln reads; a split file is refused. */
static kiln_status known_keys(const ctx *c, const arch *a) {
    const char *l = kiln_gguf_label(c->g);
    size_t pl = strlen(c->arch);
    for (size_t i = 0; i < kiln_gguf_kv_count(c->g); i++) {
        const kiln_gguf_kv *kv = kiln_gguf_kv_at(c->g, i);
        uint64_t n;
        if (!strcmp(kv->key, "split.count") && kiln_gguf_kv_uint(kv, 0, &n) && n > 1)
            return KILN_FAIL(c->err, KILN_E_UNSUPPORTED, "%s: a split GGUF (split.count %llu): kiln reads one file; "
                             "merge the parts first (llama-gguf-split --merge)", l, (unsigned long long)n);
        if (strncmp(kv->key, c->arch, pl) || kv->key[pl] != '.') continue;
        bool known = false;
        for (size_t k = 0; a->keys[k] && !known; k++) known = !strcmp(kv->key + pl + 1, a->keys[k]);
        if (!known)
            return KILN_FAIL(c->err, KILN_E_UNSUPPORTED, "%s: metadata %s is not one kiln reads for a %s text encoder "
                             "(it would change the model in a way kiln does not implement)", l, kv->key, c->arch);
    }
    return KILN_OK;
}

static kiln_status rope_scaling(const ctx *c) {
    const char *l = kiln_gguf_label(c->g);
    const kiln_gguf_kv *t = key(c, "rope.scaling.type");
    if (t && (t->type != KILN_GGUF_STRING || strcmp(t->str, "none")))
        return KILN_FAIL(c->err, KILN_E_UNSUPPORTED, "%s: metadata %s.rope.scaling.type \"%s\": RoPE scaling is not "
                         "supported (kiln implements the default RoPE)", l, c->arch, t->str ? t->str : "?");
    double f = 1.0;
    KILN_TRY(get_float(c, "rope.scaling.factor", false, &f));
    if (f != 0.0 && f != 1.0)
        return KILN_FAIL(c->err, KILN_E_UNSUPPORTED, "%s: metadata %s.rope.scaling.factor %g: RoPE scaling is not "
                         "supported", l, c->arch, f);
    return KILN_OK;
}

static kiln_status read_qwen3(const ctx *c, kiln_gguf_te *te) {
    const char *l = kiln_gguf_label(c->g);
    int64_t L = 0, ctxlen = 0, D = 0, F = 0, H = 0, Hkv = 0, Dk = 0, Dv = 0, rope_dims = 0, vocab = 0;
    double eps = 0, theta = 10000.0; /* llama.cpp's default freq_base */
    KILN_TRY(get_uint(c, "block_count", true, &L));
    KILN_TRY(get_uint(c, "context_length", true, &ctxlen));
    KILN_TRY(get_uint(c, "embedding_length", true, &D));
    KILN_TRY(get_uint(c, "feed_forward_length", true, &F));
    KILN_TRY(get_uint(c, "attention.head_count", true, &H));
    Hkv = H;
    KILN_TRY(get_uint(c, "attention.head_count_kv", false, &Hkv));
    Dk = Dv = D / H;
    KILN_TRY(get_uint(c, "attention.key_length", false, &Dk));
    KILN_TRY(get_uint(c, "attention.value_length", false, &Dv));
    KILN_TRY(get_float(c, "attention.layer_norm_rms_epsilon", true, &eps));
    KILN_TRY(get_float(c, "rope.freq_base", false, &theta));
    KILN_TRY(get_uint(c, "rope.dimension_count", false, &rope_dims));
    KILN_TRY(get_uint(c, "vocab_size", false, &vocab));
    KILN_TRY(rope_scaling(c));
    if (Dk != Dv)
        return KILN_FAIL(c->err, KILN_E_UNSUPPORTED, "%s: %s.attention.key_length %lld and value_length %lld differ "
                         "(Qwen3 has one head_dim)", l, c->arch, (long long)Dk, (long long)Dv);
    if (Dk == 0 || Dk % 2)
        return KILN_FAIL(c->err, KILN_E_FORMAT, "%s: %s.attention.key_length %lld: the head size must be even "
                         "(RoPE rotates pairs)", l, c->arch, (long long)Dk);
    if (H % Hkv)
        return KILN_FAIL(c->err, KILN_E_FORMAT, "%s: %s.attention.head_count %lld is not a multiple of head_count_kv "
                         "%lld", l, c->arch, (long long)H, (long long)Hkv);
    if (rope_dims && rope_dims != Dk)
        return KILN_FAIL(c->err, KILN_E_UNSUPPORTED, "%s: %s.rope.dimension_count %lld: partial rotary embeddings "
                         "are not supported (Qwen3 rotates all key_length %lld)", l, c->arch, (long long)rope_dims,
                         (long long)Dk);
    if (!(eps > 0 && eps < 1))
        return KILN_FAIL(c->err, KILN_E_FORMAT, "%s: %s.attention.layer_norm_rms_epsilon %g is not in (0, 1)", l,
                         c->arch, eps);
    if (!(theta > 0))
        return KILN_FAIL(c->err, KILN_E_FORMAT, "%s: %s.rope.freq_base %g is not positive", l, c->arch, theta);
    te->n_layers = (int)L, te->context = ctxlen, te->hidden = (int)D, te->ffn = (int)F;
    te->n_heads = (int)H, te->n_kv_heads = (int)Hkv, te->head_dim = (int)Dk, te->eps = eps, te->theta = theta;
    te->vocab = vocab; /* checked against token_embd below */
    return KILN_OK;
}

static kiln_status read_t5(const ctx *c, kiln_gguf_te *te) {
    const char *l = kiln_gguf_label(c->g);
    int64_t L = 0, ctxlen = 0, D = 0, F = 0, H = 0, Dk = 0, Dv = 0, NB = 0;
    double rms = 0, ln_eps = -1;
    KILN_TRY(get_uint(c, "block_count", true, &L));
    KILN_TRY(get_uint(c, "context_length", false, &ctxlen));
    KILN_TRY(get_uint(c, "embedding_length", true, &D));
    KILN_TRY(get_uint(c, "feed_forward_length", true, &F));
    KILN_TRY(get_uint(c, "attention.head_count", true, &H));
    KILN_TRY(get_uint(c, "attention.key_length", true, &Dk));
    KILN_TRY(get_uint(c, "attention.value_length", true, &Dv));
    KILN_TRY(get_uint(c, "attention.relative_buckets_count", true, &NB));
    KILN_TRY(get_float(c, "attention.layer_norm_rms_epsilon", true, &rms)); /* llama.cpp's T5 reads this one */
    KILN_TRY(get_float(c, "attention.layer_norm_epsilon", false, &ln_eps));
    const kiln_gguf_kv *dst = key(c, "decoder_start_token_id");
    uint64_t u;
    if (dst && (dst->type == KILN_GGUF_ARRAY || !kiln_gguf_kv_uint(dst, 0, &u)))
        return KILN_FAIL(c->err, KILN_E_FORMAT, "%s: metadata %s.decoder_start_token_id must be an integer", l,
                         c->arch);
    if (Dk != Dv)
        return KILN_FAIL(c->err, KILN_E_UNSUPPORTED, "%s: %s.attention.key_length %lld and value_length %lld differ "
                         "(T5 has one d_kv)", l, c->arch, (long long)Dk, (long long)Dv);
    if (!(rms > 0 && rms < 1))
        return KILN_FAIL(c->err, KILN_E_FORMAT, "%s: %s.attention.layer_norm_rms_epsilon %g is not in (0, 1)", l,
                         c->arch, rms);
    if (ln_eps != -1 && ln_eps != rms)
        return KILN_FAIL(c->err, KILN_E_FORMAT, "%s: %s.attention.layer_norm_epsilon %g contradicts "
                         "layer_norm_rms_epsilon %g (T5 has one layer_norm_epsilon)", l, c->arch, ln_eps, rms);
    if (NB < 2 || NB % 2)
        return KILN_FAIL(c->err, KILN_E_FORMAT, "%s: %s.attention.relative_buckets_count %lld must be even (half for "
                         "each direction)", l, c->arch, (long long)NB);
    te->n_layers = (int)L, te->context = ctxlen, te->hidden = (int)D, te->ffn = (int)F;
    te->n_heads = te->n_kv_heads = (int)H, te->head_dim = (int)Dk, te->eps = rms, te->num_buckets = (int)NB;
    return KILN_OK;
}

/* ---- tensors -------------------------------------------------------------------------------------------------- */

static void shape_text(char *b, size_t cap, int ndim, const int64_t *s) {
    size_t u = (size_t)snprintf(b, cap, "[");
    for (int d = 0; d < ndim && u < cap; d++) u += (size_t)snprintf(b + u, cap - u, "%s%lld", d ? ", " : "", (long long)s[d]);
    if (u < cap) snprintf(b + u, cap - u, "]");
}

static kiln_status check_shape(const ctx *c, const kiln_gguf_tensor *t, const tmap *m, const int64_t *val) {
    bool ok = t->ndim == m->ndim;
    for (int d = 0; ok && d < m->ndim; d++) ok = t->shape[d] == val[m->dims[d]];
    if (ok) return KILN_OK;
    char got[96], want[96], says[256] = "";
    int64_t w[2] = {val[m->dims[0]], m->ndim > 1 ? val[m->dims[1]] : 0};
    shape_text(got, sizeof got, t->ndim, t->shape);
    shape_text(want, sizeof want, m->ndim, w);
    for (int d = 0; d < m->ndim; d++) /* "qwen3.attention.head_count_kv x key_length by qwen3.embedding_length" */
        snprintf(says + strlen(says), sizeof says - strlen(says), "%s%s%s%s", d ? " by " : "",
                 m->dims[d] == S_VOCAB ? "" : c->arch, m->dims[d] == S_VOCAB ? "" : ".", sym_says[m->dims[d]]);
    return KILN_FAIL(c->err, KILN_E_FORMAT, "%s: tensor '%s' has shape %s, but %s say %s", kiln_gguf_label(c->g),
                     t->name, got, says, want);
}

static kiln_status check_tensors(const ctx *c, const arch *a, kiln_gguf_te *te) {
    const char *l = kiln_gguf_label(c->g);
    const kiln_gguf_tensor *emb = kiln_gguf_find(c->g, a->global[0].gguf);
    if (!emb)
        return KILN_FAIL(c->err, KILN_E_NOT_FOUND, "%s: tensor '%s' (the token embedding) is missing", l,
                         a->global[0].gguf);
    if (emb->ndim != 2)
        return KILN_FAIL(c->err, KILN_E_FORMAT, "%s: tensor '%s' is %d-D, not [vocabulary, embedding_length]", l,
                         emb->name, emb->ndim);
    if (te->vocab && te->vocab != emb->shape[0])
        return KILN_FAIL(c->err, KILN_E_FORMAT, "%s: metadata %s.vocab_size %lld contradicts '%s' (%lld rows)", l,
                         c->arch, (long long)te->vocab, emb->name, (long long)emb->shape[0]);
    te->vocab = emb->shape[0];
    int64_t val[S_COUNT] = {te->hidden, (int64_t)te->n_heads * te->head_dim, (int64_t)te->n_kv_heads * te->head_dim,
                            te->ffn, te->head_dim, te->num_buckets, te->n_heads, te->vocab};
    /* every tensor in the file is one of the architecture's, in a block that exists, of the right shape */
    for (size_t i = 0; i < kiln_gguf_count(c->g); i++) {
        const kiln_gguf_tensor *t = kiln_gguf_at(c->g, i);
        long layer;
        bool dec;
        const tmap *m = classify(a, t->name, &layer, &dec);
        if (dec) continue;
        if (!m) {
            if (!strcmp(t->name, "rope_freqs.weight"))
                return KILN_FAIL(c->err, KILN_E_UNSUPPORTED, "%s: tensor 'rope_freqs.weight' (custom RoPE frequencies) "
                                 "is not supported: kiln implements the default RoPE", l);
            return KILN_FAIL(c->err, KILN_E_UNSUPPORTED, "%s: tensor '%s' is not one a llama.cpp %s text encoder "
                             "has%s", l, t->name, c->arch, a->kind == KILN_GGUF_TE_T5 ? " (a T5 encoder's are "
                             "token_embd, enc.output_norm and enc.blk.N.*)" : "");
        }
        if (layer >= te->n_layers)
            return KILN_FAIL(c->err, KILN_E_FORMAT, "%s: tensor '%s' is in block %ld, but %s.block_count is %d", l,
                             t->name, layer, c->arch, te->n_layers);
        if ((m->flags & T_BLOCK0) && layer != 0)
            return KILN_FAIL(c->err, KILN_E_UNSUPPORTED, "%s: tensor '%s': a relative attention bias in every block "
                             "(UMT5) is not supported; T5 v1.1 has it in block 0 only", l, t->name);
        KILN_TRY(check_shape(c, t, m, val));
    }
    /* and every tensor the model needs is there */
    char name[160];
    for (size_t j = 0; j < a->n_global; j++)
        if (!(a->global[j].flags & T_OPTIONAL) && !kiln_gguf_find(c->g, a->global[j].gguf))
            return KILN_FAIL(c->err, KILN_E_NOT_FOUND, "%s: tensor '%s' is missing", l, a->global[j].gguf);
    for (int b = 0; b < te->n_layers; b++)
        for (size_t j = 0; j < a->n_block; j++) {
            const tmap *m = &a->block[j];
            if ((m->flags & T_BLOCK0) && b != 0) continue;
            snprintf(name, sizeof name, "%s%d.%s", a->block_gguf, b, m->gguf);
            if (kiln_gguf_find(c->g, name)) continue;
            if (a->kind == KILN_GGUF_TE_T5 && !strcmp(m->gguf, "ffn_gate.weight"))
                return KILN_FAIL(c->err, KILN_E_UNSUPPORTED, "%s: tensor '%s' is missing: a T5 without the gated FFN "
                                 "(T5 v1.0, ReLU) is not supported; FLUX.1 uses T5 v1.1 (gated GELU)", l, name);
            return KILN_FAIL(c->err, KILN_E_NOT_FOUND, "%s: tensor '%s' is missing (%s.block_count is %d)", l, name,
                             c->arch, te->n_layers);
        }
    return KILN_OK;
}

kiln_status kiln_gguf_te_check(const kiln_gguf_file *g, kiln_gguf_te *out, kiln_err *err) {
    memset(out, 0, sizeof *out);
    const char *name = kiln_gguf_architecture(g);
    const kiln_gguf_kv *akv = kiln_gguf_kv_find(g, "general.architecture");
    if (akv && akv->type != KILN_GGUF_STRING)
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: general.architecture is a %s, not a string", kiln_gguf_label(g),
                         kiln_gguf_vtype_name(akv->type));
    const arch *a = !name ? NULL : !strcmp(name, "qwen3") ? &QWEN3
                               : !strcmp(name, "t5encoder") || !strcmp(name, "t5") ? &T5 : NULL;
    if (!a) { /* a diffusion model (BFL names) is fine; llama.cpp names under another architecture are not */
        if (!kiln_gguf_find(g, "token_embd.weight")) return KILN_OK;
        if (!name)
            return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: a llama.cpp-named model (token_embd.weight) with no "
                             "general.architecture: kiln cannot tell which text encoder it is", kiln_gguf_label(g));
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: architecture '%s' (llama.cpp names) is not a text encoder kiln "
                         "runs: it reads qwen3 (FLUX.2 [klein]) and t5encoder / t5 (FLUX.1)", kiln_gguf_label(g), name);
    }
    kiln_gguf_te te = {.kind = a->kind};
    snprintf(te.arch, sizeof te.arch, "%s", name);
    ctx c = {g, te.arch, err};
    kiln_status s = known_keys(&c, a);
    if (s == KILN_OK) s = a->kind == KILN_GGUF_TE_QWEN3 ? read_qwen3(&c, &te) : read_t5(&c, &te);
    if (s == KILN_OK) s = check_tensors(&c, a, &te);
    if (s == KILN_OK) *out = te;
    return s;
}

/* test_io_gguf_te.c - text-encoder GGUFs in llama.cpp's naming (io/gguf_te.h): recognition, the name map, and the
 * refusals, on small files built here byte by byte (a valid Qwen3 / T5 description, then one thing broken per
 * case): a missing tensor, a shape that contradicts the metadata, an unknown architecture with llama.cpp names,
 * a block past block_count, unknown / array / mistyped / contradictory keys, a split file, RoPE scaling,
 * rope_freqs, UMT5's per-block bias, an ungated T5. Each error must name what is wrong. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/gguf_te.h"
#include "io/detect.h"
#include "io/safetensors.h"
#include "test.h"

/* ---- a GGUF description and its bytes ------------------------------------------------------------------------ */

typedef struct kvd {
    char key[80];
    int type; /* KILN_GGUF_U32, F32, STRING, or ARRAY (of u32) */
    uint32_t u;
    float f;
    char s[32];
} kvd;

typedef struct td {
    char name[64];
    int ndim;
    int64_t shape[2]; /* PyTorch order; stored F32 */
} td;

typedef struct desc {
    kvd kv[40];
    int nkv;
    td t[200];
    int nt;
} desc;

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 256;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void put_u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(buf *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}

static void add_kv(desc *d, const char *key, int type, uint32_t u, float f, const char *s) {
    kvd *k = &d->kv[d->nkv++];
    memset(k, 0, sizeof *k);
    snprintf(k->key, sizeof k->key, "%s", key);
    k->type = type, k->u = u, k->f = f;
    if (s) snprintf(k->s, sizeof k->s, "%s", s);
}
static void add_t(desc *d, const char *name, int ndim, int64_t a, int64_t b) {
    td *t = &d->t[d->nt++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim, t->shape[0] = a, t->shape[1] = b;
}
static kvd *find_kv(desc *d, const char *key) {
    for (int i = 0; i < d->nkv; i++)
        if (!strcmp(d->kv[i].key, key)) return &d->kv[i];
    return NULL;
}
static td *find_t(desc *d, const char *name) {
    for (int i = 0; i < d->nt; i++)
        if (!strcmp(d->t[i].name, name)) return &d->t[i];
    return NULL;
}
static void drop_t(desc *d, const char *name) {
    td *t = find_t(d, name);
    CHECK_MSG(t != NULL, "no tensor %s to drop", name);
    if (t) *t = d->t[--d->nt];
}

static buf serialise(const desc *d) {
    buf b = {0};
    put(&b, "GGUF", 4);
    put_u32(&b, 3);
    put_u64(&b, (uint64_t)d->nt);
    put_u64(&b, (uint64_t)d->nkv);
    for (int i = 0; i < d->nkv; i++) {
        const kvd *k = &d->kv[i];
        put_str(&b, k->key);
        put_u32(&b, (uint32_t)k->type);
        if (k->type == KILN_GGUF_U32) put_u32(&b, k->u);
        else if (k->type == KILN_GGUF_F32) put(&b, &k->f, 4);
        else if (k->type == KILN_GGUF_STRING) put_str(&b, k->s);
        else { /* an array of two u32 */
            put_u32(&b, KILN_GGUF_U32);
            put_u64(&b, 2);
            put_u32(&b, k->u);
            put_u32(&b, k->u);
        }
    }
    uint64_t off = 0;
    for (int i = 0; i < d->nt; i++) {
        const td *t = &d->t[i];
        put_str(&b, t->name);
        put_u32(&b, (uint32_t)t->ndim);
        uint64_t numel = 1;
        for (int k = t->ndim - 1; k >= 0; k--) { /* ne[0] is the row */
            put_u64(&b, (uint64_t)t->shape[k]);
            numel *= (uint64_t)t->shape[k];
        }
        put_u32(&b, 0); /* F32 */
        put_u64(&b, off);
        off += (numel * 4 + 31) / 32 * 32;
    }
    static const uint8_t zeros[64];
    while (b.n % 32) put(&b, zeros, 1);
    for (uint64_t i = 0; i < off; i += 32) put(&b, zeros, 32);
    return b;
}

/* A valid Qwen3: hidden 32, 2 layers, 2 q / 1 kv heads x 16, FFN 48, vocabulary 10. */
static void qwen3_desc(desc *d) {
    memset(d, 0, sizeof *d);
    add_kv(d, "general.architecture", KILN_GGUF_STRING, 0, 0, "qwen3");
    add_kv(d, "general.name", KILN_GGUF_STRING, 0, 0, "tiny");
    add_kv(d, "qwen3.block_count", KILN_GGUF_U32, 2, 0, NULL);
    add_kv(d, "qwen3.context_length", KILN_GGUF_U32, 4096, 0, NULL);
    add_kv(d, "qwen3.embedding_length", KILN_GGUF_U32, 32, 0, NULL);
    add_kv(d, "qwen3.feed_forward_length", KILN_GGUF_U32, 48, 0, NULL);
    add_kv(d, "qwen3.attention.head_count", KILN_GGUF_U32, 2, 0, NULL);
    add_kv(d, "qwen3.attention.head_count_kv", KILN_GGUF_U32, 1, 0, NULL);
    add_kv(d, "qwen3.attention.key_length", KILN_GGUF_U32, 16, 0, NULL);
    add_kv(d, "qwen3.attention.value_length", KILN_GGUF_U32, 16, 0, NULL);
    add_kv(d, "qwen3.rope.freq_base", KILN_GGUF_F32, 0, 1e6f, NULL);
    add_kv(d, "qwen3.attention.layer_norm_rms_epsilon", KILN_GGUF_F32, 0, 1e-6f, NULL);
    add_kv(d, "tokenizer.ggml.model", KILN_GGUF_STRING, 0, 0, "gpt2");
    add_t(d, "token_embd.weight", 2, 10, 32);
    char n[64];
    for (int i = 0; i < 2; i++) {
        const struct {
            const char *s;
            int nd;
            int64_t a, b;
        } per[] = {{"attn_norm", 1, 32, 0},   {"attn_q", 2, 32, 32},   {"attn_k", 2, 16, 32},
                   {"attn_v", 2, 16, 32},     {"attn_output", 2, 32, 32}, {"attn_q_norm", 1, 16, 0},
                   {"attn_k_norm", 1, 16, 0}, {"ffn_norm", 1, 32, 0},  {"ffn_gate", 2, 48, 32},
                   {"ffn_up", 2, 48, 32},     {"ffn_down", 2, 32, 48}};
        for (size_t k = 0; k < sizeof per / sizeof per[0]; k++) {
            snprintf(n, sizeof n, "blk.%d.%s.weight", i, per[k].s);
            add_t(d, n, per[k].nd, per[k].a, per[k].b);
        }
    }
    add_t(d, "output_norm.weight", 1, 32, 0);
}

/* A valid T5 encoder: d_model 32, 2 layers, 2 heads x 8, d_ff 40, 8 buckets, vocabulary 12. */
static void t5_desc(desc *d) {
    memset(d, 0, sizeof *d);
    add_kv(d, "general.architecture", KILN_GGUF_STRING, 0, 0, "t5encoder");
    add_kv(d, "t5encoder.context_length", KILN_GGUF_U32, 512, 0, NULL);
    add_kv(d, "t5encoder.embedding_length", KILN_GGUF_U32, 32, 0, NULL);
    add_kv(d, "t5encoder.feed_forward_length", KILN_GGUF_U32, 40, 0, NULL);
    add_kv(d, "t5encoder.block_count", KILN_GGUF_U32, 2, 0, NULL);
    add_kv(d, "t5encoder.attention.head_count", KILN_GGUF_U32, 2, 0, NULL);
    add_kv(d, "t5encoder.attention.key_length", KILN_GGUF_U32, 8, 0, NULL);
    add_kv(d, "t5encoder.attention.value_length", KILN_GGUF_U32, 8, 0, NULL);
    add_kv(d, "t5encoder.attention.layer_norm_epsilon", KILN_GGUF_F32, 0, 1e-6f, NULL);
    add_kv(d, "t5encoder.attention.relative_buckets_count", KILN_GGUF_U32, 8, 0, NULL);
    add_kv(d, "t5encoder.attention.layer_norm_rms_epsilon", KILN_GGUF_F32, 0, 1e-6f, NULL);
    add_t(d, "token_embd.weight", 2, 12, 32);
    char n[64];
    for (int i = 0; i < 2; i++) {
        const struct {
            const char *s;
            int nd;
            int64_t a, b;
        } per[] = {{"attn_norm", 1, 32, 0}, {"attn_q", 2, 16, 32}, {"attn_k", 2, 16, 32}, {"attn_v", 2, 16, 32},
                   {"attn_o", 2, 32, 16},   {"ffn_norm", 1, 32, 0}, {"ffn_gate", 2, 40, 32}, {"ffn_up", 2, 40, 32},
                   {"ffn_down", 2, 32, 40}};
        for (size_t k = 0; k < sizeof per / sizeof per[0]; k++) {
            snprintf(n, sizeof n, "enc.blk.%d.%s.weight", i, per[k].s);
            add_t(d, n, per[k].nd, per[k].a, per[k].b);
        }
    }
    add_t(d, "enc.blk.0.attn_rel_b.weight", 2, 8, 2);
    add_t(d, "enc.output_norm.weight", 1, 32, 0);
}

/* Opens the description's bytes and runs the check; returns its status (err filled). */
static kiln_status check(const desc *d, kiln_gguf_te *te, kiln_err *err) {
    buf b = serialise(d);
    kiln_gguf_file *g = NULL;
    kiln_status s = kiln_gguf_open_memory(b.p, b.n, "te.gguf", &g, err);
    CHECK_MSG(s == KILN_OK, "the container itself must parse: %s", err->msg);
    if (s == KILN_OK) s = kiln_gguf_te_check(g, te, err);
    kiln_gguf_close(g);
    free(b.p);
    return s;
}

/* The case must fail with code and a message holding each needle. */
static void refused(const desc *d, kiln_status code, const char *needle1, const char *needle2) {
    kiln_gguf_te te;
    kiln_err err = {0};
    kiln_status s = check(d, &te, &err);
    CHECK_MSG(s == code, "want %s, got %s (%s)", kiln_status_name(code), kiln_status_name(s), err.msg);
    CHECK_ERR_CONTAINS(&err, needle1);
    if (needle2) CHECK_ERR_CONTAINS(&err, needle2);
    CHECK_EQ_INT(te.kind, KILN_GGUF_TE_NONE);
}

static void test_valid(void) {
    desc d;
    kiln_gguf_te te;
    kiln_err err = {0};
    qwen3_desc(&d);
    CHECK_MSG(check(&d, &te, &err) == KILN_OK, "%s", err.msg);
    CHECK_EQ_INT(te.kind, KILN_GGUF_TE_QWEN3);
    CHECK_EQ_INT(te.n_layers, 2);
    CHECK_EQ_INT(te.hidden, 32);
    CHECK_EQ_INT(te.n_heads, 2);
    CHECK_EQ_INT(te.n_kv_heads, 1);
    CHECK_EQ_INT(te.head_dim, 16);
    CHECK_EQ_INT(te.ffn, 48);
    CHECK_EQ_INT(te.vocab, 10);
    CHECK_NEAR(te.eps, 1e-6, 1e-12);
    CHECK_NEAR(te.theta, 1e6, 1e-3);
    /* defaults llama.cpp applies: head_count_kv = head_count, key_length = embedding / heads, freq_base 10000 */
    kvd *k = find_kv(&d, "qwen3.rope.freq_base");
    snprintf(k->key, sizeof k->key, "general.unrelated");
    CHECK_MSG(check(&d, &te, &err) == KILN_OK, "%s", err.msg);
    CHECK_NEAR(te.theta, 10000.0, 1e-9);
    t5_desc(&d);
    CHECK_MSG(check(&d, &te, &err) == KILN_OK, "%s", err.msg);
    CHECK_EQ_INT(te.kind, KILN_GGUF_TE_T5);
    CHECK_EQ_INT(te.num_buckets, 8);
    CHECK_EQ_INT(te.head_dim, 8);
    CHECK_EQ_INT(te.ffn, 40);
    /* a FLUX GGUF (BFL names) is not a text encoder: nothing is checked */
    memset(&d, 0, sizeof d);
    add_kv(&d, "general.architecture", KILN_GGUF_STRING, 0, 0, "flux");
    add_t(&d, "img_in.weight", 2, 4, 32);
    CHECK(check(&d, &te, &err) == KILN_OK && te.kind == KILN_GGUF_TE_NONE);
}

static void test_names(void) {
    char hf[256];
    CHECK(kiln_gguf_te_hf_name(KILN_GGUF_TE_QWEN3, "blk.13.attn_q.weight", hf, sizeof hf));
    CHECK_EQ_STR(hf, "model.layers.13.self_attn.q_proj.weight");
    CHECK(kiln_gguf_te_hf_name(KILN_GGUF_TE_QWEN3, "blk.0.attn_output.weight", hf, sizeof hf));
    CHECK_EQ_STR(hf, "model.layers.0.self_attn.o_proj.weight");
    CHECK(kiln_gguf_te_hf_name(KILN_GGUF_TE_QWEN3, "blk.2.attn_k_norm.weight", hf, sizeof hf));
    CHECK_EQ_STR(hf, "model.layers.2.self_attn.k_norm.weight");
    CHECK(kiln_gguf_te_hf_name(KILN_GGUF_TE_QWEN3, "blk.2.ffn_norm.weight", hf, sizeof hf));
    CHECK_EQ_STR(hf, "model.layers.2.post_attention_layernorm.weight");
    CHECK(kiln_gguf_te_hf_name(KILN_GGUF_TE_QWEN3, "token_embd.weight", hf, sizeof hf));
    CHECK_EQ_STR(hf, "model.embed_tokens.weight");
    CHECK(kiln_gguf_te_hf_name(KILN_GGUF_TE_QWEN3, "output.weight", hf, sizeof hf));
    CHECK_EQ_STR(hf, "lm_head.weight");
    CHECK(kiln_gguf_te_hf_name(KILN_GGUF_TE_T5, "enc.blk.0.attn_rel_b.weight", hf, sizeof hf));
    CHECK_EQ_STR(hf, "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight");
    CHECK(kiln_gguf_te_hf_name(KILN_GGUF_TE_T5, "enc.blk.5.ffn_gate.weight", hf, sizeof hf));
    CHECK_EQ_STR(hf, "encoder.block.5.layer.1.DenseReluDense.wi_0.weight");
    CHECK(kiln_gguf_te_hf_name(KILN_GGUF_TE_T5, "enc.blk.5.ffn_up.weight", hf, sizeof hf));
    CHECK_EQ_STR(hf, "encoder.block.5.layer.1.DenseReluDense.wi_1.weight");
    CHECK(kiln_gguf_te_hf_name(KILN_GGUF_TE_T5, "token_embd.weight", hf, sizeof hf));
    CHECK_EQ_STR(hf, "shared.weight");
    CHECK(kiln_gguf_te_hf_name(KILN_GGUF_TE_T5, "enc.output_norm.weight", hf, sizeof hf));
    CHECK_EQ_STR(hf, "encoder.final_layer_norm.weight");
    CHECK(kiln_gguf_te_hf_name(KILN_GGUF_TE_T5, "dec.blk.0.attn_q.weight", hf, sizeof hf)); /* kept as is */
    CHECK_EQ_STR(hf, "dec.blk.0.attn_q.weight");
    CHECK(!kiln_gguf_te_hf_name(KILN_GGUF_TE_QWEN3, "blk.01.attn_q.weight", hf, sizeof hf));
    CHECK(!kiln_gguf_te_hf_name(KILN_GGUF_TE_QWEN3, "blk.1.attn_qkv.weight", hf, sizeof hf));
    CHECK(!kiln_gguf_te_hf_name(KILN_GGUF_TE_QWEN3, "blk.x.attn_q.weight", hf, sizeof hf));
    CHECK(!kiln_gguf_te_hf_name(KILN_GGUF_TE_NONE, "token_embd.weight", hf, sizeof hf));
}

static void test_corrupt(void) {
    desc d;
    /* a missing tensor */
    qwen3_desc(&d);
    drop_t(&d, "blk.1.attn_k_norm.weight");
    refused(&d, KILN_E_NOT_FOUND, "'blk.1.attn_k_norm.weight' is missing", NULL);
    qwen3_desc(&d);
    drop_t(&d, "token_embd.weight");
    refused(&d, KILN_E_NOT_FOUND, "token_embd.weight", "missing");
    /* a shape that contradicts the metadata */
    qwen3_desc(&d);
    find_t(&d, "blk.0.attn_k.weight")->shape[0] = 32; /* 2 kv heads' rows, but head_count_kv is 1 */
    refused(&d, KILN_E_FORMAT, "'blk.0.attn_k.weight' has shape [32, 32]", "head_count_kv");
    qwen3_desc(&d);
    find_t(&d, "blk.1.ffn_down.weight")->shape[1] = 64;
    refused(&d, KILN_E_FORMAT, "blk.1.ffn_down.weight", "feed_forward_length");
    qwen3_desc(&d);
    find_kv(&d, "qwen3.embedding_length")->u = 64;
    refused(&d, KILN_E_FORMAT, "token_embd.weight", "embedding_length");
    /* an unknown architecture with llama.cpp names */
    qwen3_desc(&d);
    snprintf(find_kv(&d, "general.architecture")->s, 32, "qwen2");
    refused(&d, KILN_E_UNSUPPORTED, "architecture 'qwen2'", "qwen3");
    qwen3_desc(&d);
    snprintf(find_kv(&d, "general.architecture")->key, 80, "general.name2"); /* no architecture at all */
    refused(&d, KILN_E_UNSUPPORTED, "no general.architecture", NULL);
    /* a tensor in a block past block_count, and one the architecture does not have */
    qwen3_desc(&d);
    add_t(&d, "blk.2.attn_norm.weight", 1, 32, 0);
    refused(&d, KILN_E_FORMAT, "'blk.2.attn_norm.weight' is in block 2", "block_count is 2");
    qwen3_desc(&d);
    add_t(&d, "blk.0.attn_qkv.weight", 2, 64, 32);
    refused(&d, KILN_E_UNSUPPORTED, "'blk.0.attn_qkv.weight' is not one", NULL);
    qwen3_desc(&d);
    add_t(&d, "rope_freqs.weight", 1, 8, 0);
    refused(&d, KILN_E_UNSUPPORTED, "rope_freqs", NULL);
    /* keys: unknown, missing, per layer, mistyped, out of range, contradictory, split, RoPE scaling */
    qwen3_desc(&d);
    add_kv(&d, "qwen3.attention.sliding_window", KILN_GGUF_U32, 256, 0, NULL);
    refused(&d, KILN_E_UNSUPPORTED, "qwen3.attention.sliding_window", NULL);
    qwen3_desc(&d);
    snprintf(find_kv(&d, "qwen3.attention.layer_norm_rms_epsilon")->key, 80, "qwen3.attention.layer_norm_epsilon");
    refused(&d, KILN_E_UNSUPPORTED, "qwen3.attention.layer_norm_epsilon", NULL); /* not Qwen3's key */
    qwen3_desc(&d);
    snprintf(find_kv(&d, "qwen3.attention.layer_norm_rms_epsilon")->key, 80, "general.x");
    refused(&d, KILN_E_FORMAT, "qwen3.attention.layer_norm_rms_epsilon is missing", NULL);
    qwen3_desc(&d);
    find_kv(&d, "qwen3.attention.head_count_kv")->type = KILN_GGUF_ARRAY;
    refused(&d, KILN_E_UNSUPPORTED, "qwen3.attention.head_count_kv is an array", NULL);
    qwen3_desc(&d);
    find_kv(&d, "qwen3.block_count")->type = KILN_GGUF_F32;
    refused(&d, KILN_E_FORMAT, "qwen3.block_count must be a positive integer", NULL);
    qwen3_desc(&d);
    find_kv(&d, "qwen3.attention.layer_norm_rms_epsilon")->f = 2.0f;
    refused(&d, KILN_E_FORMAT, "layer_norm_rms_epsilon 2", NULL);
    qwen3_desc(&d);
    find_kv(&d, "qwen3.attention.value_length")->u = 8;
    refused(&d, KILN_E_UNSUPPORTED, "value_length 8 differ", NULL);
    qwen3_desc(&d);
    add_kv(&d, "qwen3.vocab_size", KILN_GGUF_U32, 11, 0, NULL);
    refused(&d, KILN_E_FORMAT, "qwen3.vocab_size 11 contradicts", NULL);
    qwen3_desc(&d);
    add_kv(&d, "split.count", KILN_GGUF_U32, 3, 0, NULL);
    refused(&d, KILN_E_UNSUPPORTED, "split.count 3", NULL);
    qwen3_desc(&d);
    add_kv(&d, "qwen3.rope.scaling.type", KILN_GGUF_STRING, 0, 0, "yarn");
    refused(&d, KILN_E_UNSUPPORTED, "rope.scaling.type \"yarn\"", NULL);
    qwen3_desc(&d);
    add_kv(&d, "qwen3.rope.dimension_count", KILN_GGUF_U32, 8, 0, NULL);
    refused(&d, KILN_E_UNSUPPORTED, "rope.dimension_count 8", NULL);
    /* T5 */
    t5_desc(&d);
    drop_t(&d, "enc.blk.1.ffn_gate.weight");
    refused(&d, KILN_E_UNSUPPORTED, "without the gated FFN", NULL);
    t5_desc(&d);
    add_t(&d, "enc.blk.1.attn_rel_b.weight", 2, 8, 2);
    refused(&d, KILN_E_UNSUPPORTED, "UMT5", NULL);
    t5_desc(&d);
    find_t(&d, "enc.blk.0.attn_rel_b.weight")->shape[0] = 16;
    refused(&d, KILN_E_FORMAT, "attn_rel_b", "relative_buckets_count");
    t5_desc(&d);
    find_kv(&d, "t5encoder.attention.layer_norm_epsilon")->f = 1e-5f;
    refused(&d, KILN_E_FORMAT, "contradicts layer_norm_rms_epsilon", NULL);
    t5_desc(&d);
    drop_t(&d, "enc.output_norm.weight");
    refused(&d, KILN_E_NOT_FOUND, "enc.output_norm.weight", NULL);
    t5_desc(&d);
    add_t(&d, "enc.blk.0.attn_qkv.weight", 2, 48, 32);
    refused(&d, KILN_E_UNSUPPORTED, "enc.blk.0.attn_qkv.weight", NULL);
}

/* Through kiln_st_open (what generate, serve and inspect use): renamed, detected; a refused file fails to open. */
static void test_open_as_checkpoint(void) {
    desc d;
    qwen3_desc(&d);
    add_t(&d, "output.weight", 2, 10, 32);
    buf b = serialise(&d);
    char path[] = "/tmp/kiln_te_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, b.p, b.n) == (ssize_t)b.n);
    if (fd >= 0) close(fd);
    kiln_st_file *f = NULL;
    kiln_err err = {0};
    CHECK_MSG(kiln_st_open(path, &f, &err) == KILN_OK, "%s", err.msg);
    if (f) {
        CHECK(kiln_st_find(f, "model.layers.1.mlp.down_proj.weight") != NULL);
        CHECK(kiln_st_find(f, "model.embed_tokens.weight") != NULL);
        CHECK(kiln_st_find(f, "lm_head.weight") != NULL);
        CHECK(kiln_st_find(f, "blk.1.ffn_down.weight") == NULL);
        const kiln_gguf_te *te = kiln_st_gguf_te(f);
        CHECK(te && te->kind == KILN_GGUF_TE_QWEN3 && te->n_layers == 2);
        kiln_detect_result r;
        kiln_detect(f, &r);
        CHECK_EQ_INT(r.family, KILN_FAMILY_QWEN3);
        kiln_st_close(f);
    }
    kiln_gguf_file *g = NULL;
    CHECK(kiln_gguf_open(path, &g, &err) == KILN_OK);
    if (g) {
        kiln_detect_result r;
        kiln_detect_gguf(g, &r);
        CHECK_EQ_INT(r.family, KILN_FAMILY_QWEN3);
        CHECK_EQ_STR(kiln_layout_name(r.layout), "llama.cpp");
        CHECK_EQ_INT(r.hidden, 32);
        kiln_gguf_close(g);
    }
    /* broken: the open itself fails, naming the tensor */
    drop_t(&d, "blk.0.ffn_up.weight");
    free(b.p);
    b = serialise(&d);
    FILE *fp = fopen(path, "wb");
    CHECK(fp && fwrite(b.p, 1, b.n, fp) == b.n);
    if (fp) fclose(fp);
    CHECK(kiln_st_open(path, &f, &err) == KILN_E_NOT_FOUND && f == NULL);
    CHECK_ERR_CONTAINS(&err, "blk.0.ffn_up.weight");
    free(b.p);
    unlink(path);
}

int main(void) {
    RUN(test_valid);
    RUN(test_names);
    RUN(test_corrupt);
    RUN(test_open_as_checkpoint);
    return test_summary();
}

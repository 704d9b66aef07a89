/* test_text_flux1_corpus.c - kiln's CLIP-L and T5 ids against transformers' on the committed corpora
 * (tests/data/tokenizer/clip_l_corpus.jsonl and t5_corpus.jsonl, made by
 * tools/reference/tokenizer/gen_corpus_flux1.py): every string plain (add_special_tokens=False) and in the
 * FluxPipeline form (CLIP: 77, truncation, BOS/EOS, pad <|endoftext|>; T5: 512 and 256, truncation, EOS, pad
 * <pad>), ids and attention masks. The generator checked those forms against transformers itself. Any mismatch
 * fails and prints the string and the first differing position. */
#include <jansson.h>

#include "base/alloc.h"
#include "test.h"
#include "text/tokenizer.h"

typedef struct corpus {
    json_t **lines;
    size_t n;
} corpus;

static void load_corpus(const char *rel, corpus *c) {
    FILE *f = fopen(test_src_path(rel), "rb");
    CHECK_MSG(f != NULL, "%s", rel);
    if (!f) return;
    char *buf = NULL;
    size_t cap = 0, lcap = 0;
    ssize_t len;
    while ((len = getline(&buf, &cap, f)) > 0) {
        json_error_t je;
        json_t *j = json_loadb(buf, (size_t)len, JSON_ALLOW_NUL, &je);
        CHECK_MSG(j != NULL, "%s line %zu: %s", rel, c->n + 1, je.text);
        if (!j) continue;
        if (c->n == lcap) {
            lcap = lcap ? lcap * 2 : 1024;
            c->lines = realloc(c->lines, lcap * sizeof *c->lines);
        }
        c->lines[c->n++] = j;
    }
    free(buf);
    fclose(f);
}

static void free_corpus(corpus *c) {
    for (size_t i = 0; i < c->n; i++) json_decref(c->lines[i]);
    free(c->lines);
}

/* want[i] for the expected sequence: bos? + ids[0..take) + eos?, then pad up to total. */
static long long want_at(size_t i, const json_t *ids, size_t take, int bos, int eos, int pad) {
    if (bos >= 0) {
        if (i == 0) return bos;
        i--;
    }
    if (i < take) return json_integer_value(json_array_get(ids, i));
    if (i == take && eos >= 0) return eos;
    return pad;
}

/* Compares one kiln encoding with the expected form; prints the first miss. */
static int same(const kiln_tokens *t, const json_t *ids, size_t take, size_t total, int bos, int eos, int pad,
                const char *text, const char *what) {
    size_t real = take + (bos >= 0) + (eos >= 0);
    if (t->n != total || t->n_real != real) {
        fprintf(stderr, "  %s length: kiln %zu (%zu real), HF %zu (%zu real) for \"%.60s\"\n", what, t->n, t->n_real,
                total, real, text);
        return 0;
    }
    for (size_t i = 0; i < total; i++) {
        long long w = want_at(i, ids, take, bos, eos, pad);
        if (t->ids[i] != w || t->mask[i] != (i < real)) {
            fprintf(stderr, "  %s mismatch at %zu (kiln %d mask %d, HF %lld mask %d) for \"%.60s\"\n", what, i,
                    t->ids[i], t->mask[i], w, i < real, text);
            return 0;
        }
    }
    return 1;
}

static size_t run_corpus(kiln_tok_kind kind, const char *rel, const size_t *lens, size_t n_lens, int bos, int eos,
                         int pad) {
    kiln_err err = {0};
    kiln_tokenizer *tok;
    CHECK_MSG(kiln_tokenizer_load_kind(kind, NULL, &tok, &err) == KILN_OK, "%s", err.msg);
    if (!tok) return 0;
    corpus c = {0};
    load_corpus(rel, &c);
    CHECK(c.n > 2000);
    if (c.n) {
        CHECK_EQ_STR(json_string_value(json_object_get(c.lines[0], "format")), "kiln-tokenizer-corpus");
        CHECK_EQ_STR(json_string_value(json_object_get(c.lines[0], "tokenizer")), kiln_tok_kind_name(kind));
        CHECK_EQ_INT(json_integer_value(json_object_get(c.lines[0], "count")), (long long)c.n - 1);
    }
    size_t bad = 0, truncated = 0, unk = 0;
    for (size_t i = 1; i < c.n; i++) {
        const json_t *jt = json_object_get(c.lines[i], "text"), *want = json_object_get(c.lines[i], "ids");
        const char *text = json_string_value(jt);
        size_t len = json_string_length(jt), nw = json_array_size(want);
        int32_t *ids;
        size_t n;
        CHECK_MSG(kiln_tokenizer_encode(tok, text, len, &ids, &n, &err) == KILN_OK, "%s", err.msg);
        kiln_tokens plain = {ids, NULL, n, n, n, false};
        uint8_t *ones = kiln_malloc(n + 1);
        memset(ones, 1, n);
        plain.mask = ones;
        if (!same(&plain, want, nw, nw, -1, -1, -1, text, "plain")) bad++;
        for (size_t k = 0; k < n; k++) unk += ids[k] == 2 && kind == KILN_TOK_T5;
        kiln_free(ids);
        kiln_free(ones);

        kiln_tok_options opt = {KILN_TEMPLATE_NONE, KILN_PAD_NONE, 0, -1}; /* tokenizer(text): specials, no pad */
        kiln_tokens t;
        CHECK(kiln_tokenizer_encode_prompt(tok, text, len, &opt, &t, &err) == KILN_OK);
        size_t n_sp = (bos >= 0) + (eos >= 0);
        if (!same(&t, want, nw, nw + n_sp, bos, eos, pad, text, "full")) bad++;
        kiln_tokens_free(&t);

        for (size_t l = 0; l < n_lens; l++) { /* the FluxPipeline calls */
            opt = kind == KILN_TOK_CLIP ? kiln_tok_options_flux1_clip() : kiln_tok_options_flux1_t5(lens[l]);
            CHECK(opt.max_length == lens[l]);
            CHECK(kiln_tokenizer_encode_prompt(tok, text, len, &opt, &t, &err) == KILN_OK);
            size_t take = nw < lens[l] - n_sp ? nw : lens[l] - n_sp;
            if (!same(&t, want, take, lens[l], bos, eos, pad, text, "pipeline")) bad++;
            CHECK_EQ_INT(t.truncated, nw + n_sp > lens[l]);
            CHECK_EQ_INT(t.n_full, nw + n_sp);
            truncated += t.truncated;
            kiln_tokens_free(&t);
        }
    }
    CHECK(truncated > 0); /* the corpus must exercise truncation */
    if (kind == KILN_TOK_T5) CHECK(unk > 0); /* ... and T5's unknown characters */
    CHECK_MSG(bad == 0, "%zu encodings of %zu strings differ from transformers (%s)", bad, c.n - 1, rel);
    free_corpus(&c);
    kiln_tokenizer_free(tok);
    return bad;
}

static void test_clip_corpus(void) {
    static const size_t lens[] = {77};
    run_corpus(KILN_TOK_CLIP, "tests/data/tokenizer/clip_l_corpus.jsonl", lens, 1, 49406, 49407, 49407);
}

static void test_t5_corpus(void) {
    static const size_t lens[] = {512, 256}; /* FLUX.1 [dev], [schnell] */
    run_corpus(KILN_TOK_T5, "tests/data/tokenizer/t5_corpus.jsonl", lens, 2, -1, 1, 0);
}

int main(void) {
    RUN(test_clip_corpus);
    RUN(test_t5_corpus);
    return test_summary();
}

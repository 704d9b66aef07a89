/* test_text_t5.c - the T5 Unigram tokenizer's parts: Viterbi ties, fused unknowns and Metaspace corners on a tiny
 * vocabulary (tests/data/tokenizer/unigram_tiny.json, ids from HF tokenizers via
 * tools/reference/tokenizer/gen_unigram_tiny.py), the real T5 file's lookups and charsmap corner cases (ids from
 * transformers T5TokenizerFast), the FLUX.1 options, finding by kind, and refusals of bad files and blobs. */
#include <jansson.h>

#include "base/alloc.h"
#include "test.h"
#include "text/tok_internal.h"
#include "text/tokenizer.h"

static char tmp_dir[64];

static const char *write_json(const json_t *j, const char *name) {
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", tmp_dir, name);
    CHECK(json_dump_file(j, path, 0) == 0);
    return path;
}

static int ids_equal(const kiln_tokenizer *tok, const char *text, size_t len, const json_t *want) {
    int32_t *ids;
    size_t n;
    kiln_err err = {0};
    if (kiln_tokenizer_encode(tok, text, len, &ids, &n, &err) != KILN_OK) {
        fprintf(stderr, "  encode failed: %s\n", err.msg);
        return 0;
    }
    int ok = n == json_array_size(want);
    for (size_t i = 0; ok && i < n; i++) ok = ids[i] == json_integer_value(json_array_get(want, i));
    if (!ok) {
        fprintf(stderr, "  \"%.*s\": kiln", (int)len, text);
        for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n");
    }
    kiln_free(ids);
    return ok;
}

static void test_tiny_unigram(void) {
    json_error_t je;
    json_t *j = json_load_file(test_src_path("tests/data/tokenizer/unigram_tiny.json"), 0, &je);
    CHECK_MSG(j != NULL, "%s", je.text);
    if (!j) return;
    kiln_err err = {0};
    kiln_tokenizer *tok;
    CHECK_MSG(kiln_tokenizer_load(write_json(json_object_get(j, "tokenizer"), "tiny.json"), &tok, &err) == KILN_OK,
              "%s", err.msg);
    if (tok) {
        CHECK_EQ_INT(kiln_tokenizer_kind(tok), KILN_TOK_T5);
        size_t i;
        const json_t *c;
        size_t n = 0;
        json_array_foreach(json_object_get(j, "cases"), i, c) {
            const json_t *t = json_object_get(c, "text");
            CHECK_MSG(ids_equal(tok, json_string_value(t), json_string_length(t), json_object_get(c, "ids")),
                      "case %zu", i);
            n++;
        }
        CHECK(n >= 20);
        kiln_tokenizer_free(tok);
    }
    json_decref(j);
}

static void expect(const kiln_tokenizer *tok, const char *text, const int32_t *want, size_t nw) {
    int32_t *ids;
    size_t n;
    kiln_err err = {0};
    CHECK(kiln_tokenizer_encode(tok, text, strlen(text), &ids, &n, &err) == KILN_OK);
    int ok = n == nw;
    for (size_t i = 0; ok && i < n; i++) ok = ids[i] == want[i];
    CHECK_MSG(ok, "\"%s\"", text);
    kiln_free(ids);
}

static void test_real_t5(void) {
    kiln_err err = {0};
    kiln_tokenizer *tok;
    CHECK_MSG(kiln_tokenizer_load_kind(KILN_TOK_T5, NULL, &tok, &err) == KILN_OK, "%s", err.msg);
    if (!tok) return;
    CHECK_EQ_INT(kiln_tokenizer_vocab_size(tok), 32100);
    CHECK_EQ_INT(kiln_tokenizer_token_id(tok, "\xE2\x96\x81the"), 8);
    CHECK_EQ_INT(kiln_tokenizer_token_id(tok, "</s>"), 1);
    CHECK_EQ_INT(kiln_tokenizer_token_id(tok, "<extra_id_0>"), 32099);
    /* transformers T5TokenizerFast (add_special_tokens=False) */
    expect(tok, "Hello  world   x ", (const int32_t[]){8774, 296, 3, 226}, 4);
    expect(tok, "\xEF\xBC\xA6\xEF\xBC\xB5\xEF\xBC\xAC\xEF\xBC\xAC", (const int32_t[]){27645}, 1); /* FULL, full width */
    expect(tok, "\xE2\x91\xA0\xCC\x81", (const int32_t[]){209}, 1);   /* circled 1 + acute: one grapheme -> "1" */
    expect(tok, "\xC3\xAF\xC3\xAF", (const int32_t[]){3, 2}, 2);      /* two unknowns fuse */
    expect(tok, "\xEF\xBC\x9C/s\xEF\xBC\x9E", (const int32_t[]){3, 1}, 2); /* full-width </s> maps to the piece */
    expect(tok, "a</s>b", (const int32_t[]){3, 9, 1, 3, 115}, 5);
    expect(tok, "\xE2\x96\x81\xE2\x96\x81x", (const int32_t[]){3, 226}, 2); /* U+2581 maps to a space */
    expect(tok, "", NULL, 0);

    kiln_tokens t;
    kiln_tok_options o = kiln_tok_options_flux1_t5(256);
    CHECK(kiln_tokenizer_encode_prompt(tok, "a cat", 5, &o, &t, &err) == KILN_OK);
    CHECK_EQ_INT(t.n, 256);
    CHECK_EQ_INT(t.n_real, 4); /* _ a _cat </s>: 3 9 1712 1 */
    CHECK_EQ_INT(t.ids[2], 1712);
    CHECK_EQ_INT(t.ids[3], 1);
    CHECK_EQ_INT(t.ids[4], 0);
    kiln_tokens_free(&t);
    o.max_length = 0; /* default 512 */
    CHECK(kiln_tokenizer_encode_prompt(tok, "a", 1, &o, &t, &err) == KILN_OK);
    CHECK_EQ_INT(t.n, 512);
    kiln_tokens_free(&t);
    o = kiln_tok_options_klein();
    CHECK_EQ_INT(kiln_tokenizer_encode_prompt(tok, "a", 1, &o, &t, &err), KILN_E_UNSUPPORTED);
    o = kiln_tok_options_flux1_t5(1);
    CHECK(kiln_tokenizer_encode_prompt(tok, "a b c", 5, &o, &t, &err) == KILN_OK); /* only </s> fits */
    CHECK_EQ_INT(t.n, 1);
    CHECK_EQ_INT(t.ids[0], 1);
    CHECK(t.truncated);
    kiln_tokens_free(&t);
    /* invalid UTF-8 is refused, as for Qwen3 */
    int32_t *ids;
    size_t n;
    CHECK_EQ_INT(kiln_tokenizer_encode(tok, "a\xff", 2, &ids, &n, &err), KILN_E_INVALID);
    kiln_tokenizer_free(tok);
}

static void test_find_by_kind(void) {
    char cmd[512], dir[128];
    kiln_err err = {0};
    kiln_tokenizer *tok;
    /* a diffusers folder's tokenizer_2 wins; a folder holding the wrong kind is refused */
    snprintf(cmd, sizeof cmd, "mkdir -p %s/m/tokenizer_2 %s/m/tokenizer && cp %s %s/m/tokenizer_2/ && cp %s %s/m/tokenizer/",
             tmp_dir, tmp_dir, test_src_path("data/tokenizer/qwen3/tokenizer.json"), tmp_dir,
             test_src_path("data/tokenizer/t5/tokenizer.json"), tmp_dir);
    CHECK(system(cmd) == 0);
    snprintf(dir, sizeof dir, "%s/m", tmp_dir);
    CHECK_EQ_INT(kiln_tokenizer_load_kind(KILN_TOK_T5, dir, &tok, &err), KILN_E_FORMAT);
    CHECK_ERR_CONTAINS(&err, "qwen3");
    CHECK(tok == NULL);
    CHECK_EQ_INT(kiln_tokenizer_load_kind(KILN_TOK_CLIP, dir, &tok, &err), KILN_E_FORMAT);
    CHECK_ERR_CONTAINS(&err, "not clip-l");
    kiln_tok_kind k;
    CHECK(kiln_tok_kind_parse("t5", &k) && k == KILN_TOK_T5);
    CHECK(kiln_tok_kind_parse("clip-l", &k) && k == KILN_TOK_CLIP);
    CHECK(kiln_tok_kind_parse("qwen3", &k) && k == KILN_TOK_QWEN3);
    CHECK(!kiln_tok_kind_parse("clip", &k));
    CHECK_EQ_STR(kiln_tok_kind_name(KILN_TOK_T5), "t5");
    CHECK_EQ_INT(kiln_tokenizer_load_dir(tmp_dir, &tok, &err), KILN_E_NOT_FOUND);
}

static kiln_status load_modified(const char *pointer_key, json_t *value, kiln_err *err) {
    json_error_t je;
    json_t *j = json_load_file(test_src_path("tests/data/tokenizer/unigram_tiny.json"), 0, &je);
    json_t *tk = json_incref(json_object_get(j, "tokenizer"));
    json_decref(j);
    if (!strcmp(pointer_key, "model.byte_fallback")) json_object_set_new(json_object_get(tk, "model"), "byte_fallback", value);
    else if (!strcmp(pointer_key, "model.unk_id")) json_object_set_new(json_object_get(tk, "model"), "unk_id", value);
    else if (!strcmp(pointer_key, "model.vocab+")) json_array_append_new(json_object_get(json_object_get(tk, "model"), "vocab"), value);
    else if (!strcmp(pointer_key, "normalizer")) json_object_set_new(tk, "normalizer", value);
    else json_object_set_new(tk, pointer_key, value);
    kiln_tokenizer *tok;
    kiln_status st = kiln_tokenizer_load(write_json(tk, "mod.json"), &tok, err);
    json_decref(tk);
    kiln_tokenizer_free(tok);
    return st;
}

static void test_refusals(void) {
    kiln_err err = {0};
    CHECK_EQ_INT(load_modified("model.byte_fallback", json_true(), &err), KILN_E_UNSUPPORTED);
    CHECK_EQ_INT(load_modified("model.unk_id", json_null(), &err), KILN_E_UNSUPPORTED);
    CHECK_EQ_INT(load_modified("model.unk_id", json_integer(999), &err), KILN_E_UNSUPPORTED);
    CHECK_EQ_INT(load_modified("model.vocab+", json_pack("[s,f]", "xy", -1.0), &err), KILN_E_UNSUPPORTED);
    CHECK_ERR_CONTAINS(&err, "twice");
    CHECK_EQ_INT(load_modified("model.vocab+", json_pack("[s,s]", "q", "x"), &err), KILN_E_FORMAT);
    CHECK_EQ_INT(load_modified("truncation", json_pack("{s:i}", "max_length", 5), &err), KILN_E_UNSUPPORTED);
    CHECK_EQ_INT(load_modified("normalizer", json_pack("{s:s,s:s}", "type", "Precompiled", "precompiled_charsmap",
                                                        "AAAA"), &err), KILN_E_FORMAT); /* trie size 0 */
    CHECK_EQ_INT(load_modified("normalizer", json_pack("{s:s,s:s}", "type", "Precompiled", "precompiled_charsmap",
                                                        "!!!!"), &err), KILN_E_FORMAT); /* not base64 */
    CHECK_EQ_INT(load_modified("normalizer", json_pack("{s:s,s:s}", "type", "Precompiled", "precompiled_charsmap",
                                                        "CAAAAAAAAAA="), &err), KILN_E_FORMAT); /* 8 > 4 bytes */
}

static void test_charsmap_and_base64(void) {
    kiln_err err = {0};
    unsigned char *b;
    size_t n;
    CHECK(kiln_base64_decode("aGVsbG8=", 8, &b, &n, &err) == KILN_OK);
    CHECK(n == 5 && !memcmp(b, "hello", 5));
    kiln_free(b);
    CHECK(kiln_base64_decode("aGVsbA", 6, &b, &n, &err) == KILN_OK && n == 4);
    kiln_free(b);
    CHECK_EQ_INT(kiln_base64_decode("a", 1, &b, &n, &err), KILN_E_FORMAT);
    /* a one-unit trie whose root offset walks outside it: every lookup finds nothing, nothing crashes */
    static const unsigned char blob[] = {4, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 'x', 0};
    kiln_charsmap *m;
    CHECK(kiln_charsmap_parse(blob, sizeof blob, &m, &err) == KILN_OK);
    char *out;
    size_t ol;
    CHECK(kiln_charsmap_normalize(m, "abc\xC3\xA9", 5, &out, &ol, &err) == KILN_OK);
    CHECK(ol == 5 && !memcmp(out, "abc\xC3\xA9", 5));
    kiln_free(out);
    kiln_charsmap_free(m);
    static const unsigned char bad_utf8[] = {4, 0, 0, 0, 0, 0, 0, 0, 0xff};
    CHECK_EQ_INT(kiln_charsmap_parse(bad_utf8, sizeof bad_utf8, &m, &err), KILN_E_FORMAT);
    CHECK_EQ_INT(kiln_charsmap_parse(blob, 3, &m, &err), KILN_E_FORMAT);
}

int main(void) {
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/kiln-test-t5-XXXXXX");
    if (!mkdtemp(tmp_dir)) return 1;
    RUN(test_tiny_unigram);
    RUN(test_real_t5);
    RUN(test_find_by_kind);
    RUN(test_refusals);
    RUN(test_charsmap_and_base64);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp_dir);
    return test_summary();
}

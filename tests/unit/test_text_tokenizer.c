/* test_text_tokenizer.c - the tokenizer API around the ids: the klein template's fixed ids, padding and
 * truncation options, invalid UTF-8 and other bad input, decoding, the data lookup order, concurrent use of one
 * tokenizer, and loading: a small synthetic tokenizer.json exercises lstrip/rstrip/normalized added tokens, every
 * refusal of an unsupported file, and allocation failure at every step. (Id-for-id agreement with HF is
 * test_text_corpus.c.) */
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "test.h"
#include "text/tok_internal.h"
#include "text/tokenizer.h"

static kiln_tokenizer *qwen;

/* ---- helpers ---- */

static size_t encode(const kiln_tokenizer *t, const char *s, size_t len, int32_t *out, size_t cap) {
    int32_t *ids;
    size_t n;
    kiln_err err = {0};
    if (kiln_tokenizer_encode(t, s, len, &ids, &n, &err) != KILN_OK) {
        fprintf(stderr, "  encode failed: %s\n", err.msg);
        return (size_t)-1;
    }
    for (size_t i = 0; i < n && i < cap; i++) out[i] = ids[i];
    kiln_free(ids);
    return n;
}

/* UTF-8 of the GPT-2 stand-in character for byte b. */
static void gpt2_char(unsigned b, char *out) {
    uint32_t cp = kiln_byte_to_cp((uint8_t)b);
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 63));
        out[2] = 0;
    }
}

static const char *QWEN_REGEX = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
                                "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* A small byte-level tokenizer: ids 0..255 the bytes, 256 "ab", 257 "abc", 258 " x"; added tokens 300 "<X>"
 * (lstrip), 301 "<Y>" (rstrip), 302 "é" (normalized), 303 "<X>>" (longer, for leftmost-longest). */
static json_t *synthetic(void) {
    json_t *vocab = json_object();
    char ch[4];
    for (unsigned b = 0; b < 256; b++) {
        gpt2_char(b, ch);
        json_object_set_new(vocab, ch, json_integer(b));
    }
    json_object_set_new(vocab, "ab", json_integer(256));
    json_object_set_new(vocab, "abc", json_integer(257));
    json_object_set_new(vocab, "\xc4\xa0x", json_integer(258)); /* "Ġx" */
    json_t *merges = json_pack("[[s,s],[s,s],s]", "a", "b", "ab", "c", "\xc4\xa0 x");
    json_t *model = json_pack("{s:s,s:n,s:n,s:s,s:s,s:b,s:b,s:b,s:o,s:o}", "type", "BPE", "dropout", "unk_token",
                              "continuing_subword_prefix", "", "end_of_word_suffix", "", "fuse_unk", 0,
                              "byte_fallback", 0, "ignore_merges", 0, "vocab", vocab, "merges", merges);
    json_t *added = json_pack("[{s:i,s:s,s:b,s:b,s:b,s:b,s:b},{s:i,s:s,s:b,s:b,s:b,s:b,s:b},"
                              "{s:i,s:s,s:b,s:b,s:b,s:b,s:b},{s:i,s:s,s:b,s:b,s:b,s:b,s:b}]",
                              "id", 300, "content", "<X>", "single_word", 0, "lstrip", 1, "rstrip", 0, "normalized", 0, "special", 1,
                              "id", 301, "content", "<Y>", "single_word", 0, "lstrip", 0, "rstrip", 1, "normalized", 0, "special", 1,
                              "id", 302, "content", "\xc3\xa9", "single_word", 0, "lstrip", 0, "rstrip", 0, "normalized", 1, "special", 0,
                              "id", 303, "content", "<X>>", "single_word", 0, "lstrip", 0, "rstrip", 0, "normalized", 0, "special", 1);
    json_t *pre = json_pack("{s:s,s:[{s:s,s:{s:s},s:s,s:b},{s:s,s:b,s:b,s:b}]}", "type", "Sequence", "pretokenizers",
                            "type", "Split", "pattern", "Regex", QWEN_REGEX, "behavior", "Isolated", "invert", 0,
                            "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 0, "use_regex", 0);
    return json_pack("{s:s,s:n,s:n,s:o,s:{s:s},s:o,s:{s:s},s:{s:s},s:o}", "version", "1.0", "truncation", "padding",
                     "added_tokens", added, "normalizer", "type", "NFC", "pre_tokenizer", pre, "post_processor",
                     "type", "ByteLevel", "decoder", "type", "ByteLevel", "model", model);
}

static char tmp_dir[64];

static const char *write_json(const json_t *j, const char *name) {
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", tmp_dir, name);
    CHECK(json_dump_file(j, path, 0) == 0);
    return path;
}

static kiln_status load_json(json_t *j, kiln_tokenizer **out, kiln_err *err) {
    kiln_status st = kiln_tokenizer_load(write_json(j, "t.json"), out, err);
    json_decref(j);
    return st;
}

/* ---- the Qwen3 tokenizer ---- */

static void test_qwen3_lookups(void) {
    CHECK_EQ_INT(kiln_tokenizer_vocab_size(qwen), 151669);
    CHECK_EQ_INT(kiln_tokenizer_token_id(qwen, "<|im_end|>"), 151645);
    CHECK_EQ_INT(kiln_tokenizer_token_id(qwen, "<|endoftext|>"), KILN_QWEN3_PAD_ID);
    CHECK_EQ_INT(kiln_tokenizer_token_id(qwen, "\xc4\x8a\xc4\x8a"), 271); /* "ĊĊ" = "\n\n" (spec 2.4) */
    CHECK_EQ_INT(kiln_tokenizer_token_id(qwen, "no such token at all"), -1);
    size_t len;
    const char *p = kiln_tokenizer_piece(qwen, 271, &len);
    CHECK(p && len == 2 && !memcmp(p, "\n\n", 2));
    p = kiln_tokenizer_piece(qwen, 151667, &len);
    CHECK(p && len == 7 && !memcmp(p, "<think>", 7));
    CHECK(kiln_tokenizer_piece(qwen, -1, &len) == NULL && len == 0);
    CHECK(kiln_tokenizer_piece(qwen, 151669, NULL) == NULL);
}

/* spec 2.4: the template's fixed ids around an empty prompt, then padding to 512 with 151643 and mask 0 */
static void test_klein_empty_prompt(void) {
    static const int32_t want[12] = {151644, 872, 198, 151645, 198, 151644, 77091, 198, 151667, 271, 151668, 271};
    kiln_tok_options opt = kiln_tok_options_klein();
    kiln_tokens t;
    kiln_err err = {0};
    CHECK(kiln_tokenizer_encode_prompt(qwen, "", 0, &opt, &t, &err) == KILN_OK);
    CHECK_EQ_INT(t.n, 512);
    CHECK_EQ_INT(t.n_real, 12);
    CHECK(!t.truncated);
    for (size_t i = 0; i < 12; i++) CHECK_EQ_INT(t.ids[i], want[i]);
    for (size_t i = 0; i < 512; i++) {
        CHECK_EQ_INT(t.mask[i], i < 12);
        if (i >= 12) CHECK_EQ_INT(t.ids[i], 151643);
    }
    kiln_tokens_free(&t);
    kiln_tokens_free(&t); /* zeroed: a second free is harmless */
    CHECK(kiln_tokenizer_encode_prompt(qwen, NULL, 0, NULL, &t, &err) == KILN_OK); /* NULL options = klein */
    CHECK_EQ_INT(t.n, 512);
    kiln_tokens_free(&t);
}

static void test_padding_options(void) {
    const char *p = "a red fox jumps over the lazy dog";
    kiln_tok_options opt = {KILN_TEMPLATE_KLEIN, KILN_PAD_NONE, 0, -1};
    kiln_tokens full, t;
    kiln_err err = {0};
    CHECK(kiln_tokenizer_encode_prompt(qwen, p, strlen(p), &opt, &full, &err) == KILN_OK);
    CHECK(full.n > 16 && full.n == full.n_real && !full.truncated);

    opt.padding = KILN_PAD_DIFFUSERS; /* max_length 8 < n: the tail is cut, template end included */
    opt.max_length = 8;
    CHECK(kiln_tokenizer_encode_prompt(qwen, p, strlen(p), &opt, &t, &err) == KILN_OK);
    CHECK(t.n == 8 && t.n_real == 8 && t.n_full == full.n && t.truncated);
    CHECK(!memcmp(t.ids, full.ids, 8 * sizeof *t.ids));
    kiln_tokens_free(&t);

    opt.padding = KILN_PAD_COMFY; /* never truncates */
    CHECK(kiln_tokenizer_encode_prompt(qwen, p, strlen(p), &opt, &t, &err) == KILN_OK);
    CHECK(t.n == full.n && t.n_real == full.n && !t.truncated);
    kiln_tokens_free(&t);

    opt.max_length = 40; /* comfy pads up to max_length with the chosen pad id */
    opt.pad_id = 0;
    CHECK(kiln_tokenizer_encode_prompt(qwen, p, strlen(p), &opt, &t, &err) == KILN_OK);
    CHECK(t.n == 40 && t.n_real == full.n && t.ids[39] == 0 && t.mask[39] == 0 && t.mask[full.n - 1] == 1);
    kiln_tokens_free(&t);

    opt.template_kind = KILN_TEMPLATE_NONE; /* no template = the plain ids */
    opt.padding = KILN_PAD_NONE;
    int32_t plain[64];
    size_t n = encode(qwen, p, strlen(p), plain, 64);
    CHECK(kiln_tokenizer_encode_prompt(qwen, p, strlen(p), &opt, &t, &err) == KILN_OK);
    CHECK(t.n == n && !memcmp(t.ids, plain, n * sizeof *plain));
    CHECK(n + 12 == full.n); /* 3 template ids before the prompt, 9 after (no joint merge here) */
    kiln_tokens_free(&t);
    kiln_tokens_free(&full);

    /* bad options */
    opt = kiln_tok_options_klein();
    opt.template_kind = (kiln_tok_template)7;
    CHECK_EQ_INT(kiln_tokenizer_encode_prompt(qwen, p, 1, &opt, &t, &err), KILN_E_INVALID);
    CHECK(t.ids == NULL && t.n == 0);
    opt = kiln_tok_options_klein();
    opt.padding = (kiln_tok_padding)9;
    CHECK_EQ_INT(kiln_tokenizer_encode_prompt(qwen, p, 1, &opt, &t, &err), KILN_E_INVALID);
    opt = kiln_tok_options_klein();
    opt.max_length = (1u << 20) + 1;
    CHECK_EQ_INT(kiln_tokenizer_encode_prompt(qwen, p, 1, &opt, &t, &err), KILN_E_INVALID);
    CHECK_ERR_CONTAINS(&err, "max_length");
    opt = kiln_tok_options_klein();
    opt.pad_id = 151669;
    CHECK_EQ_INT(kiln_tokenizer_encode_prompt(qwen, p, 1, &opt, &t, &err), KILN_E_INVALID);
    CHECK_EQ_INT(kiln_tokenizer_encode_prompt(qwen, NULL, 3, NULL, &t, &err), KILN_E_INVALID);
    CHECK_EQ_INT(kiln_tokenizer_encode_prompt(NULL, p, 1, NULL, &t, &err), KILN_E_INVALID);

    kiln_tok_template k;
    CHECK(kiln_tok_template_parse("klein", &k) && k == KILN_TEMPLATE_KLEIN);
    CHECK(kiln_tok_template_parse("none", &k) && k == KILN_TEMPLATE_NONE);
    CHECK(!kiln_tok_template_parse("Klein", &k) && !kiln_tok_template_parse(NULL, &k));
}

static void test_invalid_utf8(void) {
    static const struct {
        const char *s;
        size_t len, at;
    } bad[] = {
        {"ab\x80", 3, 2},          /* lone continuation byte */
        {"\xc3", 1, 0},            /* truncated 2-byte sequence */
        {"x\xc0\xaf", 3, 1},       /* overlong '/' */
        {"\xe0\x80\xaf", 3, 0},    /* overlong 3-byte */
        {"\xed\xa0\x80", 3, 0},    /* UTF-16 surrogate D800 */
        {"\xf4\x90\x80\x80", 4, 0}, /* above U+10FFFF */
        {"ok \xff", 4, 3},         /* never valid */
        {"\xe2\x82", 2, 0},        /* truncated at the end */
        {"\xf0\x9f\x98", 3, 0},    /* truncated emoji */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int32_t *ids = (int32_t *)1;
        size_t n = 99;
        kiln_err err = {0};
        CHECK_EQ_INT(kiln_tokenizer_encode(qwen, bad[i].s, bad[i].len, &ids, &n, &err), KILN_E_INVALID);
        CHECK(ids == NULL && n == 0);
        char want[64];
        snprintf(want, sizeof want, "offset %zu", bad[i].at);
        CHECK_ERR_CONTAINS(&err, want);
        CHECK_ERR_CONTAINS(&err, "UTF-8");
        kiln_tokens t;
        CHECK_EQ_INT(kiln_tokenizer_encode_prompt(qwen, bad[i].s, bad[i].len, NULL, &t, &err), KILN_E_INVALID);
        CHECK_ERR_CONTAINS(&err, want); /* the prompt's offset, not the templated text's */
    }
    /* valid edge cases: U+10FFFF, U+FFFF, U+E000 right after the surrogates, NUL bytes */
    int32_t ids[32];
    CHECK(encode(qwen, "\xf4\x8f\xbf\xbf\xef\xbf\xbf\xee\x80\x80", 10, ids, 32) != (size_t)-1);
    size_t n = encode(qwen, "a\0b", 3, ids, 32);
    CHECK(n != (size_t)-1 && n >= 2);
    CHECK(encode(qwen, "", 0, ids, 32) == 0);
    int32_t *p;
    kiln_err err = {0};
    CHECK(kiln_tokenizer_encode(qwen, NULL, 0, &p, &n, &err) == KILN_OK && p != NULL && n == 0);
    kiln_free(p);
    CHECK_EQ_INT(kiln_tokenizer_encode(qwen, "x", KILN_TOK_MAX_INPUT_BYTES + 1, &p, &n, &err), KILN_E_LIMIT);
}

static void test_decode(void) {
    static const char *texts[] = {"a red fox", "東京の夜景 👩‍👩‍👧‍👦 🇯🇵", "  tabs\tand\r\nlines\n", "<|im_end|>x", ""};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        int32_t *ids;
        size_t n;
        char *back;
        kiln_err err = {0};
        CHECK(kiln_tokenizer_encode(qwen, texts[i], strlen(texts[i]), &ids, &n, &err) == KILN_OK);
        size_t blen;
        CHECK(kiln_tokenizer_decode(qwen, ids, n, &back, &blen, &err) == KILN_OK);
        CHECK_EQ_STR(back, texts[i]);
        CHECK_EQ_INT(blen, strlen(texts[i]));
        kiln_free(back);
        kiln_free(ids);
    }
    /* a lone piece of a multi-byte character decodes to U+FFFD, as HF's from_utf8_lossy */
    int32_t ids[8];
    size_t n = encode(qwen, "\xf0\x93\x80\x80", 4, ids, 8); /* U+13000 is three tokens */
    CHECK(n >= 2);
    char *s;
    kiln_err err = {0};
    CHECK(kiln_tokenizer_decode(qwen, ids, 1, &s, NULL, &err) == KILN_OK);
    CHECK(strstr(s, "\xef\xbf\xbd") != NULL);
    kiln_free(s);
    int32_t badid = 151669;
    CHECK_EQ_INT(kiln_tokenizer_decode(qwen, &badid, 1, &s, NULL, &err), KILN_E_INVALID);
    CHECK(s == NULL);
}

/* ---- concurrency: one tokenizer, many threads, the same answers ---- */

static const char *thread_texts[] = {"a red fox in the snow", "東京の夜景、雨", "don't STOP 1234567 !!!",
                                     "<|im_start|>user\nhi<|im_end|>", "🧑🏻‍🚀 in space, oil painting"};
typedef struct worker {
    int32_t want[5][64];
    size_t nwant[5];
    int bad;
} worker;

static void *work(void *arg) {
    worker *w = arg;
    for (int r = 0; r < 300; r++)
        for (int k = 0; k < 5; k++) {
            int32_t got[64];
            size_t n = encode(qwen, thread_texts[k], strlen(thread_texts[k]), got, 64);
            if (n != w->nwant[k] || memcmp(got, w->want[k], n * sizeof *got)) w->bad++;
        }
    return NULL;
}

static void test_threads_share_one_tokenizer(void) {
    worker w[4] = {0};
    for (int k = 0; k < 5; k++) {
        kiln_tokenizer *fresh; /* expected ids from a tokenizer with a cold cache */
        kiln_err err = {0};
        CHECK(kiln_tokenizer_load_default(NULL, &fresh, &err) == KILN_OK);
        if (!fresh) return;
        int32_t *ids;
        size_t n;
        CHECK(kiln_tokenizer_encode(fresh, thread_texts[k], strlen(thread_texts[k]), &ids, &n, &err) == KILN_OK);
        for (int t = 0; t < 4; t++) {
            memcpy(w[t].want[k], ids, n * sizeof *ids);
            w[t].nwant[k] = n;
        }
        kiln_free(ids);
        kiln_tokenizer_free(fresh);
    }
    pthread_t th[4];
    for (int t = 0; t < 4; t++) CHECK(pthread_create(&th[t], NULL, work, &w[t]) == 0);
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        CHECK_EQ_INT(w[t].bad, 0);
    }
}

/* ---- finding the data ---- */

static void test_find_order(void) {
    char path[4096], dir[256];
    kiln_err err = {0};
    unsetenv("KILN_DATA_DIR");
    CHECK(kiln_tokenizer_find(NULL, path, sizeof path, &err) == KILN_OK); /* the source tree (or next to the exe) */
    CHECK(strstr(path, "tokenizer/qwen3/tokenizer.json") != NULL);

    /* $KILN_DATA_DIR wins over the source tree */
    snprintf(dir, sizeof dir, "%s/data/tokenizer/qwen3", tmp_dir);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "mkdir -p %s && echo {} > %s/tokenizer.json", dir, dir);
    CHECK(system(cmd) == 0);
    snprintf(dir, sizeof dir, "%s/data", tmp_dir);
    setenv("KILN_DATA_DIR", dir, 1);
    CHECK(kiln_tokenizer_find(NULL, path, sizeof path, &err) == KILN_OK);
    CHECK(strncmp(path, tmp_dir, strlen(tmp_dir)) == 0);

    /* a model folder's own tokenizer wins over everything */
    snprintf(cmd, sizeof cmd, "mkdir -p %s/model/tokenizer && echo {} > %s/model/tokenizer/tokenizer.json", tmp_dir, tmp_dir);
    CHECK(system(cmd) == 0);
    snprintf(dir, sizeof dir, "%s/model", tmp_dir);
    CHECK(kiln_tokenizer_find(dir, path, sizeof path, &err) == KILN_OK);
    CHECK(strstr(path, "/model/tokenizer/tokenizer.json") != NULL);
    kiln_tokenizer *t = NULL;
    CHECK_EQ_INT(kiln_tokenizer_load_default(dir, &t, &err), KILN_E_FORMAT); /* "{}" has no model */
    CHECK(t == NULL);

    /* a model folder without one falls back; a buffer too small is an error, not a truncated path */
    CHECK(kiln_tokenizer_find("/nonexistent-model-dir", path, sizeof path, &err) == KILN_OK);
    CHECK_EQ_INT(kiln_tokenizer_find(NULL, path, 8, &err), KILN_E_LIMIT);
    unsetenv("KILN_DATA_DIR");
}

/* ---- the synthetic tokenizer ---- */

static void test_synthetic_tokenizer(void) {
    kiln_tokenizer *t;
    kiln_err err = {0};
    CHECK(load_json(synthetic(), &t, &err) == KILN_OK);
    if (!t) {
        fprintf(stderr, "  %s\n", err.msg);
        return;
    }
    int32_t ids[32];
    CHECK_EQ_INT(kiln_tokenizer_vocab_size(t), 304);
    CHECK(encode(t, "abc", 3, ids, 32) == 1 && ids[0] == 257);                  /* two merges by rank */
    CHECK(encode(t, "abab", 4, ids, 32) == 2 && ids[0] == 256 && ids[1] == 256); /* "abab" one word, two merges */
    CHECK(encode(t, "a x", 3, ids, 32) == 2 && ids[0] == 'a' && ids[1] == 258);   /* string-form merge "Ġ x" */
    /* lstrip: the spaces before <X> belong to it */
    CHECK(encode(t, "a  <X>b", 7, ids, 32) == 3 && ids[0] == 'a' && ids[1] == 300 && ids[2] == 'b');
    /* rstrip: the whitespace after <Y> belongs to it */
    CHECK(encode(t, "<Y> \t b", 7, ids, 32) == 2 && ids[0] == 301 && ids[1] == 'b');
    /* leftmost-longest: "<X>>" beats "<X>" */
    CHECK(encode(t, "<X>>", 4, ids, 32) == 1 && ids[0] == 303);
    /* normalized added token: matched after NFC, so "e" + U+0301 finds "é" */
    CHECK(encode(t, "xe\xcc\x81y", 5, ids, 32) == 3 && ids[0] == 'x' && ids[1] == 302 && ids[2] == 'y');
    CHECK_EQ_INT(kiln_tokenizer_token_id(t, "<Y>"), 301);
    CHECK_EQ_INT(kiln_tokenizer_token_id(t, "ab"), 256);
    kiln_tokenizer_free(t);
    kiln_tokenizer_free(NULL);
}

/* Every way a file can ask for what kiln does not do, and malformed files. */
static void test_refusals(void) {
    static const struct {
        const char *path, *json; /* path: where to put json, "a/b" = object a, key b; "" = replace whole file */
        kiln_status want;
        const char *msg;
    } cases[] = {
        {"model/type", "\"WordPiece\"", KILN_E_UNSUPPORTED, "model type"},
        {"model/dropout", "0.1", KILN_E_UNSUPPORTED, "dropout"},
        {"model/continuing_subword_prefix", "\"##\"", KILN_E_UNSUPPORTED, "continuing_subword_prefix"},
        {"model/byte_fallback", "true", KILN_E_UNSUPPORTED, "byte_fallback"},
        {"model/merges", "[[\"a\",\"zz\"]]", KILN_E_FORMAT, "not in the vocab"},
        {"model/merges", "[\"a  b\"]", KILN_E_FORMAT, "one space"},
        {"model/merges", "[[\"x\",\"y\"]]", KILN_E_FORMAT, "merged token"},
        {"model/merges", "[7]", KILN_E_FORMAT, "merge 0"},
        {"model/vocab", "{\"a\":0}", KILN_E_UNSUPPORTED, "single-byte token"},
        {"model/vocab", "{\"a\":-4}", KILN_E_FORMAT, "bad id"},
        {"model/vocab", "{\"\\u4e00\":0}", KILN_E_UNSUPPORTED, "byte-level"},
        {"model/vocab", "[]", KILN_E_FORMAT, "vocab"},
        {"normalizer", "{\"type\":\"NFKC\"}", KILN_E_UNSUPPORTED, "NFKC"},
        {"pre_tokenizer", "{\"type\":\"ByteLevel\",\"add_prefix_space\":false}", KILN_E_UNSUPPORTED, "Sequence"},
        {"pre_tokenizer", "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\w+\"},"
                          "\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
                          "\"use_regex\":false}]}", KILN_E_UNSUPPORTED, "\\w"},
        {"pre_tokenizer", "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a*\"},"
                          "\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
                          "\"use_regex\":false}]}", KILN_E_UNSUPPORTED, "empty string"},
        {"pre_tokenizer", "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},"
                          "\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
                          "\"use_regex\":false}]}", KILN_E_UNSUPPORTED, "does not compile"},
        {"pre_tokenizer", "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},"
                          "\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
                          "\"use_regex\":false}]}", KILN_E_UNSUPPORTED, "Regex"},
        {"pre_tokenizer", "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a\"},"
                          "\"behavior\":\"Removed\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
                          "\"use_regex\":false}]}", KILN_E_UNSUPPORTED, "Isolated"},
        {"post_processor", "{\"type\":\"TemplateProcessing\"}", KILN_E_UNSUPPORTED, "post_processor"},
        {"decoder", "{\"type\":\"WordPiece\"}", KILN_E_UNSUPPORTED, "decoder"},
        {"truncation", "{\"max_length\":5}", KILN_E_UNSUPPORTED, "truncation"},
        {"padding", "{}", KILN_E_UNSUPPORTED, "padding"},
        {"added_tokens", "[{\"id\":300,\"content\":\"<Z>\",\"single_word\":true}]", KILN_E_UNSUPPORTED, "single_word"},
        {"added_tokens", "[{\"id\":300,\"content\":\"\"}]", KILN_E_FORMAT, "content"},
        {"added_tokens", "{}", KILN_E_FORMAT, "added_tokens"},
        {"model", "7", KILN_E_FORMAT, "model"},
        {"", "[1,2]", KILN_E_FORMAT, "object"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *j = synthetic();
        json_error_t je;
        json_t *v = json_loads(cases[i].json, JSON_DECODE_ANY, &je);
        CHECK_MSG(v != NULL, "case %zu json: %s", i, je.text);
        if (!cases[i].path[0]) {
            json_decref(j);
            j = v;
        } else {
            const char *slash = strchr(cases[i].path, '/');
            if (slash) {
                char obj[32];
                snprintf(obj, sizeof obj, "%.*s", (int)(slash - cases[i].path), cases[i].path);
                json_object_set_new(json_object_get(j, obj), slash + 1, v);
            } else json_object_set_new(j, cases[i].path, v);
        }
        kiln_tokenizer *t = (kiln_tokenizer *)1;
        kiln_err err = {0};
        kiln_status st = load_json(j, &t, &err);
        CHECK_MSG(st == cases[i].want, "case %zu (%s): got %s: %s", i, cases[i].path, kiln_status_name(st), err.msg);
        CHECK(t == NULL);
        CHECK_MSG(strstr(err.msg, cases[i].msg) != NULL, "case %zu: \"%s\" lacks \"%s\"", i, err.msg, cases[i].msg);
    }
    kiln_tokenizer *t;
    kiln_err err = {0};
    CHECK_EQ_INT(kiln_tokenizer_load("/nonexistent/tokenizer.json", &t, &err), KILN_E_NOT_FOUND);
    CHECK_EQ_INT(kiln_tokenizer_load(tmp_dir, &t, &err), KILN_E_IO); /* a directory */
    CHECK_ERR_CONTAINS(&err, "not a regular file");
    json_t *empty = json_object();
    FILE *f = fopen(write_json(empty, "bad.json"), "w");
    json_decref(empty);
    fputs("{\"model\": [1, 2", f);
    fclose(f);
    char path[256];
    snprintf(path, sizeof path, "%s/bad.json", tmp_dir);
    CHECK_EQ_INT(kiln_tokenizer_load(path, &t, &err), KILN_E_FORMAT);
    CHECK_ERR_CONTAINS(&err, "line 1");
}

/* Allocation N fails, for N = 1, 2, ...: load and encode report KILN_E_NOMEM (or succeed), never crash or leak
 * (the ASan build checks leaks). */
static void test_allocation_failures(void) {
    json_t *j = synthetic();
    const char *path = write_json(j, "fault.json");
    json_decref(j);
    char p[256];
    snprintf(p, sizeof p, "%s", path);
    int saw_nomem = 0, ok = 0;
    for (uint64_t n = 1; n < 5000; n++) {
        kiln_tokenizer *t = NULL;
        kiln_err err = {0};
        kiln_fault_alloc_fail_at(n, false);
        kiln_status st = kiln_tokenizer_load(p, &t, &err);
        bool fired = kiln_fault_alloc_fired();
        if (st == KILN_OK) {
            /* encoding under a fault, too */
            kiln_tokens toks;
            kiln_tok_options opt = {KILN_TEMPLATE_NONE, KILN_PAD_DIFFUSERS, 16, 0};
            kiln_fault_alloc_fail_at(n % 7 + 1, false);
            kiln_status s2 = kiln_tokenizer_encode_prompt(t, "ab <X> abc", 10, &opt, &toks, &err);
            CHECK_MSG(s2 == KILN_OK || s2 == KILN_E_NOMEM, "%s", err.msg);
            if (s2 == KILN_OK) kiln_tokens_free(&toks);
            kiln_fault_alloc_fail_at(0, false);
            kiln_tokenizer_free(t);
        } else {
            CHECK_MSG(st == KILN_E_NOMEM, "allocation %llu: %s", (unsigned long long)n, err.msg);
            CHECK(t == NULL);
            saw_nomem++;
        }
        kiln_fault_alloc_fail_at(0, false);
        if (!fired) {
            ok = 1;
            break;
        }
    }
    CHECK(ok);
    CHECK(saw_nomem > 5);
}

int main(void) {
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/kiln-test-tok-XXXXXX");
    if (!mkdtemp(tmp_dir)) return 1;
    kiln_err err = {0};
    if (kiln_tokenizer_load_default(NULL, &qwen, &err) != KILN_OK) {
        fprintf(stderr, "cannot load the Qwen3 tokenizer: %s\n", err.msg);
        return 1;
    }
    RUN(test_qwen3_lookups);
    RUN(test_klein_empty_prompt);
    RUN(test_padding_options);
    RUN(test_invalid_utf8);
    RUN(test_decode);
    RUN(test_threads_share_one_tokenizer);
    RUN(test_find_order);
    RUN(test_synthetic_tokenizer);
    RUN(test_refusals);
    RUN(test_allocation_failures);
    kiln_tokenizer_free(qwen);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp_dir);
    return test_summary();
}

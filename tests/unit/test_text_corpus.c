/* test_text_corpus.c - kiln's ids against HuggingFace tokenizers' on the committed corpus
 * (tests/data/tokenizer/qwen3_corpus.jsonl, made by tools/reference/tokenizer/gen_corpus.py): every string
 * plain, templated (klein, unpadded), diffusers-padded/truncated to 512 and ComfyUI-padded, and the ids decoded
 * back to text as HF's decode() does. Any mismatch fails and prints the string and the first differing position. */
#include <jansson.h>

#include "base/alloc.h"
#include "test.h"
#include "text/tokenizer.h"

static kiln_tokenizer *tok;
static json_t **lines;
static size_t n_lines;

static void load_corpus(void) {
    FILE *f = fopen(test_src_path("tests/data/tokenizer/qwen3_corpus.jsonl"), "rb");
    CHECK(f != NULL);
    if (!f) return;
    char *buf = NULL;
    size_t cap = 0;
    ssize_t len;
    size_t lcap = 0;
    while ((len = getline(&buf, &cap, f)) > 0) {
        json_error_t je;
        json_t *j = json_loadb(buf, (size_t)len, JSON_ALLOW_NUL, &je);
        CHECK_MSG(j != NULL, "corpus line %zu: %s", n_lines + 1, je.text);
        if (!j) continue;
        if (n_lines == lcap) {
            lcap = lcap ? lcap * 2 : 1024;
            lines = realloc(lines, lcap * sizeof *lines);
        }
        lines[n_lines++] = j;
    }
    free(buf);
    fclose(f);
}

/* Compares ids with a JSON array (first `n_want` entries of it, then `pad` up to n). Prints the first miss. */
static int same_ids(const int32_t *ids, size_t n, const json_t *want, size_t n_take, size_t n_total, const char *text,
                    const char *what) {
    for (size_t i = 0; i < n_total; i++) {
        long long w = i < n_take ? json_integer_value(json_array_get(want, i)) : 151643;
        if (i >= n || ids[i] != w) {
            fprintf(stderr, "  %s mismatch at %zu (kiln %lld, HF %lld; kiln %zu ids, HF %zu) for \"%.60s\"\n", what, i,
                    i < n ? (long long)ids[i] : -1LL, w, n, n_total, text);
            return 0;
        }
    }
    if (n != n_total) {
        fprintf(stderr, "  %s length: kiln %zu, HF %zu for \"%.60s\"\n", what, n, n_total, text);
        return 0;
    }
    return 1;
}

static void test_corpus_header(void) {
    CHECK(n_lines > 2000);
    if (!n_lines) return;
    CHECK_EQ_STR(json_string_value(json_object_get(lines[0], "format")), "kiln-tokenizer-corpus");
    CHECK_EQ_INT(json_integer_value(json_object_get(lines[0], "count")), (long long)n_lines - 1);
}

static void test_corpus_plain(void) {
    size_t bad = 0, bad_decode = 0;
    for (size_t i = 1; i < n_lines; i++) {
        const json_t *jt = json_object_get(lines[i], "text"), *want = json_object_get(lines[i], "ids");
        int32_t *ids;
        size_t n;
        kiln_err err = {0};
        kiln_status st = kiln_tokenizer_encode(tok, json_string_value(jt), json_string_length(jt), &ids, &n, &err);
        CHECK_MSG(st == KILN_OK, "%s", err.msg);
        if (st != KILN_OK) continue;
        if (!same_ids(ids, n, want, json_array_size(want), json_array_size(want), json_string_value(jt), "plain")) bad++;
        /* decode: the text itself, or HF's decode where NFC changed it */
        const json_t *jd = json_object_get(lines[i], "decoded");
        if (!jd) jd = jt;
        char *back;
        size_t blen;
        CHECK(kiln_tokenizer_decode(tok, ids, n, &back, &blen, &err) == KILN_OK);
        if (blen != json_string_length(jd) || memcmp(back, json_string_value(jd), blen)) {
            fprintf(stderr, "  decode mismatch for \"%.60s\"\n", json_string_value(jt));
            bad_decode++;
        }
        kiln_free(back);
        kiln_free(ids);
    }
    CHECK_MSG(bad == 0, "%zu of %zu strings differ from HF (plain)", bad, n_lines - 1);
    CHECK_MSG(bad_decode == 0, "%zu of %zu decodings differ from HF", bad_decode, n_lines - 1);
}

static void test_corpus_templated(void) {
    size_t bad = 0, truncated = 0;
    for (size_t i = 1; i < n_lines; i++) {
        const json_t *jt = json_object_get(lines[i], "text"), *want = json_object_get(lines[i], "klein");
        const char *text = json_string_value(jt);
        size_t len = json_string_length(jt), nw = json_array_size(want);
        kiln_tok_options opt = kiln_tok_options_klein();
        kiln_tokens t;
        kiln_err err = {0};

        opt.padding = KILN_PAD_NONE;
        CHECK(kiln_tokenizer_encode_prompt(tok, text, len, &opt, &t, &err) == KILN_OK);
        if (!same_ids(t.ids, t.n, want, nw, nw, text, "klein")) bad++;
        kiln_tokens_free(&t);

        opt.padding = KILN_PAD_DIFFUSERS; /* transformers max_length=512 truncation=True (checked by the generator) */
        CHECK(kiln_tokenizer_encode_prompt(tok, text, len, &opt, &t, &err) == KILN_OK);
        size_t real = nw < 512 ? nw : 512;
        if (!same_ids(t.ids, t.n, want, real, 512, text, "diffusers")) bad++;
        CHECK_EQ_INT(t.n_real, real);
        CHECK_EQ_INT(t.n_full, nw);
        CHECK_EQ_INT(t.truncated, nw > 512);
        truncated += t.truncated;
        for (size_t k = 0; k < t.n; k++) CHECK(t.mask[k] == (k < real));
        kiln_tokens_free(&t);

        opt.padding = KILN_PAD_COMFY; /* pad to at least 512, never truncate */
        CHECK(kiln_tokenizer_encode_prompt(tok, text, len, &opt, &t, &err) == KILN_OK);
        if (!same_ids(t.ids, t.n, want, nw, nw > 512 ? nw : 512, text, "comfy")) bad++;
        CHECK_EQ_INT(t.n_real, nw);
        kiln_tokens_free(&t);
    }
    CHECK(truncated > 0); /* the corpus must exercise truncation */
    CHECK_MSG(bad == 0, "%zu templated encodings differ from HF", bad);
}

int main(void) {
    kiln_err err = {0};
    if (kiln_tokenizer_load_default(NULL, &tok, &err) != KILN_OK) {
        fprintf(stderr, "cannot load the tokenizer: %s\n", err.msg);
        return 1;
    }
    load_corpus();
    RUN(test_corpus_header);
    RUN(test_corpus_plain);
    RUN(test_corpus_templated);
    for (size_t i = 0; i < n_lines; i++) json_decref(lines[i]);
    free(lines);
    kiln_tokenizer_free(tok);
    return test_summary();
}

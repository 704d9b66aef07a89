/* test_text_clip.c - the CLIP-L tokenizer's parts: known ids (from transformers CLIPTokenizer), the FLUX.1 form,
 * the lowercase table's order, finding by kind, and refusals of bad folders (missing or malformed files, a
 * tokenizer_config.json naming other special tokens, a vocabulary without a byte's "</w>" form). */
#include <jansson.h>

#include "base/alloc.h"
#include "test.h"
#include "text/tok_internal.h"
#include "text/tokenizer.h"
#include "text/unicode_compat.h"

static char tmp_dir[64];
static kiln_tokenizer *clip;

static void expect(const char *text, const int32_t *want, size_t nw) {
    int32_t *ids;
    size_t n;
    kiln_err err = {0};
    CHECK(kiln_tokenizer_encode(clip, text, strlen(text), &ids, &n, &err) == KILN_OK);
    int ok = n == nw;
    for (size_t i = 0; ok && i < n; i++) ok = ids[i] == want[i];
    if (!ok) {
        fprintf(stderr, "  \"%s\": kiln", text);
        for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n");
    }
    CHECK_MSG(ok, "\"%s\"", text);
    kiln_free(ids);
}

static void test_known_ids(void) {
    /* transformers CLIPTokenizer(text, add_special_tokens=False) */
    expect("a photo of a CAT,  running!!", (const int32_t[]){320, 1125, 539, 320, 2368, 267, 2761, 748}, 8);
    expect("na\xC3\xAFve caf\xC3\xA9 \xC2\xBD \xEF\xAC\x81", (const int32_t[]){1097, 35689, 563, 15304, 33613, 171, 105, 479},
           8);
    expect("", NULL, 0);
    CHECK_EQ_INT(kiln_tokenizer_token_id(clip, "<|startoftext|>"), 49406);
    CHECK_EQ_INT(kiln_tokenizer_token_id(clip, "<|endoftext|>"), 49407);
    CHECK_EQ_INT(kiln_tokenizer_token_id(clip, "a</w>"), 320);
    CHECK_EQ_INT(kiln_tokenizer_vocab_size(clip), 49408);
    CHECK_EQ_INT(kiln_tokenizer_kind(clip), KILN_TOK_CLIP);
}

static void test_flux1_form(void) {
    kiln_err err = {0};
    kiln_tokens t;
    kiln_tok_options o = kiln_tok_options_flux1_clip();
    CHECK(kiln_tokenizer_encode_prompt(clip, "a cat", 5, &o, &t, &err) == KILN_OK);
    CHECK_EQ_INT(t.n, 77);
    CHECK_EQ_INT(t.n_real, 4);
    CHECK_EQ_INT(t.ids[0], 49406);
    CHECK_EQ_INT(t.ids[1], 320);
    CHECK_EQ_INT(t.ids[2], 2368);
    CHECK_EQ_INT(t.ids[3], 49407);
    CHECK_EQ_INT(t.ids[76], 49407);
    CHECK(t.mask[3] == 1 && t.mask[4] == 0);
    kiln_tokens_free(&t);
    o.max_length = 1; /* no room for both special tokens */
    CHECK_EQ_INT(kiln_tokenizer_encode_prompt(clip, "a", 1, &o, &t, &err), KILN_E_INVALID);
    o.max_length = 2;
    CHECK(kiln_tokenizer_encode_prompt(clip, "a cat", 5, &o, &t, &err) == KILN_OK);
    CHECK(t.n == 2 && t.ids[0] == 49406 && t.ids[1] == 49407 && t.truncated && t.n_full == 4);
    kiln_tokens_free(&t);
    o = kiln_tok_options_klein();
    CHECK_EQ_INT(kiln_tokenizer_encode_prompt(clip, "a", 1, &o, &t, &err), KILN_E_UNSUPPORTED);
    o = kiln_tok_options_flux1_clip();
    o.padding = KILN_PAD_COMFY;
    CHECK_EQ_INT(kiln_tokenizer_encode_prompt(clip, "a", 1, &o, &t, &err), KILN_E_UNSUPPORTED);
}

static void test_lowercase_table_sorted(void) {
    CHECK(kiln_hf_lowercase_count > 1400);
    for (size_t i = 1; i < kiln_hf_lowercase_count; i++) CHECK(kiln_hf_lowercase[i - 1].from < kiln_hf_lowercase[i].from);
}

/* A copy of the shipped folder with one file replaced (NULL content: removed). */
static const char *folder_with(const char *file, const char *content) {
    static char dir[128];
    char cmd[1024];
    snprintf(dir, sizeof dir, "%s/clip", tmp_dir);
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s && cp %s/* %s/", dir, dir,
             test_src_path("data/tokenizer/clip-l"), dir);
    CHECK(system(cmd) == 0);
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (!content) CHECK(remove(path) == 0);
    else {
        FILE *f = fopen(path, "wb");
        CHECK(f != NULL);
        if (f) {
            fputs(content, f);
            fclose(f);
        }
    }
    return dir;
}

static void test_refusals(void) {
    kiln_err err = {0};
    kiln_tokenizer *t;
    CHECK_EQ_INT(kiln_tokenizer_load_dir(folder_with("merges.txt", NULL), &t, &err), KILN_E_NOT_FOUND);
    CHECK(t == NULL);
    CHECK_EQ_INT(kiln_tokenizer_load_dir(folder_with("merges.txt", "#version: 0.2\ni n x\n"), &t, &err), KILN_E_FORMAT);
    CHECK_EQ_INT(kiln_tokenizer_load_dir(folder_with("merges.txt", "i nope</w>\n"), &t, &err), KILN_E_FORMAT);
    CHECK_ERR_CONTAINS(&err, "not in the vocab");
    CHECK_EQ_INT(kiln_tokenizer_load_dir(folder_with("vocab.json", "{\"a\": 0, \"a</w>\": 1}"), &t, &err),
                 KILN_E_UNSUPPORTED); /* not every byte */
    CHECK_EQ_INT(kiln_tokenizer_load_dir(folder_with("vocab.json", "[1]"), &t, &err), KILN_E_FORMAT);
    CHECK_EQ_INT(kiln_tokenizer_load_dir(folder_with("tokenizer_config.json", "{\"bos_token\": \"<s>\"}"), &t, &err),
                 KILN_E_UNSUPPORTED);
    CHECK_ERR_CONTAINS(&err, "bos_token");
    CHECK_EQ_INT(kiln_tokenizer_load_dir(folder_with("tokenizer_config.json", "{\"tokenizer_class\": \"GPT2Tokenizer\"}"),
                                         &t, &err),
                 KILN_E_UNSUPPORTED);
    CHECK_EQ_INT(kiln_tokenizer_load_dir(folder_with("tokenizer_config.json", "{"), &t, &err), KILN_E_FORMAT);
    /* no tokenizer_config.json: transformers' defaults are CLIP's */
    CHECK(kiln_tokenizer_load_dir(folder_with("tokenizer_config.json", NULL), &t, &err) == KILN_OK);
    kiln_tokenizer_free(t);
    /* a diffusers folder's tokenizer/ wins over the shipped one */
    char cmd[512], dir[128];
    snprintf(dir, sizeof dir, "%s/model", tmp_dir);
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp -r %s %s/tokenizer", dir, test_src_path("data/tokenizer/clip-l"), dir);
    CHECK(system(cmd) == 0);
    CHECK(kiln_tokenizer_load_kind(KILN_TOK_CLIP, dir, &t, &err) == KILN_OK);
    CHECK(t && kiln_tokenizer_kind(t) == KILN_TOK_CLIP);
    kiln_tokenizer_free(t);
}

int main(void) {
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/kiln-test-clip-XXXXXX");
    if (!mkdtemp(tmp_dir)) return 1;
    kiln_err err = {0};
    if (kiln_tokenizer_load_kind(KILN_TOK_CLIP, NULL, &clip, &err) != KILN_OK) {
        fprintf(stderr, "cannot load the CLIP tokenizer: %s\n", err.msg);
        return 1;
    }
    RUN(test_known_ids);
    RUN(test_flux1_form);
    RUN(test_lowercase_table_sorted);
    RUN(test_refusals);
    kiln_tokenizer_free(clip);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp_dir);
    return test_summary();
}

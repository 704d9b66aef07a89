/* test_text_unicode.c - the Unicode classes kiln's regex uses, checked on THIS machine's PCRE2 against the sets
 * HF tokenizers' Oniguruma uses (tests/data/tokenizer/onig_classes.json, measured by
 * tools/reference/tokenizer/gen_unicode_compat.py) for every code point. A PCRE2 with other Unicode tables
 * than the one the compat data was made with fails here, not silently in the ids. Also the pattern translation
 * itself and the UTF-8 validator and byte map. */
#include <jansson.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "base/alloc.h"
#include "test.h"
#include "text/tok_internal.h"

static int utf8_put(uint32_t c, unsigned char *b) {
    if (c < 0x80) {
        b[0] = (unsigned char)c;
        return 1;
    }
    if (c < 0x800) {
        b[0] = (unsigned char)(0xC0 | c >> 6);
        b[1] = (unsigned char)(0x80 | (c & 63));
        return 2;
    }
    if (c < 0x10000) {
        b[0] = (unsigned char)(0xE0 | c >> 12);
        b[1] = (unsigned char)(0x80 | ((c >> 6) & 63));
        b[2] = (unsigned char)(0x80 | (c & 63));
        return 3;
    }
    b[0] = (unsigned char)(0xF0 | c >> 18);
    b[1] = (unsigned char)(0x80 | ((c >> 12) & 63));
    b[2] = (unsigned char)(0x80 | ((c >> 6) & 63));
    b[3] = (unsigned char)(0x80 | (c & 63));
    return 4;
}

static bool in_ranges(const json_t *ranges, uint32_t c) {
    size_t lo = 0, hi = json_array_size(ranges);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const json_t *r = json_array_get(ranges, mid);
        uint32_t a = (uint32_t)json_integer_value(json_array_get(r, 0)), b = (uint32_t)json_integer_value(json_array_get(r, 1));
        if (c < a) hi = mid;
        else if (c > b) lo = mid + 1;
        else return true;
    }
    return false;
}

static void check_class(const json_t *sets, const char *key, const char *cls) {
    char pat[64], *tr = NULL;
    snprintf(pat, sizeof pat, "^%s$", cls);
    kiln_err err = {0};
    CHECK(kiln_pretok_translate(pat, &tr, &err) == KILN_OK);
    if (!tr) return;
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)tr, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
    kiln_free(tr);
    CHECK(re != NULL);
    if (!re) return;
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    const json_t *ranges = json_object_get(sets, key);
    CHECK(json_array_size(ranges) > 0);
    size_t bad = 0;
    for (uint32_t c = 0; c < 0x110000; c++) {
        if (c >= 0xD800 && c <= 0xDFFF) continue;
        unsigned char b[4];
        int n = utf8_put(c, b);
        bool pc = pcre2_match(re, b, (size_t)n, 0, 0, md, NULL) > 0;
        if (pc != in_ranges(ranges, c) && bad++ < 5)
            fprintf(stderr, "  %s: U+%04X is %s for kiln's PCRE2, %s for HF\n", cls, c, pc ? "in" : "out",
                    pc ? "out" : "in");
    }
    CHECK_MSG(bad == 0, "%zu code points differ in %s", bad, cls);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
}

static void test_classes_match_oniguruma(void) {
    json_error_t je;
    json_t *sets = json_load_file(test_src_path("tests/data/tokenizer/onig_classes.json"), 0, &je);
    CHECK_MSG(sets != NULL, "%s", je.text);
    if (!sets) return;
    check_class(sets, "s", "\\s");
    check_class(sets, "L", "\\p{L}");
    check_class(sets, "N", "\\p{N}");
    check_class(sets, "L", "[\\p{L}]");
    check_class(sets, "N", "\\pN");
    json_decref(sets);
}

static void test_translate(void) {
    char *out;
    kiln_err err = {0};
    CHECK(kiln_pretok_translate("a\\\\s[\\]x]\\r\\n", &out, &err) == KILN_OK); /* escaped backslash, ] in a class */
    CHECK_EQ_STR(out, "a\\\\s[\\]x]\\r\\n");
    kiln_free(out);
    CHECK(kiln_pretok_translate("[^\\s]", &out, &err) == KILN_OK);
    CHECK(strncmp(out, "[^\\x{9}-\\x{D}", 13) == 0 && strchr(out + 1, '[') == NULL);
    kiln_free(out);
    CHECK(kiln_pretok_translate("\\S", &out, &err) == KILN_OK);
    CHECK(strncmp(out, "[^", 2) == 0);
    kiln_free(out);
    static const char *refused[] = {"\\w", "\\d+", "[\\S]", "\\P{L}", "\\Qx\\E", "\\bx", "\\h"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        out = (char *)1;
        CHECK_EQ_INT(kiln_pretok_translate(refused[i], &out, &err), KILN_E_UNSUPPORTED);
        CHECK(out == NULL);
    }
}

static void test_utf8_and_bytemap(void) {
    CHECK_EQ_INT(kiln_utf8_invalid_at("abc", 3), 3);
    CHECK_EQ_INT(kiln_utf8_invalid_at("\xc2\x80\xdf\xbf", 4), 4);
    CHECK_EQ_INT(kiln_utf8_invalid_at("\xc1\xbf", 2), 0);
    CHECK_EQ_INT(kiln_utf8_invalid_at("\xef\xbf\xbf\xf0\x90\x80\x80", 7), 7);
    CHECK_EQ_INT(kiln_utf8_invalid_at("a\xed\x9f\xbf\xed\xa0\x80", 7), 4);
    /* every code point round-trips through encode/validate/decode */
    for (uint32_t c = 0; c < 0x110000; c += (c < 0x3000 ? 1 : 97)) {
        if (c >= 0xD800 && c <= 0xDFFF) continue;
        unsigned char b[4];
        int n = utf8_put(c, b);
        uint32_t d;
        CHECK(kiln_utf8_invalid_at((const char *)b, (size_t)n) == (size_t)n);
        CHECK(kiln_utf8_decode(b, &d) == n && d == c);
    }
    /* the GPT-2 map is a bijection between the 256 bytes and 256 code points; space is U+0120 "Ġ" */
    int seen[512] = {0};
    for (int b = 0; b < 256; b++) {
        uint32_t cp = kiln_byte_to_cp((uint8_t)b);
        CHECK(cp < 512);
        if (cp < 512) seen[cp]++;
        CHECK_EQ_INT(kiln_cp_to_byte(cp), b);
    }
    for (int i = 0; i < 512; i++) CHECK(seen[i] <= 1);
    CHECK_EQ_INT(kiln_byte_to_cp(' '), 0x120);
    CHECK_EQ_INT(kiln_byte_to_cp('\n'), 0x10A);
    CHECK_EQ_INT(kiln_byte_to_cp('A'), 'A');
    CHECK_EQ_INT(kiln_byte_to_cp(0xAD), 0x143);
    CHECK_EQ_INT(kiln_cp_to_byte(0x144), -1);
    CHECK_EQ_INT(kiln_cp_to_byte(0x20), -1);
    CHECK(kiln_unicode_is_white_space(0x3000) && kiln_unicode_is_white_space('\t'));
    CHECK(!kiln_unicode_is_white_space(0x180E) && !kiln_unicode_is_white_space(0x200B));
}

int main(void) {
    RUN(test_translate);
    RUN(test_utf8_and_bytemap);
    RUN(test_classes_match_oniguruma);
    return test_summary();
}

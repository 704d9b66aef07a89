/* fuzz_tokenizer_flux1.c - FLUX.1's tokenizers (CLIP-L BPE, T5 Unigram) and the precompiled-charsmap parser on
 * hostile input.
 *
 * The first byte picks: bit 0 how the text is read (0 raw bytes, mostly invalid UTF-8: must give KILN_E_INVALID;
 * 1 a list of code points, 3 bytes each, so the normalisers, regexes, grapheme walk and Viterbi see every script),
 * bit 1 the tokenizer (CLIP-L or T5), bit 2 charsmap mode: the bytes after a 2-byte length are a charsmap blob
 * (parsed; when it parses, the rest as code points is normalised with it: nothing may read outside the blob).
 * Checked on every input:
 *   - valid UTF-8 always encodes; every id is inside the vocabulary; the number of ids is bounded by the text
 *   - the FluxPipeline forms (CLIP 77; T5 512 and a fuzzed length) have exactly that length, the special tokens
 *     where transformers puts them and a mask of n_real ones
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "text/tok_internal.h"
#include "text/tokenizer.h"

static kiln_tokenizer *clip, *t5;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    kiln_err err = {0};
    if (kiln_tokenizer_load_kind(KILN_TOK_CLIP, NULL, &clip, &err) != KILN_OK) abort(); /* no data: nothing to do */
    if (kiln_tokenizer_load_kind(KILN_TOK_T5, NULL, &t5, &err) != KILN_OK) abort();
    return 0;
}

static size_t to_codepoints(const uint8_t *d, size_t n, char *out) {
    size_t k = 0;
    for (size_t i = 0; i + 3 <= n; i += 3) {
        uint32_t c = ((uint32_t)d[i] << 16 | (uint32_t)d[i + 1] << 8 | d[i + 2]) % 0x110000u;
        if (c >= 0xD800 && c <= 0xDFFF) c = d[i + 2]; /* keep some ASCII in the mix */
        if (c < 0x80) out[k++] = (char)c;
        else if (c < 0x800) {
            out[k++] = (char)(0xC0 | c >> 6);
            out[k++] = (char)(0x80 | (c & 63));
        } else if (c < 0x10000) {
            out[k++] = (char)(0xE0 | c >> 12);
            out[k++] = (char)(0x80 | ((c >> 6) & 63));
            out[k++] = (char)(0x80 | (c & 63));
        } else {
            out[k++] = (char)(0xF0 | c >> 18);
            out[k++] = (char)(0x80 | ((c >> 12) & 63));
            out[k++] = (char)(0x80 | ((c >> 6) & 63));
            out[k++] = (char)(0x80 | (c & 63));
        }
    }
    return k;
}

static void charsmap_mode(const uint8_t *d, size_t n) {
    if (n < 2) return;
    size_t bl = ((size_t)d[0] << 8 | d[1]) % (n - 1);
    kiln_charsmap *m;
    kiln_err err = {0};
    if (kiln_charsmap_parse(d + 2, bl, &m, &err) != KILN_OK) return;
    char *text = malloc((n - 2 - bl) * 2 + 4);
    if (!text) abort();
    size_t len = to_codepoints(d + 2 + bl, n - 2 - bl, text);
    char *out;
    size_t ol;
    if (kiln_charsmap_normalize(m, text, len, &out, &ol, &err) != KILN_OK) abort();
    if (kiln_utf8_invalid_at(out, ol) != ol) abort(); /* replacements are validated UTF-8 at parse time */
    kiln_free(out);
    kiln_charsmap_free(m);
    free(text);
}

static void check_form(const kiln_tokenizer *tok, const char *text, size_t len, kiln_tok_options opt) {
    kiln_err err = {0};
    kiln_tokens t;
    if (kiln_tokenizer_encode_prompt(tok, text, len, &opt, &t, &err) != KILN_OK) abort();
    size_t ones = 0;
    for (size_t i = 0; i < t.n; i++) ones += t.mask[i];
    if (t.n != opt.max_length || ones != t.n_real || t.n_real == 0 || t.n_real > t.n) abort();
    if (t.ids[t.n_real - 1] != tok->eos_id) abort();
    if (tok->bos_id >= 0 && t.ids[0] != tok->bos_id) abort();
    for (size_t i = t.n_real; i < t.n; i++)
        if (t.ids[i] != tok->pad_id) abort();
    if (t.truncated != (t.n_full > t.n)) abort();
    kiln_tokens_free(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0 || size > 1 << 16) return 0;
    if (data[0] & 4) {
        charsmap_mode(data + 1, size - 1);
        return 0;
    }
    const kiln_tokenizer *tok = data[0] & 2 ? t5 : clip;
    char *text = malloc(size * 2 + 4);
    if (!text) return 0;
    size_t len;
    if (data[0] & 1) len = to_codepoints(data + 1, size - 1, text);
    else {
        len = size - 1;
        memcpy(text, data + 1, len);
    }
    bool valid = kiln_utf8_invalid_at(text, len) == len;
    kiln_err err = {0};
    int32_t *ids;
    size_t n;
    kiln_status st = kiln_tokenizer_encode(tok, text, len, &ids, &n, &err);
    if (st != (valid ? KILN_OK : KILN_E_INVALID)) abort();
    if (st == KILN_OK) {
        /* CLIP: at most one id per normalised byte (lower-casing at most doubles the bytes); T5: the charsmap
         * expands a character to at most 18 code points (U+FDFA), each one piece, plus a U+2581 per word */
        if (n > (tok == clip ? 2 * len : 40 * len + 1)) abort();
        for (size_t i = 0; i < n; i++)
            if (ids[i] < 0 || (size_t)ids[i] >= kiln_tokenizer_vocab_size(tok)) abort();
        kiln_free(ids);
        if (tok == clip) check_form(tok, text, len, kiln_tok_options_flux1_clip());
        else {
            check_form(tok, text, len, kiln_tok_options_flux1_t5(512));
            check_form(tok, text, len, kiln_tok_options_flux1_t5(size > 1 ? (size_t)data[size - 1] % 32 + 1 : 8));
        }
    }
    free(text);
    return 0;
}

/* fuzz_tokenizer.c - the Qwen3 tokenizer on hostile input.
 *
 * The first byte picks how the rest is read: even = raw bytes (mostly invalid UTF-8: must give KILN_E_INVALID,
 * never a crash), odd = a list of random code points (3 bytes each, folded into U+0000..U+10FFFF minus
 * surrogates) so the regex, NFC and BPE see valid text from every script. Checked on every input:
 *   - valid UTF-8 always encodes; every id is inside the vocabulary
 *   - decoding the ids gives valid UTF-8, equal to the input when NFC cannot have changed it (byte-level BPE is
 *     lossless)
 *   - the klein template in all three padding modes gives the lengths and masks the header promises
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "text/tok_internal.h"
#include "text/tokenizer.h"

static kiln_tokenizer *tok;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    kiln_err err = {0};
    if (kiln_tokenizer_load_default(NULL, &tok, &err) != KILN_OK) abort(); /* no data: nothing to fuzz */
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0 || size > 1 << 16) return 0;
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
        for (size_t i = 0; i < n; i++)
            if (ids[i] < 0 || (size_t)ids[i] >= kiln_tokenizer_vocab_size(tok)) abort();
        char *back;
        size_t blen;
        if (kiln_tokenizer_decode(tok, ids, n, &back, &blen, &err) != KILN_OK) abort();
        bool nfc_stable = true; /* no byte >= 0xCC: NFC is the identity (see normalize.c) */
        for (size_t i = 0; i < len; i++) nfc_stable &= (unsigned char)text[i] < 0xCC;
        if (kiln_utf8_invalid_at(back, blen) != blen) abort();
        if (nfc_stable && (blen != len || memcmp(back, text, len))) abort();
        kiln_free(back);
        kiln_free(ids);

        size_t max_len = size > 1 ? (size_t)data[size - 1] % 64 + 1 : 8;
        for (int mode = KILN_PAD_NONE; mode <= KILN_PAD_COMFY; mode++) {
            kiln_tok_options opt = {KILN_TEMPLATE_KLEIN, (kiln_tok_padding)mode, max_len, -1};
            kiln_tokens t;
            if (kiln_tokenizer_encode_prompt(tok, text, len, &opt, &t, &err) != KILN_OK) abort();
            size_t ones = 0;
            for (size_t i = 0; i < t.n; i++) ones += t.mask[i];
            if (ones != t.n_real || t.n_real > t.n || t.n_real < (t.n_full < max_len ? t.n_full : 1)) abort();
            if (mode == KILN_PAD_DIFFUSERS && t.n != max_len) abort();
            if (mode == KILN_PAD_COMFY && (t.n < max_len || t.n_real != t.n_full)) abort();
            kiln_tokens_free(&t);
        }
    }
    free(text);
    return 0;
}

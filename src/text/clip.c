/* clip.c - the CLIP-L tokenizer (FLUX.1's `tokenizer/`, ComfyUI's clip_l): loading a vocab.json + merges.txt
 * folder the way transformers 5 CLIPTokenizer builds its `tokenizers` pipeline, and CLIP's normaliser.
 *
 * Facts (transformers 5.24 models/clip/tokenization_clip.py, checked against its backend's to_str()):
 *   normaliser    Sequence[NFC, Replace(Regex \s+ -> " "), Lowercase]
 *   pre-tokenizer Sequence[Split(CLIP_PATTERN, Removed, invert) = only the matches are kept,
 *                          ByteLevel(add_prefix_space false, use_regex true) = each match split by GPT2_PATTERN]
 *   model         BPE, end_of_word_suffix "</w>", unk <|endoftext|>, no dropout, no prefix
 *   added tokens  <|startoftext|> (normalized: matched in normalised text), <|endoftext|> (matched in raw text)
 *   post-process  RobertaProcessing: <|startoftext|> X <|endoftext|>; pad token <|endoftext|>
 * The BPE merge loop is the Qwen3 one (bpe.c); only the word's last symbol differs (byte + "</w>"). Vocabulary
 * entries are keyed by their GPT-2 form mapped back to bytes, "</w>" included, which is HF's own string identity.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "text/tok_internal.h"
#include "text/unicode_compat.h"

static const char CLIP_PATTERN[] =
    "<\\|startoftext\\|>|<\\|endoftext\\|>|'s|'t|'re|'ve|'m|'ll|'d|[\\p{L}]+|[\\p{N}]|[^\\s\\p{L}\\p{N}]+";
/* tokenizers' ByteLevel pre-tokenizer pattern (pre_tokenizers/byte_level.rs) */
static const char GPT2_PATTERN[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

#define BOS_TEXT "<|startoftext|>"
#define EOS_TEXT "<|endoftext|>"

/* A special-token entry of tokenizer_config.json / special_tokens_map.json: a string or {"content": ...}. */
static const char *token_text(const json_t *v) {
    if (json_is_string(v)) return json_string_value(v);
    if (json_is_object(v)) {
        const json_t *c = json_object_get(v, "content");
        if (json_is_string(c)) return json_string_value(c);
    }
    return NULL;
}

/* transformers reads the special tokens from tokenizer_config.json; kiln implements CLIP's own four and refuses a
 * folder that names others rather than tokenizing differently. */
static kiln_status check_config(const char *dir, kiln_err *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    char *buf;
    size_t len;
    kiln_status st = kiln_tok_read_file(path, 1 << 24, &buf, &len, err);
    if (st == KILN_E_NOT_FOUND) return KILN_OK; /* transformers' defaults are CLIP's */
    if (st != KILN_OK) return st;
    json_error_t je;
    json_t *cfg = json_loadb(buf, len, 0, &je);
    kiln_free(buf);
    if (!json_is_object(cfg)) {
        json_decref(cfg);
        return KILN_FAIL(err, KILN_E_FORMAT, "tokenizer_config.json: %s", je.text);
    }
    static const char *const keys[][2] = {
        {"bos_token", BOS_TEXT}, {"eos_token", EOS_TEXT}, {"pad_token", EOS_TEXT}, {"unk_token", EOS_TEXT}};
    st = KILN_OK;
    for (size_t i = 0; i < 4 && st == KILN_OK; i++) {
        const json_t *v = json_object_get(cfg, keys[i][0]);
        const char *t = v ? token_text(v) : keys[i][1];
        if (!t || strcmp(t, keys[i][1]))
            st = KILN_FAIL(err, KILN_E_UNSUPPORTED, "tokenizer_config.json: %s is not %s (not CLIP's)", keys[i][0],
                           keys[i][1]);
    }
    const json_t *cls = json_object_get(cfg, "tokenizer_class");
    if (st == KILN_OK && json_is_string(cls) && strncmp(json_string_value(cls), "CLIPTokenizer", 13))
        st = KILN_FAIL(err, KILN_E_UNSUPPORTED, "tokenizer_config.json: tokenizer_class %s is not CLIPTokenizer",
                       json_string_value(cls));
    json_decref(cfg);
    return st;
}

/* merges.txt: an optional "#version" first line, then "a b" per line. */
static kiln_status load_merges_txt(kiln_tokenizer *tok, char *text, size_t len, kiln_err *err) {
    size_t n = 0;
    for (size_t i = 0; i < len; i++) n += text[i] == '\n';
    KILN_TRY(kiln_tok_init_merges(tok, n + 1, err));
    size_t rank = 0, line = 0;
    for (char *p = text, *end = text + len; p < end; line++) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (l && p[l - 1] == '\r') l--;
        if (!(line == 0 && l >= 8 && !memcmp(p, "#version", 8)) && l > 0) {
            const char *sp = memchr(p, ' ', l);
            if (!sp || sp == p || sp + 1 == p + l || memchr(sp + 1, ' ', (size_t)(p + l - sp - 1)))
                return KILN_FAIL(err, KILN_E_FORMAT, "merges.txt line %zu is not two tokens separated by one space",
                                 line + 1);
            KILN_TRY(kiln_tok_add_merge(tok, p, (size_t)(sp - p), sp + 1, (size_t)(p + l - sp - 1), rank, err));
            rank++;
        }
        p = nl ? nl + 1 : end;
    }
    return KILN_OK;
}

static kiln_status load_added_clip(kiln_tokenizer *tok, size_t *used, kiln_err *err) {
    int32_t bos = kiln_tokenizer_token_id(tok, BOS_TEXT), eos = kiln_tokenizer_token_id(tok, EOS_TEXT);
    if (bos < 0 || eos < 0) return KILN_FAIL(err, KILN_E_FORMAT, "vocab.json lacks " BOS_TEXT " or " EOS_TEXT);
    json_t *list = json_pack("[{s:i,s:s,s:b,s:b},{s:i,s:s,s:b,s:b}]", "id", (json_int_t)bos, "content", BOS_TEXT,
                             "normalized", 1, "special", 1, "id", (json_int_t)eos, "content", EOS_TEXT, "normalized",
                             0, "special", 1);
    if (!list) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory for the added tokens");
    kiln_status st = kiln_tok_load_added(tok, list, used, err);
    json_decref(list);
    tok->bos_id = bos;
    tok->eos_id = eos;
    tok->pad_id = eos;
    return st;
}

kiln_status kiln_clip_load(kiln_tokenizer *tok, const char *dir, kiln_err *err) {
    char path[4096];
    KILN_TRY(check_config(dir, err));
    snprintf(path, sizeof path, "%s/vocab.json", dir);
    char *buf;
    size_t len;
    KILN_TRY(kiln_tok_read_file(path, (size_t)1 << 28, &buf, &len, err));
    json_error_t je;
    json_t *vocab = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    kiln_free(buf);
    if (!json_is_object(vocab)) {
        json_decref(vocab);
        return KILN_FAIL(err, KILN_E_FORMAT, "vocab.json: line %d: %s", je.line, je.text);
    }
    size_t n_ids = 0, pool = 64;
    const char *key;
    json_t *val;
    json_object_foreach(vocab, key, val) {
        json_int_t id = json_integer_value(val);
        if (id >= 0 && id < (1 << 24) && (size_t)id + 1 > n_ids) n_ids = (size_t)id + 1;
        pool += strlen(key);
    }
    kiln_status st = kiln_tok_alloc(tok, n_ids, pool, json_object_size(vocab), err);
    size_t used = 0;
    if (st == KILN_OK) st = kiln_tok_load_vocab(tok, vocab, &used, err);
    json_decref(vocab);
    KILN_TRY(st);

    for (int b = 0; b < 256; b++) { /* every byte must have its word-final form, or HF would emit <unk> */
        char w[5] = {(char)b, '<', '/', 'w', '>'};
        tok->eow_id[b] = kiln_vocab_lookup(tok, w, sizeof w);
        if (tok->eow_id[b] < 0)
            return KILN_FAIL(err, KILN_E_UNSUPPORTED, "vocab.json lacks the token for byte 0x%02x + </w>", b);
    }
    snprintf(path, sizeof path, "%s/merges.txt", dir);
    KILN_TRY(kiln_tok_read_file(path, (size_t)1 << 28, &buf, &len, err));
    st = load_merges_txt(tok, buf, len, err);
    kiln_free(buf);
    KILN_TRY(st);
    KILN_TRY(load_added_clip(tok, &used, err));
    tok->pool_len = used;
    tok->kind = KILN_TOK_CLIP;
    tok->normalizer = KILN_NORM_CLIP;
    KILN_TRY(kiln_regex_compile(CLIP_PATTERN, &tok->regex, &tok->regex_jit, err));
    KILN_TRY(kiln_regex_compile(GPT2_PATTERN, &tok->regex2, &tok->regex2_jit, err));
    return kiln_bpe_cache_init(&tok->cache, 1 << 14, err);
}

/* ---- the normaliser ---- */

static uint32_t hf_lower(uint32_t cp) {
    size_t lo = 0, hi = kiln_hf_lowercase_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < kiln_hf_lowercase[mid].from) hi = mid;
        else if (cp > kiln_hf_lowercase[mid].from) lo = mid + 1;
        else return kiln_hf_lowercase[mid].to;
    }
    return cp;
}

static size_t put_utf8(uint32_t c, char *o) {
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xC0 | c >> 6);
        o[1] = (char)(0x80 | (c & 63));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | c >> 12);
        o[1] = (char)(0x80 | ((c >> 6) & 63));
        o[2] = (char)(0x80 | (c & 63));
        return 3;
    }
    o[0] = (char)(0xF0 | c >> 18);
    o[1] = (char)(0x80 | ((c >> 12) & 63));
    o[2] = (char)(0x80 | ((c >> 6) & 63));
    o[3] = (char)(0x80 | (c & 63));
    return 4;
}

kiln_status kiln_clip_normalize(const char *text, size_t len, char **out, size_t *out_len, kiln_err *err) {
    *out = NULL;
    *out_len = 0;
    const char *nfc;
    size_t nlen;
    char *owned;
    KILN_TRY(kiln_nfc(text, len, &nfc, &nlen, &owned, err));
    /* lowercase grows a character by at most one byte (2 -> 3: U+023A -> U+2C65, U+0130 -> "i" U+0307) */
    size_t cap;
    if (!kiln_mul_size(nlen, 2, &cap) || !kiln_add_size(cap, 1, &cap)) {
        free(owned);
        return KILN_FAIL(err, KILN_E_LIMIT, "text too long to normalise");
    }
    char *res = kiln_malloc(cap);
    if (!res) {
        free(owned);
        return KILN_FAIL(err, KILN_E_NOMEM, "out of memory normalising %zu bytes", nlen);
    }
    size_t o = 0;
    bool in_space = false;
    for (size_t i = 0; i < nlen;) {
        uint32_t cp;
        i += (size_t)kiln_utf8_decode((const unsigned char *)nfc + i, &cp);
        if (kiln_cp_in(kiln_onig_white_space, kiln_onig_white_space_count, cp)) { /* \s+ -> " " */
            if (!in_space) res[o++] = ' ';
            in_space = true;
            continue;
        }
        in_space = false;
        if (cp == 0x130) { /* SpecialCasing: the one lower-case mapping to two code points */
            res[o++] = 'i';
            o += put_utf8(0x307, res + o);
        } else o += put_utf8(hf_lower(cp), res + o);
    }
    res[o] = '\0';
    free(owned);
    *out = res;
    *out_len = o;
    return KILN_OK;
}

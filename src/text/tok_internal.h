/* tok_internal.h - the tokenizer's insides, shared by the src/text/ files (not a public header).
 *
 * Everything is keyed by RAW bytes: the GPT-2 byte-to-unicode map is undone once at load time, so the vocabulary
 * maps the bytes " fox" (not the string "Ġfox") to its id, and BPE starts from one symbol per input byte. That is
 * equivalent to HF's byte-level pipeline (map every byte to its stand-in character, then look the characters up)
 * because the map is a bijection on 256 characters.
 */
#ifndef KILN_TEXT_TOK_INTERNAL_H
#define KILN_TEXT_TOK_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "base/utf8.h"
#include "text/tokenizer.h"

/* ---- byte map (bytemap.c) ---- */

/* GPT-2 bytes_to_unicode: the code point that stands for byte b. */
uint32_t kiln_byte_to_cp(uint8_t b);
/* Inverse: the byte a code point stands for, or -1 if cp is not one of the 256 stand-ins. */
int kiln_cp_to_byte(uint32_t cp);

/* ---- UTF-8: base/utf8.h validates and decodes; utf8.c adds White_Space ---- */

/* Unicode White_Space property (what Rust's char::is_whitespace tests). */
bool kiln_unicode_is_white_space(uint32_t cp);

/* ---- growable id buffer ---- */
typedef struct kiln_idbuf {
    int32_t *v;
    size_t n, cap;
} kiln_idbuf;
kiln_status kiln_idbuf_push(kiln_idbuf *b, int32_t id, kiln_err *err);
kiln_status kiln_idbuf_append(kiln_idbuf *b, const int32_t *ids, size_t n, kiln_err *err);

/* ---- hash maps ---- */

/* bytes -> id, open addressing; the bytes live in the tokenizer's piece pool. */
typedef struct kiln_strmap {
    int32_t *slots; /* id, or -1 for empty */
    size_t mask;    /* slots - 1 (a power of two) */
} kiln_strmap;

/* (left id, right id) -> (rank, merged id). */
typedef struct kiln_merge_slot {
    uint64_t key; /* (left << 32 | right) + 1; 0 = empty */
    uint32_t rank;
    int32_t id;
} kiln_merge_slot;
typedef struct kiln_mergemap {
    kiln_merge_slot *slots;
    size_t mask;
} kiln_mergemap;

uint64_t kiln_hash_bytes(const void *p, size_t n);

/* ---- the BPE cache (bpe.c): word bytes -> ids, a fixed table of slots, one lock ---- */
typedef struct kiln_bpe_cache_slot {
    uint64_t hash;
    uint16_t len, n; /* word length, ids */
    char *word;      /* len bytes followed by n int32 ids (one allocation); NULL when empty */
} kiln_bpe_cache_slot;
typedef struct kiln_bpe_cache {
    pthread_mutex_t lock;
    kiln_bpe_cache_slot *slots;
    size_t mask;
    bool lock_ok;
} kiln_bpe_cache;

typedef struct kiln_added_token {
    int32_t id;
    char *content; /* as matched: NFC-normalised when normalized is set */
    size_t len;
    char *orig; /* as written in the file */
    size_t orig_len;
    bool lstrip, rstrip, normalized, special;
} kiln_added_token;

typedef enum kiln_normalizer {
    KILN_NORM_NONE = 0,
    KILN_NORM_NFC,
    KILN_NORM_CLIP,        /* NFC, then every run of \s (Oniguruma's) -> one space, then lowercase (clip.c) */
    KILN_NORM_PRECOMPILED, /* SentencePiece's precompiled charsmap (charsmap.c) */
} kiln_normalizer;

typedef struct kiln_charsmap kiln_charsmap; /* charsmap.c */
typedef struct kiln_unigram kiln_unigram;   /* unigram.c */

struct kiln_tokenizer {
    /* pieces: piece_off[id]..piece_off[id]+piece_len[id] in pool (raw bytes); piece_len = -1 for an id that
     * has no token (a hole between the vocabulary and the added tokens) */
    char *pool;
    size_t pool_len;
    size_t *piece_off;
    int32_t *piece_len;
    size_t n_ids;          /* one past the largest id */
    kiln_strmap vocab;     /* raw bytes -> id, model vocabulary only */
    int32_t byte_id[256];  /* id of each single byte */
    kiln_mergemap merges;
    size_t n_merges;
    bool ignore_merges;

    kiln_added_token *added;
    size_t n_added;
    bool any_normalized_added;
    uint64_t added_first[4]; /* bitset of first bytes of non-normalised added tokens, a fast reject */

    kiln_tok_kind kind;
    kiln_normalizer normalizer;
    void *regex;      /* pcre2_code_8 * (opaque here so this header needs no pcre2.h) */
    bool regex_jit;   /* JIT compilation succeeded (interpreted matching otherwise) */

    /* CLIP (clip.c): words end in "</w>"; regex keeps only its matches, regex2 (ByteLevel's GPT-2 pattern)
     * splits each of them again */
    int32_t eow_id[256]; /* id of byte b + "</w>" */
    void *regex2;
    bool regex2_jit;

    /* the post-processor and padding (CLIP: BOS text EOS; T5: text EOS; Qwen3: nothing); -1 = none */
    int32_t bos_id, eos_id, pad_id;

    kiln_charsmap *charsmap; /* T5 normaliser */
    kiln_unigram *unigram;   /* T5 model */

    kiln_bpe_cache cache;
};

/* bpe.c: appends the ids of one pre-tokenized word (raw bytes). With eow (CLIP) the last byte starts as its
 * "</w>" token. */
kiln_status kiln_bpe_word(const kiln_tokenizer *tok, const char *word, size_t len, bool eow, kiln_idbuf *out,
                          kiln_err *err);
kiln_status kiln_bpe_cache_init(kiln_bpe_cache *c, size_t slots, kiln_err *err);
void kiln_bpe_cache_free(kiln_bpe_cache *c);

/* pretok.c: rewrites an Oniguruma pattern for PCRE2 (see pretok.c); *out is kiln_malloc'd. */
kiln_status kiln_pretok_translate(const char *pattern, char **out, kiln_err *err);
/* pretok.c: compiles the Split regex; splits normalised text and BPE-encodes every piece. */
kiln_status kiln_pretok_compile(kiln_tokenizer *tok, const char *pattern, kiln_err *err);
void kiln_pretok_free(kiln_tokenizer *tok);
/* pretok.c: compiles a pattern (Oniguruma syntax, translated) into *re; refuses patterns matching "". */
kiln_status kiln_regex_compile(const char *file_pattern, void **re, bool *jit, kiln_err *err);
/* pretok.c: CLIP's pre-tokenizer: the matches of tok->regex (gaps dropped), each split again by tok->regex2,
 * every piece BPE-encoded with "</w>". */
kiln_status kiln_pretok_encode_clip(const kiln_tokenizer *tok, const char *text, size_t len, kiln_idbuf *out,
                                    kiln_err *err);

/* tokenizer.c: the shared loading steps (vocab in GPT-2 form -> pieces; merges; added tokens). */
kiln_status kiln_tok_alloc(kiln_tokenizer *tok, size_t n_ids, size_t pool_bytes, size_t n_vocab, kiln_err *err);
kiln_status kiln_tok_load_vocab(kiln_tokenizer *tok, const void *json_vocab, size_t *pool_used, kiln_err *err);
kiln_status kiln_tok_load_merges(kiln_tokenizer *tok, const void *json_merges, kiln_err *err);
kiln_status kiln_tok_init_merges(kiln_tokenizer *tok, size_t n, kiln_err *err);
/* one merge "a b" (GPT-2 form) of rank r */
kiln_status kiln_tok_add_merge(kiln_tokenizer *tok, const char *a, size_t la, const char *b, size_t lb, size_t r,
                               kiln_err *err);
kiln_status kiln_tok_load_added(kiln_tokenizer *tok, const void *json_added, size_t *pool_used, kiln_err *err);
/* tokenizer.c: reads a whole (small) file: *buf is kiln_malloc'd and NUL-terminated. */
kiln_status kiln_tok_read_file(const char *path, size_t limit, char **buf, size_t *len, kiln_err *err);

/* clip.c: a CLIP folder (vocab.json + merges.txt) into tok. */
kiln_status kiln_clip_load(kiln_tokenizer *tok, const char *dir, kiln_err *err);
/* clip.c: HF's CLIP normaliser over valid UTF-8; *out is kiln_malloc'd. */
kiln_status kiln_clip_normalize(const char *text, size_t len, char **out, size_t *out_len, kiln_err *err);

/* unigram.c: the T5 tokenizer.json "model" (Unigram) and normaliser into tok; the T5 pre-tokenizer + Viterbi. */
kiln_status kiln_unigram_load(kiln_tokenizer *tok, const void *json_root, kiln_err *err);
void kiln_unigram_free(kiln_unigram *u);
kiln_status kiln_unigram_encode(const kiln_tokenizer *tok, const char *text, size_t len, kiln_idbuf *out,
                                kiln_err *err);

/* charsmap.c: parse a precompiled_charsmap blob (base64 already decoded); normalise valid UTF-8 with it.
 * *out is kiln_malloc'd. */
kiln_status kiln_charsmap_parse(const unsigned char *blob, size_t len, kiln_charsmap **out, kiln_err *err);
void kiln_charsmap_free(kiln_charsmap *m);
kiln_status kiln_charsmap_normalize(const kiln_charsmap *m, const char *text, size_t len, char **out,
                                    size_t *out_len, kiln_err *err);
/* charsmap.c: base64 (standard alphabet, '=' padding) -> bytes; *out kiln_malloc'd. */
kiln_status kiln_base64_decode(const char *s, size_t len, unsigned char **out, size_t *out_len, kiln_err *err);
kiln_status kiln_pretok_encode(const kiln_tokenizer *tok, const char *text, size_t len, kiln_idbuf *out,
                               kiln_err *err);

/* normalize.c: NFC of valid UTF-8 (a fast path returns the input when it cannot change). *out is either text
 * itself (then *owned = NULL) or a new buffer the caller frees with free() via *owned. */
kiln_status kiln_normalize(const kiln_tokenizer *tok, const char *text, size_t len, const char **out,
                           size_t *out_len, char **owned, kiln_err *err);

/* normalize.c: NFC alone, with kiln_normalize's contract. */
kiln_status kiln_nfc(const char *text, size_t len, const char **out, size_t *out_len, char **owned, kiln_err *err);

/* Lookup of raw bytes in the model vocabulary: id or -1. */
int32_t kiln_vocab_lookup(const kiln_tokenizer *tok, const char *s, size_t len);
/* Merge of two ids: true and rank/id when (left, right) is a merge. */
static inline bool kiln_merge_lookup(const kiln_tokenizer *tok, int32_t left, int32_t right, uint32_t *rank,
                                     int32_t *id) {
    uint64_t key = (((uint64_t)(uint32_t)left << 32) | (uint32_t)right) + 1;
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h >> 20) & tok->merges.mask;
    for (;;) {
        const kiln_merge_slot *s = &tok->merges.slots[i];
        if (s->key == key) {
            *rank = s->rank;
            *id = s->id;
            return true;
        }
        if (s->key == 0) return false;
        i = (i + 1) & tok->merges.mask;
    }
}

#endif

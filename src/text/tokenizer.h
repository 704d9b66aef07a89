/* tokenizer.h - the text encoders' tokenizers, id-for-id identical to HuggingFace: Qwen3's byte-level BPE
 * (FLUX.2 [klein]), CLIP-L's BPE with "</w>" and T5's SentencePiece Unigram (FLUX.1, see the end of this header).
 *
 *     kiln_err err = {0};
 *     kiln_tokenizer *tok;
 *     if (kiln_tokenizer_load_default(model_dir_or_NULL, &tok, &err) != KILN_OK) { ... err.msg ... }
 *
 *     // what FLUX.2 [klein] feeds Qwen3 (diffusers): template, truncate to 512, pad to 512, mask
 *     kiln_tok_options opt = kiln_tok_options_klein();        // template klein, diffusers padding, 512
 *     kiln_tokens t;
 *     if (kiln_tokenizer_encode_prompt(tok, prompt, strlen(prompt), &opt, &t, &err) != KILN_OK) { ... }
 *     // t.ids[0..t.n), t.mask[0..t.n) (1 real, 0 pad), t.n_real real tokens, t.truncated
 *     kiln_tokens_free(&t);
 *
 *     // plain ids, no template, no padding (what tokenizers' Tokenizer.encode(text).ids gives)
 *     int32_t *ids; size_t n;
 *     kiln_tokenizer_encode(tok, "a red fox", 9, &ids, &n, &err);   ... kiln_free(ids);
 *
 *     kiln_tokenizer_free(tok);
 *
 * What it does, in HF's order: added/special tokens (e.g. "<|im_end|>") are found in the RAW text first
 * (leftmost-longest, honouring each token's lstrip/rstrip/normalized flags from the file; single_word is
 * refused); each stretch between them is NFC-normalised (utf8proc), split by the pre-tokenizer regex (PCRE2,
 * UTF+UCP+JIT),
 * mapped to bytes and merged by rank-ordered BPE. Everything is read from tokenizer.json; a file that asks for
 * something this code does not implement (another model type, normaliser, pre-tokenizer, dropout, ...) is
 * refused at load with KILN_E_UNSUPPORTED rather than tokenized differently from HF.
 *
 * Input text is UTF-8 bytes with an explicit length (NUL bytes are ordinary characters). Invalid UTF-8
 * (bad sequences, overlongs, surrogates, code points > U+10FFFF) is refused with KILN_E_INVALID and a message
 * giving the byte offset: HF's Python API cannot receive such text at all (a Python str is always valid), so
 * there is no HF behaviour to copy, and silently replacing bytes would change the prompt.
 *
 * Known limits: NFC, \p{L}, \p{N} and \s follow tables measured from HF tokenizers 0.23 (Oniguruma with Unicode
 * 16 classes, NFC with Unicode 9 data); tools/reference/tokenizer/check_codepoints.py re-checks every code point
 * and test_text_unicode checks the classes against this machine's PCRE2.
 *
 * Thread-safety: a loaded tokenizer is immutable apart from its BPE cache, which has its own lock; any number
 * of threads may call the encode/decode/lookup functions on one tokenizer at once. load and free are not
 * concurrent with anything else on the same tokenizer.
 */
#ifndef KILN_TEXT_TOKENIZER_H
#define KILN_TEXT_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct kiln_tokenizer kiln_tokenizer;

/* Which tokenizer a loaded file is. */
typedef enum kiln_tok_kind {
    KILN_TOK_QWEN3 = 0, /* tokenizer.json, byte-level BPE (the Qwen2/Qwen3 layout) */
    KILN_TOK_CLIP,      /* vocab.json + merges.txt as transformers 5 CLIPTokenizer builds them */
    KILN_TOK_T5,        /* tokenizer.json with a Unigram model, as transformers 5 T5Tokenizer builds it */
} kiln_tok_kind;

/* Qwen3 facts used as defaults (spec 2.5-2.6). */
#define KILN_QWEN3_PAD_ID 151643   /* <|endoftext|>: pad (and eos of the base model) */
#define KILN_TOK_DEFAULT_MAX_LEN 512
/* Inputs longer than this many bytes (4 MiB, about a million tokens) are refused with KILN_E_LIMIT: no prompt is
 * near it, and one 4 MiB word already needs ~220 MiB of BPE work space. Servers cap prompts far lower. */
#define KILN_TOK_MAX_INPUT_BYTES ((size_t)4 << 20)

/* ---- loading ------------------------------------------------------------------------------------------- */

/* Loads a HuggingFace tokenizer.json. Errors: KILN_E_NOT_FOUND / KILN_E_IO (file), KILN_E_FORMAT (bad JSON,
 * missing fields, merges naming tokens not in the vocab), KILN_E_UNSUPPORTED (a feature this code does not do),
 * KILN_E_NOMEM. On success *out is owned by the caller: free with kiln_tokenizer_free. On failure *out = NULL. */
kiln_status kiln_tokenizer_load(const char *path, kiln_tokenizer **out, kiln_err *err);

/* Finds the tokenizer.json to use and writes its path into buf (cap bytes). Order:
 *   1. model_dir/tokenizer/tokenizer.json, then model_dir/tokenizer.json  (when model_dir is not NULL: a model
 *      folder's own tokenizer wins)
 *   2. $KILN_DATA_DIR/tokenizer/qwen3/tokenizer.json
 *   3. <dir of the running executable>/../data/tokenizer/qwen3/tokenizer.json,
 *      then <exe dir>/../share/kiln/tokenizer/qwen3/tokenizer.json
 *   4. KILN_SOURCE_DIR/data/tokenizer/qwen3/tokenizer.json (the source tree kiln was built from)
 * Errors: KILN_E_NOT_FOUND listing every place tried; KILN_E_LIMIT if a path does not fit in cap. */
kiln_status kiln_tokenizer_find(const char *model_dir, char *buf, size_t cap, kiln_err *err);

/* kiln_tokenizer_find + kiln_tokenizer_load. Same errors and ownership as those two. */
kiln_status kiln_tokenizer_load_default(const char *model_dir, kiln_tokenizer **out, kiln_err *err);

/* Loads a tokenizer folder: DIR/tokenizer.json (Qwen3 BPE or T5 Unigram, by its model type), else
 * DIR/vocab.json + DIR/merges.txt (CLIP). A path to a tokenizer.json file works too. Errors as kiln_tokenizer_load. */
kiln_status kiln_tokenizer_load_dir(const char *dir, kiln_tokenizer **out, kiln_err *err);

/* "qwen3" / "clip-l" / "t5" -> kind; false for anything else. kiln_tok_kind_name is the inverse. */
bool kiln_tok_kind_parse(const char *name, kiln_tok_kind *out);
const char *kiln_tok_kind_name(kiln_tok_kind kind);

/* The shipped (or a model folder's) tokenizer of a kind. With model_dir (a diffusers folder) its own copy wins:
 * qwen3 -> model_dir/tokenizer, clip-l -> model_dir/tokenizer, t5 -> model_dir/tokenizer_2; then
 * $KILN_DATA_DIR/tokenizer/<name>, <exe dir>/../data/tokenizer/<name>, <exe dir>/../share/kiln/tokenizer/<name>,
 * KILN_SOURCE_DIR/data/tokenizer/<name>. A model folder whose tokenizer is of another kind is refused
 * (KILN_E_FORMAT). Errors: KILN_E_NOT_FOUND listing the places tried; as kiln_tokenizer_load_dir. */
kiln_status kiln_tokenizer_load_kind(kiln_tok_kind kind, const char *model_dir, kiln_tokenizer **out,
                                     kiln_err *err);

kiln_tok_kind kiln_tokenizer_kind(const kiln_tokenizer *tok);

/* Frees everything. NULL is a no-op. */
void kiln_tokenizer_free(kiln_tokenizer *tok);

/* ---- encoding ------------------------------------------------------------------------------------------ */

/* Plain encoding: exactly tokenizers' `Tokenizer.encode(text, add_special_tokens=False).ids` (added tokens
 * matched, no template, no post-processor tokens, no padding, no truncation; for Qwen3 that is encode(text)). text may be NULL when len is 0. On success *ids (kiln_malloc'd, free with kiln_free;
 * non-NULL even when *n is 0) holds *n ids. Errors: KILN_E_INVALID (invalid UTF-8, with byte offset),
 * KILN_E_LIMIT (len > KILN_TOK_MAX_INPUT_BYTES), KILN_E_NOMEM. On failure *ids = NULL, *n = 0. */
kiln_status kiln_tokenizer_encode(const kiln_tokenizer *tok, const char *text, size_t len, int32_t **ids,
                                  size_t *n, kiln_err *err);

typedef enum kiln_tok_template {
    KILN_TEMPLATE_NONE = 0, /* the prompt as is */
    KILN_TEMPLATE_KLEIN,    /* "<|im_start|>user\n{PROMPT}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
                               (spec 2.4; the whole string is encoded at once, as transformers does) */
} kiln_tok_template;

typedef enum kiln_tok_padding {
    KILN_PAD_NONE = 0,  /* no padding, no truncation: t.n == t.n_real */
    KILN_PAD_DIFFUSERS, /* transformers padding="max_length", truncation=True: exactly max_length tokens;
                           longer sequences lose their TAIL (template end included), right padding */
    KILN_PAD_COMFY,     /* ComfyUI: right-pad to at least max_length, never truncate. (ComfyUI's tokenizer also
                           parses "(text:1.2)" emphasis syntax before tokenizing; kiln does not: the prompt is
                           tokenized literally, as diffusers does.) */
} kiln_tok_padding;

typedef struct kiln_tok_options {
    kiln_tok_template template_kind;
    kiln_tok_padding padding;
    size_t max_length; /* 0 means KILN_TOK_DEFAULT_MAX_LEN */
    int32_t pad_id;    /* < 0 means the tokenizer's pad token (Qwen3 151643, CLIP 49407, T5 0) */
} kiln_tok_options;

/* FLUX.1's CLIP input as diffusers' FluxPipeline builds it: padding="max_length", max_length=77, truncation:
 * <|startoftext|> + at most 75 tokens + <|endoftext|>, padded with <|endoftext|> to 77. */
kiln_tok_options kiln_tok_options_flux1_clip(void);
/* FLUX.1's T5 input: padding="max_length", max_length=max_sequence_length (512 dev, 256 schnell),
 * truncation: at most max_length-1 tokens + </s>, padded with <pad> (0). */
kiln_tok_options kiln_tok_options_flux1_t5(size_t max_sequence_length);

/* The FLUX.2 [klein] text-encoder input as diffusers builds it: klein template, diffusers padding, 512. */
kiln_tok_options kiln_tok_options_klein(void);

/* "klein" / "none" -> template; false for anything else. */
bool kiln_tok_template_parse(const char *name, kiln_tok_template *out);

typedef struct kiln_tokens {
    int32_t *ids;   /* n ids (kiln_malloc'd) */
    uint8_t *mask;  /* n attention-mask bytes: 1 for a real token, 0 for padding */
    size_t n;       /* total length including padding */
    size_t n_real;  /* real (unpadded) tokens = number of 1s in mask, after truncation */
    size_t n_full;  /* real tokens before truncation (== n_real unless truncated) */
    bool truncated; /* KILN_PAD_DIFFUSERS cut the sequence */
} kiln_tokens;

/* Template + encode + the post-processor's special tokens (CLIP BOS/EOS, T5 EOS; none for Qwen3) +
 * pad/truncate (KILN_PAD_DIFFUSERS cuts the text so that the special tokens still fit, as transformers does).
 * The klein template and KILN_PAD_COMFY are for Qwen3 only (KILN_E_UNSUPPORTED otherwise: ComfyUI chunks CLIP
 * and T5 prompts its own way, which kiln does not do yet). Errors: as kiln_tokenizer_encode, plus KILN_E_INVALID for a bad option
 * (unknown template/padding, max_length > 1<<20). On success the caller owns *out: free with kiln_tokens_free.
 * On failure *out is zeroed. */
kiln_status kiln_tokenizer_encode_prompt(const kiln_tokenizer *tok, const char *prompt, size_t len,
                                         const kiln_tok_options *opt, kiln_tokens *out, kiln_err *err);

/* Frees ids and mask and zeroes *t. NULL or zeroed is fine. */
void kiln_tokens_free(kiln_tokens *t);

/* ---- decoding and lookup ------------------------------------------------------------------------------- */

/* Decoding is HF's only for Qwen3; for CLIP and T5 it concatenates the pieces (CLIP's "</w>" kept, T5's "U+2581"
 * kept), for display.
 *
 * The raw bytes of token id (the GPT-2 byte map undone, so "Ġfox" gives " fox"; an added token gives its
 * content). A piece can be part of a UTF-8 sequence. Returns NULL (and *len = 0) for an id that is not in the
 * vocabulary. The pointer lives as long as tok. len may be NULL. */
const char *kiln_tokenizer_piece(const kiln_tokenizer *tok, int32_t id, size_t *len);

/* Concatenates the pieces of ids into a string, replacing invalid UTF-8 with U+FFFD as HF's ByteLevel decoder
 * does (decode with skip_special_tokens = false). *out is kiln_malloc'd and NUL-terminated (free with kiln_free);
 * *out_len (may be NULL) is its length, which counts NUL characters the text itself contains.
 * Errors: KILN_E_INVALID (an id not in the vocabulary), KILN_E_NOMEM; then *out = NULL. */
kiln_status kiln_tokenizer_decode(const kiln_tokenizer *tok, const int32_t *ids, size_t n, char **out,
                                  size_t *out_len, kiln_err *err);

/* Id of an exact token string (vocab entry in its GPT-2 form, e.g. "Ġfox", or an added token's content), or
 * -1 if there is none. */
int32_t kiln_tokenizer_token_id(const kiln_tokenizer *tok, const char *token);

/* One past the largest id (151669 for Qwen3; the model's embedding may have more rows). */
size_t kiln_tokenizer_vocab_size(const kiln_tokenizer *tok);

/* CLIP-L (KILN_TOK_CLIP): transformers 5's CLIPTokenizer - normaliser NFC, \s+ -> " ", lowercase (HF's
 * Lowercase, a measured table); pre-tokenizer Split(CLIP's pattern, matches kept) + ByteLevel (GPT-2 pattern);
 * BPE whose last symbol of each word carries "</w>"; <|endoftext|> matched in the raw text, <|startoftext|> in
 * the normalised text (as the transformers build declares them); post-processor <|startoftext|> X <|endoftext|>.
 * ftfy is not run (the fast tokenizer does not).
 *
 * T5 (KILN_TOK_T5): transformers 5's T5Tokenizer - it rebuilds the pipeline whatever tokenizer.json says: the
 * file's Unigram vocabulary and scores and its Precompiled charsmap (nmt-NFKC, applied per grapheme cluster as HF
 * does) are used; the file's other normalisers (Strip, Replace) and its Metaspace(prepend first) are NOT, because
 * transformers replaces them with WhitespaceSplit + Metaspace(U+2581, prepend always, split). Viterbi over the
 * scores (ties to the longest piece), consecutive unknown characters fused into one <unk>; post-processor X </s>. */

#endif

/* comfy_prompt.h - ComfyUI's prompt tokenisation for FLUX.1's encoders (comfy/sd1_clip.py SDTokenizer
 * tokenize_with_weights with comfy/text_encoders/flux.py's settings), which kiln's ComfyUI graphs use instead of
 * diffusers' (kiln generate and the OpenAI route keep diffusers').
 *
 *     kiln_comfy_tokens t5, clip;
 *     kiln_comfy_tokenize(tok_t5, KILN_COMFY_T5XXL, prompt, strlen(prompt), &t5, &err);    // >= 256 ids
 *     kiln_comfy_tokenize(tok_clip, KILN_COMFY_CLIP_L, prompt, strlen(prompt), &clip, &err); // 77 ids
 *     ... t5.ids[i], t5.weights[i] ...
 *     kiln_comfy_tokens_free(&t5);
 *
 * What ComfyUI does (read for facts):
 *   - weights: "\(" and "\)" are literal parentheses; a "(...)" group multiplies its text's weight by 1.1 per
 *     level, "(text:w)" sets it to float(w) (the last ':' of the group; when w is not a Python float the 1.1 stays
 *     and ":w" stays text); an unclosed "(" or a stray ")" is ordinary text as parse_parentheses leaves it;
 *   - every weighted segment is tokenized on its own (tokenizer(segment) without its start and end tokens);
 *     "embedding:" names (textual inversion) are kept as text here: kiln has no embeddings folder;
 *   - T5-XXL (T5XXLTokenizer: no start token, max_length 99999999, min_length 256, pad 0): all tokens, then
 *     </s>, then <pad> up to 256 in all: never truncated, longer prompts give longer sequences;
 *   - CLIP-L (SDTokenizer: max_length 77, pad_to_max_length, padded with its end token): chunks of 77, each
 *     <|startoftext|> + tokens + <|endoftext|>, a segment of fewer than 8 tokens that does not fit starting the
 *     next chunk whole; FLUX.1 reads only the first chunk's pooled output (encode_token_weights' first_pooled),
 *     so only the first chunk is returned, and its weights do not matter (they scale the hidden states FLUX.1
 *     does not read; the T5 weights do: kiln_comfy_tokens.weights).
 */
#ifndef KILN_TEXT_COMFY_PROMPT_H
#define KILN_TEXT_COMFY_PROMPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "text/tokenizer.h"

typedef enum kiln_comfy_encoder {
    KILN_COMFY_T5XXL = 0,
    KILN_COMFY_CLIP_L,
} kiln_comfy_encoder;

#define KILN_COMFY_T5_MIN_LENGTH 256
#define KILN_COMFY_CLIP_LENGTH 77

typedef struct kiln_comfy_tokens {
    int32_t *ids;      /* n ids (kiln_malloc'd) */
    double *weights;   /* n weights, as ComfyUI's Python floats (1 for the special and pad tokens) */
    size_t n;
    size_t n_real;     /* the prompt's tokens (without start, end and padding) in this sequence */
    size_t n_dropped;  /* CLIP-L: tokens past the first chunk (FLUX.1 does not read them); T5: 0 */
    bool weighted;     /* some weight is not 1 */
} kiln_comfy_tokens;

/* One weighted piece of a prompt as ComfyUI's token_weights returns it (text unescaped). */
typedef struct kiln_comfy_segment {
    char *text;
    size_t len;
    double weight;
} kiln_comfy_segment;

/* ComfyUI's escape_important + token_weights + unescape_important: *segs (kiln_malloc'd, each text too; free
 * with kiln_comfy_segments_free) holds *n segments in order. Errors: KILN_E_NOMEM, KILN_E_LIMIT for more than
 * KILN_TOK_MAX_INPUT_BYTES of text. */
kiln_status kiln_comfy_parse_weights(const char *text, size_t len, kiln_comfy_segment **segs, size_t *n,
                                     kiln_err *err);
void kiln_comfy_segments_free(kiln_comfy_segment *segs, size_t n);

/* The encoder's input for text (see above). tok must be that encoder's tokenizer (KILN_TOK_T5 / KILN_TOK_CLIP).
 * Errors: as kiln_tokenizer_encode, KILN_E_INVALID for a tokenizer of the other kind. On failure *out is zeroed. */
kiln_status kiln_comfy_tokenize(const kiln_tokenizer *tok, kiln_comfy_encoder enc, const char *text, size_t len,
                                kiln_comfy_tokens *out, kiln_err *err);
void kiln_comfy_tokens_free(kiln_comfy_tokens *t);

#endif

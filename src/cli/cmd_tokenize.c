/* cmd_tokenize.c - `kiln tokenize`: text -> token ids (Qwen3, CLIP-L or T5), as the text encoder will see them.
 *
 *   kiln tokenize "a red fox"                        plain Qwen3 ids (tokenizers' Tokenizer.encode)
 *   kiln tokenize --tokenizer clip-l --pad "..."      FLUX.1's CLIP input: BOS/EOS, truncated/padded to 77
 *   kiln tokenize --tokenizer t5 --pad "..."          FLUX.1 [dev]'s T5 input (512; --max-length 256: schnell)
 *   kiln tokenize --template klein "a red fox"        klein template, truncated/padded to 512 (diffusers)
 *   kiln tokenize --template klein --comfy "..."      ComfyUI: pad to at least 512, never truncate
 *   echo "a red fox" | kiln tokenize                  text from stdin (all of it, newline included)
 *   kiln tokenize --jsonl < lines.jsonl               one JSON string per line in, one id list per line out
 *   kiln tokenize --bench FILE                        tokens per second encoding FILE (median of --repeat runs)
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/status.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "text/tokenizer.h"

static const char synopsis[] =
    "usage: kiln tokenize [options] [\"text\"]\n"
    "  Prints the token ids of text (or of stdin when no text is given); CLIP-L and T5 ids include the\n"
    "  special tokens transformers adds (<|startoftext|> ... <|endoftext|>, ... </s>).\n\n";

static bool opt_template(void *ctx, const char *v, char *why, size_t cap) {
    if (kiln_tok_template_parse(v, &((kiln_tok_options *)ctx)->template_kind)) return true;
    snprintf(why, cap, "is not a template (klein, none)");
    return false;
}

/* Reads all of f (at most KILN_TOK_MAX_INPUT_BYTES + 1 bytes, so the limit check still fires). */
static char *read_all(FILE *f, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = kiln_malloc(cap);
    while (buf) {
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (n < cap) break;
        if (cap > KILN_TOK_MAX_INPUT_BYTES) break;
        char *nb = kiln_realloc(buf, cap * 2);
        if (!nb) {
            kiln_free(buf);
            return NULL;
        }
        buf = nb;
        cap *= 2;
    }
    *len = n;
    return buf;
}

/* A piece for display: printable UTF-8 as is, other bytes as \xNN, whitespace escaped. */
static void print_piece(const char *p, size_t len) {
    putchar('"');
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '\n') fputs("\\n", stdout);
        else if (c == '\r') fputs("\\r", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else if (c >= 0x80) {
            /* a complete UTF-8 sequence prints as is; a fragment of one as \xNN */
            size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
            bool ok = need && i + need <= len;
            for (size_t k = 1; ok && k < need; k++) ok = ((unsigned char)p[i + k] & 0xC0) == 0x80;
            if (ok) {
                fwrite(p + i, 1, need, stdout);
                i += need - 1;
            } else printf("\\x%02x", c);
        } else putchar(c);
    }
    putchar('"');
}

static void print_ids(const int32_t *ids, size_t n) {
    for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    putchar('\n');
}

static int run_jsonl(const kiln_tokenizer *tok, const kiln_tok_options *opt, bool templated) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int rc = 0;
    size_t lineno = 0;
    while ((len = getline(&line, &cap, stdin)) > 0) {
        lineno++;
        json_error_t je;
        json_t *j = json_loadb(line, (size_t)len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        if (!json_is_string(j)) {
            fprintf(stderr, "kiln tokenize: line %zu: not a JSON string\n", lineno);
            json_decref(j);
            rc = 2;
            printf("error\n");
            continue;
        }
        kiln_err err = {0};
        kiln_tokens t;
        kiln_tok_options o = *opt;
        if (!templated) o.template_kind = KILN_TEMPLATE_NONE;
        if (kiln_tokenizer_encode_prompt(tok, json_string_value(j), json_string_length(j), &o, &t, &err) != KILN_OK) {
            fprintf(stderr, "kiln tokenize: line %zu: %s\n", lineno, err.msg);
            printf("error\n");
            rc = kiln_status_exit_code(err.code);
        } else {
            print_ids(t.ids, t.n);
            kiln_tokens_free(&t);
        }
        json_decref(j);
    }
    free(line);
    return rc;
}

/* CPU seconds of this process: on a shared machine a steadier measure than wall time (both are printed). */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int run_bench(const kiln_tokenizer *tok, const char *path, int repeat) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "kiln tokenize: %s: cannot open\n", path);
        return 3;
    }
    size_t len;
    char *text = read_all(f, &len);
    fclose(f);
    if (!text) {
        fprintf(stderr, "kiln tokenize: out of memory reading %s\n", path);
        return 6;
    }
    /* one line = one prompt, as a server sees them; the same split as tools/reference/tokenizer/speed.py */
    double times[64], cpu[64];
    size_t tokens = 0, lines = 0;
    if (repeat > 64) repeat = 64;
    int rc = 0;
    for (int r = 0; r < repeat && !rc; r++) {
        double t0 = kiln_clock_s(), c0 = cpu_s();
        size_t ntok = 0, nl = 0;
        for (size_t at = 0; at < len;) {
            const char *nlp = memchr(text + at, '\n', len - at);
            size_t end = nlp ? (size_t)(nlp - text) : len;
            int32_t *ids;
            size_t n;
            kiln_err err = {0};
            if (kiln_tokenizer_encode(tok, text + at, end - at, &ids, &n, &err) != KILN_OK) {
                fprintf(stderr, "kiln tokenize: %s line %zu: %s\n", path, nl + 1, err.msg);
                rc = kiln_status_exit_code(err.code);
                break;
            }
            kiln_free(ids);
            ntok += n;
            nl++;
            at = end + 1;
        }
        times[r] = kiln_clock_s() - t0;
        cpu[r] = cpu_s() - c0;
        tokens = ntok;
        lines = nl;
    }
    kiln_free(text);
    if (rc) return rc;
    qsort(times, (size_t)repeat, sizeof times[0], cmp_double);
    qsort(cpu, (size_t)repeat, sizeof cpu[0], cmp_double);
    double med = times[repeat / 2], cmed = cpu[repeat / 2];
    printf("kiln tokenize --bench %s: %zu bytes, %zu lines, %zu tokens, median %.4f s of %d runs (min %.4f), "
           "%.0f tokens/s; median CPU %.4f s, %.0f tokens per CPU second\n",
           path, len, lines, tokens, med, repeat, times[0], tokens / med, cmed, tokens / cmed);
    return 0;
}

int kiln_cmd_tokenize(int argc, char **argv) {
    kiln_tok_options opt = {KILN_TEMPLATE_NONE, KILN_PAD_DIFFUSERS, 0, -1};
    bool verbose = false, jsonl = false, no_pad = false, comfy = false, pad = false;
    const char *text = NULL, *tok_arg = NULL, *model_dir = NULL, *bench = NULL;
    int repeat = 7;
    int max_length = 0;
    const kiln_opt opts[] = {
        KILN_OPT_STR("--tokenizer", NULL, "NAME|PATH",
                     "qwen3 (default), clip-l or t5 (the shipped data, or --model's own), or a\n"
                     "tokenizer.json / tokenizer folder (its kind detected)", &tok_arg),
        KILN_OPT_STR("--model", NULL, "DIR", "a model folder whose own tokenizer wins (FLUX.1: tokenizer/, tokenizer_2/)",
                     &model_dir),
        KILN_OPT_CALL("--template", NULL, "klein|none",
                      "Qwen3: wrap in the FLUX.2 [klein] chat template (default none); with klein the\n"
                      "sequence is truncated/padded to --max-length like diffusers", opt_template, &opt),
        KILN_OPT_FLAG("--pad", NULL,
                      "truncate/pad to --max-length as diffusers does (CLIP-L default 77, otherwise 512;\n"
                      "T5 256 = FLUX.1 schnell)", &pad),
        KILN_OPT_FLAG("--comfy", NULL, "Qwen3 ComfyUI padding: pad to at least --max-length, never truncate", &comfy),
        KILN_OPT_FLAG("--no-pad", NULL, "no padding or truncation", &no_pad),
        KILN_OPT_INT("--max-length", NULL, "N", "padding length", &max_length, 1, 1 << 20),
        KILN_OPT_FLAG("--verbose", "-v", "one line per token: position, id, piece", &verbose),
        KILN_OPT_FLAG("--jsonl", NULL, "read one JSON string per line, print one line of ids per input line", &jsonl),
        KILN_OPT_STR("--bench", NULL, "FILE", "encode FILE --repeat times, print the median tokens per second", &bench),
        KILN_OPT_INT("--repeat", NULL, "N", "repetitions for --bench (default 7)", &repeat, 1, 64),
    };
    const kiln_opts spec = {.cmd = "kiln tokenize", .synopsis = synopsis, .opts = opts, .n = KILN_N(opts),
                            .pos_name = "text (quote it)", .max_pos = 1};
    int prc = kiln_opts_parse(&spec, argc, argv, &text, NULL);
    if (prc != KILN_OPTS_CONTINUE) return prc;
    if (max_length) opt.max_length = (size_t)max_length;
    /* padding applies to templated encodings and --pad; plain ids are HF's encode() unless asked otherwise */
    if (no_pad || (opt.template_kind == KILN_TEMPLATE_NONE && !comfy && !pad)) opt.padding = KILN_PAD_NONE;
    if (comfy && !no_pad) opt.padding = KILN_PAD_COMFY;

    kiln_err err = {0};
    kiln_tokenizer *tok;
    kiln_tok_kind kind = KILN_TOK_QWEN3;
    kiln_status st = tok_arg && !kiln_tok_kind_parse(tok_arg, &kind) ? kiln_tokenizer_load_dir(tok_arg, &tok, &err)
                                                                     : kiln_tokenizer_load_kind(kind, model_dir, &tok, &err);
    if (st != KILN_OK) {
        fprintf(stderr, "kiln tokenize: %s\n", err.msg);
        return kiln_status_exit_code(st);
    }
    if (!opt.max_length) opt.max_length = kiln_tokenizer_kind(tok) == KILN_TOK_CLIP ? 77 : KILN_TOK_DEFAULT_MAX_LEN;
    int rc = 0;
    if (bench) rc = run_bench(tok, bench, repeat);
    else if (jsonl) rc = run_jsonl(tok, &opt, opt.template_kind != KILN_TEMPLATE_NONE);
    else {
        size_t len;
        char *owned = NULL;
        if (text) len = strlen(text);
        else {
            owned = read_all(stdin, &len);
            if (!owned) {
                fprintf(stderr, "kiln tokenize: out of memory reading stdin\n");
                kiln_tokenizer_free(tok);
                return 6;
            }
            text = owned;
        }
        kiln_tokens t;
        st = kiln_tokenizer_encode_prompt(tok, text, len, &opt, &t, &err);
        kiln_free(owned);
        if (st != KILN_OK) {
            fprintf(stderr, "kiln tokenize: %s\n", err.msg);
            rc = kiln_status_exit_code(st);
        } else if (!verbose) {
            print_ids(t.ids, t.n);
        } else {
            for (size_t i = 0; i < t.n_real; i++) {
                size_t pl;
                const char *p = kiln_tokenizer_piece(tok, t.ids[i], &pl);
                printf("%zu\t%d\t", i, t.ids[i]);
                print_piece(p, pl);
                putchar('\n');
            }
            if (t.n > t.n_real) printf("%zu..%zu\t%d\tpadding (mask 0)\n", t.n_real, t.n - 1, t.ids[t.n_real]);
            printf("# %zu real tokens%s, %zu in all%s\n", t.n_real, t.truncated ? " after truncation" : "", t.n,
                   t.truncated ? " (the prompt was truncated as diffusers does)" : "");
        }
        kiln_tokens_free(&t);
    }
    kiln_tokenizer_free(tok);
    return rc;
}

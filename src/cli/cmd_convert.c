/* cmd_convert.c - `kiln convert IN OUT --to FORMAT [--force]`: a bf16 safetensors checkpoint as GGUF (Q8_0, Q4_K,
 * F16) or as fp8 (e4m3, ComfyUI/BFL layout) safetensors; what is converted how: io/ckpt_convert.h. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/commands.h"
#include "io/ckpt_convert.h"
#include "tensor/quant.h"

/* The options: one table gives the parser and the help. */
typedef struct option {
    const char *name, *arg, *help;
} option;

static const option options[] = {
    {"--to", "FORMAT", "gguf-q8_0 | gguf-q4_k | gguf-f16 | fp8-e4m3 (required)"},
    {"--force", NULL, "replace OUT if it exists"},
    {"--help", NULL, "this text"},
};
#define N_OPTIONS (sizeof options / sizeof options[0])

static void usage(FILE *out) {
    fprintf(out, "usage: kiln convert IN OUT --to FORMAT [--force]\n\n"
                 "  IN        a bf16/f16/f32 .safetensors checkpoint (file, index or folder)\n"
                 "  OUT       the file to write (atomically: nothing is left there if conversion fails)\n");
    for (size_t i = 0; i < N_OPTIONS; i++)
        fprintf(out, "  %-9s %-7s %s\n", options[i].name, options[i].arg ? options[i].arg : "", options[i].help);
    fprintf(out, "\nThe 2-D .weight tensors are quantised; other tensors are kept exactly. In GGUF a weight whose rows "
                 "are not whole blocks\nfalls back to Q8_0, then to its own float type.\n");
}

static const option *find_option(const char *a) {
    for (size_t i = 0; i < N_OPTIONS; i++)
        if (!strcmp(a, options[i].name)) return &options[i];
    return NULL;
}

int kiln_cmd_convert(int argc, char **argv) {
    const char *pos[2] = {NULL, NULL}, *to = NULL;
    int n_pos = 0;
    bool force = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const option *o = a[0] == '-' && a[1] ? find_option(a) : NULL;
        if (a[0] == '-' && a[1] && !o) {
            fprintf(stderr, "kiln convert: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (o && o->arg && i + 1 >= argc) {
            fprintf(stderr, "kiln convert: %s needs %s\n", o->name, o->arg);
            return 2;
        }
        if (!o) {
            if (n_pos == 2) {
                fprintf(stderr, "kiln convert: one input and one output, not '%s' too\n", a);
                return 2;
            }
            pos[n_pos++] = a;
        } else if (!strcmp(o->name, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(o->name, "--force")) force = true;
        else if (!strcmp(o->name, "--to")) to = argv[++i];
    }
    if (n_pos != 2 || !to) {
        fprintf(stderr, "kiln convert: IN, OUT and --to are required\n");
        usage(stderr);
        return 2;
    }
    kiln_conv_format fmt;
    if (!kiln_conv_format_parse(to, &fmt)) {
        fprintf(stderr, "kiln convert: --to '%s' is not one of gguf-q8_0, gguf-q4_k, gguf-f16, fp8-e4m3\n", to);
        return 2;
    }
    struct stat st;
    if (!force && stat(pos[1], &st) == 0) {
        fprintf(stderr, "kiln convert: %s exists (--force replaces it)\n", pos[1]);
        return kiln_status_exit_code(KILN_E_INVALID);
    }
    kiln_conv_report rep;
    kiln_err err = {0};
    if (kiln_ckpt_convert(pos[0], pos[1], fmt, &rep, &err) != KILN_OK) {
        fprintf(stderr, "kiln convert: %s\n", err.msg);
        return kiln_status_exit_code(err.code);
    }
    printf("%s: %zu tensors, %llu -> %llu bytes (%s):", pos[1], rep.tensors, rep.in_bytes, rep.out_bytes,
           kiln_conv_format_name(fmt));
    if (fmt == KILN_CONV_FP8_E4M3) printf(" e4m3 x %zu, kept x %zu", rep.per_type[1], rep.per_type[0]);
    else
        for (uint32_t t = 0; t < 64; t++)
            if (rep.per_type[t]) printf(" %s x %zu", kiln_qtype_get(t)->name, rep.per_type[t]);
    printf("\n");
    return 0;
}

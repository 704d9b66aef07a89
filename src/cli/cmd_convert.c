/* cmd_convert.c - `kiln convert IN OUT --to FORMAT [--force]`: a bf16 safetensors checkpoint as GGUF (Q8_0, Q4_K,
 * F16) or as fp8 (e4m3, ComfyUI/BFL layout) safetensors; what is converted how: io/ckpt_convert.h. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "io/ckpt_convert.h"
#include "tensor/quant.h"

static const char synopsis[] =
    "usage: kiln convert IN OUT --to FORMAT [--force]\n\n"
    "  IN                      a bf16/f16/f32 .safetensors checkpoint (file, index or folder)\n"
    "  OUT                     the file to write (atomically: nothing is left there if conversion fails)\n";

int kiln_cmd_convert(int argc, char **argv) {
    const char *pos[2] = {NULL, NULL}, *to = NULL;
    int n_pos = 0;
    bool force = false;
    const kiln_opt opts[] = {
        KILN_OPT_STR("--to", NULL, "FORMAT", "gguf-q8_0 | gguf-q4_k | gguf-f16 | fp8-e4m3 (required)", &to),
        KILN_OPT_FLAG("--force", NULL, "replace OUT if it exists", &force),
    };
    const kiln_opts spec = {
        .cmd = "kiln convert", .synopsis = synopsis, .opts = opts, .n = KILN_N(opts), .pos_name = "files (IN OUT)",
        .max_pos = 2,
        .epilogue = "\nThe 2-D .weight tensors are quantised; other tensors are kept exactly. In GGUF a weight whose "
                    "rows are not whole blocks\nfalls back to Q8_0, then to its own float type.\n"};
    int prc = kiln_opts_parse(&spec, argc, argv, pos, &n_pos);
    if (prc != KILN_OPTS_CONTINUE) return prc;
    if (n_pos != 2 || !to) {
        fprintf(stderr, "kiln convert: IN, OUT and --to are required (kiln convert --help)\n");
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

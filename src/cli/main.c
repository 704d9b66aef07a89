/* main.c - `kiln COMMAND ...`: dispatch to the subcommands of commands.h. */
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "cli/commands.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"generate", kiln_cmd_generate, "text to image with FLUX.2 [klein]: PNGs with their parameters, perf dump"},
    {"inspect", kiln_cmd_inspect, "list a checkpoint's tensors, parameter count and model family"},
    {"convert", kiln_cmd_convert, "a bf16 checkpoint as GGUF (Q8_0, Q4_K, F16) or fp8 e4m3 safetensors"},
    {"mkweights", kiln_cmd_mkweights, "write full-size random-weight checkpoints from a manifest"},
    {"bench-sys", kiln_cmd_bench_sys, "foundation benchmarks: memory bandwidth, bf16->f32, open without copying"},
    {"tokenize", kiln_cmd_tokenize, "print the Qwen3 token ids of a prompt (klein template, padding)"},
    {"bench", kiln_cmd_bench, "benchmark reports: show, check, digest (docs/bench-report.md)"},
    {"bench-ops", kiln_cmd_bench_ops, "time every compute op on FLUX.2 klein shapes; --peak: this CPU's peak"},
    {"serve", kiln_cmd_serve, "ComfyUI- and OpenAI-compatible server on one durable job queue"},
};

static void usage(FILE *out) {
    fprintf(out, "kiln %s - FLUX.2 text-to-image engine, server and benchmark harness\n\n"
                 "usage: kiln COMMAND [options]   (kiln COMMAND --help for a command's options)\n\n",
            KILN_VERSION);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\nenvironment: KILN_LOG=error|warn|info|debug|trace, KILN_THREADS=N\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("kiln %s\n", KILN_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "kiln: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}

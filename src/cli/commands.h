/* commands.h - the `kiln` subcommands. Each takes the arguments after its own name (argv[0] = the command
 * name) and returns a process exit code (see kiln_status_exit_code). Add a command here and in main.c's table. */
#ifndef KILN_CLI_COMMANDS_H
#define KILN_CLI_COMMANDS_H

#include <jansson.h>
#include <stdio.h>

int kiln_cmd_inspect(int argc, char **argv);
int kiln_cmd_mkweights(int argc, char **argv);
int kiln_cmd_bench_sys(int argc, char **argv);
int kiln_cmd_generate(int argc, char **argv);
int kiln_cmd_tokenize(int argc, char **argv);
int kiln_cmd_bench(int argc, char **argv);
/* `kiln bench serve` (cmd_bench_serve.c) and its lines of the bench help. */
int kiln_cmd_bench_serve(int argc, char **argv);
void kiln_bench_serve_usage(FILE *f);
/* A bench report to path (temporary name, then rename) or stdout when NULL; 0, or 5 when it cannot be written
 * (said on stderr, prefixed with cmd). cmd_bench_serve.c. */
int kiln_bench_write_report(const json_t *rep, const char *path, const char *cmd);
/* `kiln bench variants` (cmd_bench_variants.c): the seed-002 report against one or more servers. */
int kiln_cmd_bench_variants(int argc, char **argv);
void kiln_bench_variants_usage(FILE *f);
int kiln_cmd_bench_ops(int argc, char **argv);
int kiln_cmd_serve(int argc, char **argv);
int kiln_cmd_convert(int argc, char **argv);

#endif

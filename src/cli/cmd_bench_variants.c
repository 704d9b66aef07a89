/* cmd_bench_variants.c - `kiln bench variants`: the options of the seed-002 run (src/bench/variants.h), its
 * report written to a temporary name then renamed, and its table. */
#include <stdio.h>
#include <string.h>

#include "bench/report.h"
#include "bench/variants.h"
#include "cli/commands.h"
#include "cli/options.h"

typedef struct variants_args {
    kiln_variants_cfg cfg;
    const char *out;
    char specs[KILN_VARIANTS_MAX][1024]; /* NAME=URL, split in place */
} variants_args;

/* --variant NAME=URL: NAME of letters, digits, '-', '_', '.'; URL http://... */
static bool opt_variant(void *ctx, const char *v, char *why, size_t cap) {
    variants_args *a = ctx;
    kiln_variants_cfg *c = &a->cfg;
    if (c->n_variants == KILN_VARIANTS_MAX) return snprintf(why, cap, "is given more than %d times", KILN_VARIANTS_MAX), false;
    const char *eq = strchr(v, '=');
    if (!eq || eq == v || strlen(v) >= sizeof a->specs[0] || strncmp(eq + 1, "http://", 7))
        return snprintf(why, cap, "takes NAME=http://HOST:PORT"), false;
    for (const char *p = v; p < eq; p++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.", *p))
            return snprintf(why, cap, "NAME takes letters, digits, '-', '_' and '.'"), false;
    char *s = a->specs[c->n_variants];
    snprintf(s, sizeof a->specs[0], "%s", v);
    s[eq - v] = 0;
    for (int i = 0; i < c->n_variants; i++)
        if (!strcmp(c->names[i], s)) return snprintf(why, cap, "names %s twice", s), false;
    c->names[c->n_variants] = s;
    c->urls[c->n_variants] = s + (eq - v) + 1;
    c->n_variants++;
    return true;
}

#define VARIANTS_SYNOPSIS "       kiln bench variants --variant NAME=URL [--variant ...] --graph FILE [options]\n"

static int variants_opts(variants_args *a, kiln_opt *o) {
    int n = 0;
    o[n++] = (kiln_opt)KILN_OPT_CALL("--variant", NULL, "NAME=URL",
                                     "a server to measure (repeatable, up to 8): e.g. one=http://127.0.0.1:8188",
                                     opt_variant, a);
    o[n++] = (kiln_opt)KILN_OPT_STR("--graph", NULL, "FILE", "the ComfyUI API-format graph every request sends",
                                    &a->cfg.graph_path);
    o[n++] = (kiln_opt)KILN_OPT_INT("--cycles", NULL, "N", "rounds, each running every variant once (default 2)",
                                    &a->cfg.cycles, 1, 1000);
    o[n++] = (kiln_opt)KILN_OPT_INT("--requests", NULL, "N", "measured requests per cycle (default 5)", &a->cfg.requests,
                                    1, 100000);
    o[n++] = (kiln_opt)KILN_OPT_INT("--warmup", NULL, "N", "warm-up requests per cycle, kept but not reduced (default 1)",
                                    &a->cfg.warmup, 0, 100000);
    o[n++] = (kiln_opt)KILN_OPT_STR("--case", NULL, "NAME", "the cells' case (default: the graph file's name)",
                                    &a->cfg.case_name);
    o[n++] = (kiln_opt)KILN_OPT_STR("--hardware", NULL, "NAME", "the cells' hardware label", &a->cfg.hardware);
    o[n++] = (kiln_opt)KILN_OPT_STR("--scope", NULL, "TEXT", "the report's scope sentence", &a->cfg.scope);
    o[n++] = (kiln_opt)KILN_OPT_DOUBLE("--timeout", NULL, "S", "one request at most (default 600)", &a->cfg.timeout_s,
                                       1, 86400);
    o[n++] = (kiln_opt)KILN_OPT_STR("--out", "-o", "FILE", "write the report here (default: stdout)", &a->out);
    return n;
}

void kiln_bench_variants_usage(FILE *f) {
    variants_args a = {.cfg = kiln_variants_cfg_default()};
    kiln_opt o[16];
    const kiln_opts spec = {.cmd = "kiln bench variants", .synopsis = VARIANTS_SYNOPSIS, .opts = o,
                            .n = variants_opts(&a, o)};
    kiln_opts_usage(&spec, f);
}

int kiln_cmd_bench_variants(int argc, char **argv) {
    static variants_args a; /* the NAME=URL copies outlive the parse */
    memset(&a, 0, sizeof a);
    a.cfg = kiln_variants_cfg_default();
    kiln_opt o[16];
    const kiln_opts spec = {.cmd = "kiln bench variants", .synopsis = VARIANTS_SYNOPSIS, .opts = o,
                            .n = variants_opts(&a, o)};
    int prc = kiln_opts_parse(&spec, argc, argv, NULL, NULL);
    if (prc != KILN_OPTS_CONTINUE) return prc;
    if (!a.cfg.n_variants || !a.cfg.graph_path) {
        fprintf(stderr, "kiln bench variants: --variant and --graph are required (kiln bench variants --help)\n");
        return 2;
    }
    json_t *rep = NULL;
    kiln_err err = {0};
    if (kiln_bench_variants(&a.cfg, &rep, &err) != KILN_OK) {
        fprintf(stderr, "kiln bench variants: %s\n", err.msg);
        return kiln_status_exit_code(err.code);
    }
    int rc = kiln_bench_write_report(rep, a.out, "kiln bench variants");
    kiln_report *r = NULL;
    if (kiln_report_from_json(rep, "variants", &r, &err) == KILN_OK) kiln_report_print_table(r, stderr);
    kiln_report_free(r);
    json_decref(rep);
    return rc;
}

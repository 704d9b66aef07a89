/* cmd_bench.c - `kiln bench show|check|digest ...`: read, validate and fingerprint benchmark reports and graphs.
 * (The harness's run and compare subcommands live in src/bench/; this file only parses arguments.) */
#include <stdio.h>
#include <string.h>

#include "base/status.h"
#include "bench/digest.h"
#include "bench/report.h"
#include "cli/commands.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: kiln bench show REPORT            print the report's table\n"
            "       kiln bench check [--unknown] REPORT...\n"
            "                                         validate reports (schema + consistency); --unknown lists\n"
            "                                         the fields kept but not understood\n"
            "       kiln bench digest FILE...         graph_digest (canonical JSON) and file_digest (bytes)\n"
            "report schema: docs/bench-report.md\n");
}

static int fail(const kiln_err *err) {
    fprintf(stderr, "kiln bench: %s\n", err->msg);
    return kiln_status_exit_code(err->code);
}

static int cmd_show(int argc, char **argv) {
    if (argc != 2) {
        usage(stderr);
        return 2;
    }
    kiln_err err = {0};
    kiln_report *r;
    if (kiln_report_load(argv[1], &r, &err) != KILN_OK) return fail(&err);
    kiln_report_print_table(r, stdout);
    kiln_report_free(r);
    return 0;
}

static int cmd_check(int argc, char **argv) {
    bool list_unknown = false;
    int first = 1, rc = 0;
    if (argc > 1 && !strcmp(argv[1], "--unknown")) {
        list_unknown = true;
        first = 2;
    }
    if (first >= argc) {
        usage(stderr);
        return 2;
    }
    for (int i = first; i < argc; i++) {
        kiln_err err = {0};
        kiln_report *r;
        if (kiln_report_load(argv[i], &r, &err) != KILN_OK) {
            rc = rc ? rc : fail(&err);
            continue;
        }
        for (size_t k = 0; k < r->problems.n; k++) printf("%s: %s\n", argv[i], r->problems.items[k]);
        if (r->problems.dropped) printf("%s: ... and %zu more problems\n", argv[i], r->problems.dropped);
        if (list_unknown)
            for (size_t k = 0; k < r->unknown.n; k++) printf("%s: unknown field %s (kept)\n", argv[i], r->unknown.items[k]);
        printf("%s: %s report, %s (%zu problem(s), %zu unknown field(s))\n", argv[i], kiln_report_kind_name(r->kind),
               r->problems.n ? "INVALID" : "valid", r->problems.n + r->problems.dropped,
               r->unknown.n + r->unknown.dropped);
        if (r->problems.n && !rc) rc = kiln_status_exit_code(KILN_E_FORMAT);
        kiln_report_free(r);
    }
    return rc;
}

static int cmd_digest(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        kiln_err err = {0};
        char fd[65], gd[65];
        if (kiln_sha256_file(argv[i], fd, &err) != KILN_OK) {
            rc = rc ? rc : fail(&err);
            continue;
        }
        json_error_t je;
        json_t *g = json_load_file(argv[i], JSON_REJECT_DUPLICATES, &je);
        if (g && kiln_graph_digest(g, gd, &err) == KILN_OK) printf("%s  graph_digest %s  file_digest %s\n", argv[i], gd, fd);
        else printf("%s  graph_digest -  file_digest %s  (not JSON: %s)\n", argv[i], fd, g ? err.msg : je.text);
        json_decref(g);
    }
    return rc;
}

int kiln_cmd_bench(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "show")) return cmd_show(argc - 1, argv + 1);
    if (!strcmp(argv[1], "check")) return cmd_check(argc - 1, argv + 1);
    if (!strcmp(argv[1], "digest")) return cmd_digest(argc - 1, argv + 1);
    fprintf(stderr, "kiln bench: unknown subcommand '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}

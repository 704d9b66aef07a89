/* cmd_bench.c - `kiln bench show|check|digest ...`: read, validate and fingerprint benchmark reports and graphs.
 * (The harness's run and compare subcommands live in src/bench/; this file only parses arguments.) */
#include <stdio.h>
#include <string.h>

#include <stdlib.h>

#include "base/alloc.h"
#include "base/status.h"
#include "bench/compare.h"
#include "bench/digest.h"
#include "bench/plot.h"
#include "bench/report.h"
#include "bench/run.h"
#include "bench/target.h"
#include "cli/commands.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: kiln bench run --url TARGET --graph FILE[@cell,cell] ... --bank PROMPT_BANK [options]\n"
            "         TARGET: http://host:port (a ComfyUI-API server: kiln serve, ComfyUI) or engine:MODELS_DIR\n"
            "                 (the in-process engine; MODELS_DIR/diffusion_models, text_encoders, vae)\n"
            "         -o REPORT          write the report here (default: stdout)\n"
            "         --arm NAME         run name; a <N>w token claims a cap that is checked (default kiln-bench)\n"
            "         --warmup N         warm-up submits per graph (default 1)   --timed N  timed submits (default 4)\n"
            "         --seed N           seed base (default 910100)   --save DIR  keep the fetched images\n"
            "         --timeout S        one submit, submit to last image (default 600)\n"
            "         --gpu N            NVML device index   --period S  telemetry period (default 0.5)\n"
            "         --idle-samples N   idle baseline readings, 0.5 s apart (default 6)\n"
            "         --gate PCT,WINDOW_S,SAMPLES,ATTEMPTS,RETRY_S   contention gate (default 5,10,20,3,30)\n"
            "         --disclose PID     a GPU process that belongs to the target (repeatable)\n"
            "         --service UNIT     check a competing server's systemd unit   --service-is-target\n"
            "         --ups NAME         read the UPS load with upsc   --ups-stop PCT (default 80)\n"
            "         --model FILE       digest a model file (repeatable; cached)   --digest-cache FILE\n"
            "         --force            time even when preflight refuses (refusals stay in the report)\n"
            "         exit status 9 when preflight refused the run (the report, with its refusals, is written)\n"
            "       kiln bench compare --a TARGET --b TARGET --graph FILE --bank PROMPT_BANK [options]\n"
            "         -o REPORT  --md SUMMARY.md  --cell ID  --rounds N (default 2)  --warmup N (default 1)\n"
            "         --seed N (default 42)  --label-a NAME --label-b NAME  --scope TEXT\n"
            "       kiln bench show REPORT            print the report's table\n"
            "       kiln bench check [--unknown] REPORT...\n"
            "                                         validate reports (schema + consistency); --unknown lists\n"
            "                                         the fields kept but not understood\n"
            "       kiln bench plot REPORT -o FILE.png  seconds per image and the telemetry trace (serve-load: latency\n"
            "                                         and queue wait by send time) as a PNG\n"
            "       kiln bench digest FILE...         graph_digest (canonical JSON) and file_digest (bytes)\n");
    kiln_bench_serve_usage(out);
    kiln_bench_variants_usage(out);
    fprintf(out, "report schema: docs/bench-report.md\n");
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

static int cmd_plot(int argc, char **argv) {
    if (argc != 4 || strcmp(argv[2], "-o") != 0) {
        usage(stderr);
        return 2;
    }
    kiln_err err = {0};
    kiln_report *r;
    if (kiln_report_load(argv[1], &r, &err) != KILN_OK) return fail(&err);
    int rc = 0;
    if (!r->typed_ok || (r->kind != KILN_REPORT_SECONDS_PER_IMAGE && r->kind != KILN_REPORT_SERVE_LOAD)) {
        fprintf(stderr, "kiln bench plot: %s is not a valid seconds-per-image or serve-load report (see kiln bench check)\n",
                argv[1]);
        rc = 4;
    } else if ((r->kind == KILN_REPORT_SERVE_LOAD ? kiln_bench_plot_serve(r->root, argv[3], &err)
                                                  : kiln_bench_plot(r->root, argv[3], &err)) != KILN_OK) {
        rc = fail(&err);
    }
    kiln_report_free(r);
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

static bool parse_int(const char *s, long lo, long hi, long *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

static int cmd_run(int argc, char **argv) {
    kiln_run_cfg cfg = kiln_run_cfg_default();
    const char *url = NULL, *out_path = NULL, *save = NULL;
    double timeout_s = 600;
    const char **graphs = kiln_calloc((size_t)argc, sizeof *graphs);
    const char **models = kiln_calloc((size_t)argc, sizeof *models);
    unsigned *pids = kiln_calloc((size_t)argc, sizeof *pids);
    size_t ng = 0, nm = 0, np = 0;
    int rc = 0;
    if (!graphs || !models || !pids) {
        fprintf(stderr, "kiln bench run: out of memory\n");
        rc = 6;
    }
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        bool takes = true;
        if (!strcmp(a, "--force")) { cfg.force = true; takes = false; }
        else if (!strcmp(a, "--service-is-target")) { cfg.service_is_target = true; takes = false; }
        else if (!v) { fprintf(stderr, "kiln bench run: %s needs a value\n", a); rc = 2; break; }
        else if (!strcmp(a, "--url")) url = v;
        else if (!strcmp(a, "--graph")) graphs[ng++] = v;
        else if (!strcmp(a, "--bank")) cfg.manifest = v;
        else if (!strcmp(a, "-o")) out_path = v;
        else if (!strcmp(a, "--arm")) cfg.arm = v;
        else if (!strcmp(a, "--question")) cfg.question = v;
        else if (!strcmp(a, "--save")) save = v;
        else if (!strcmp(a, "--service")) cfg.service_unit = v;
        else if (!strcmp(a, "--ups")) cfg.ups = v;
        else if (!strcmp(a, "--model")) models[nm++] = v;
        else if (!strcmp(a, "--digest-cache")) cfg.digest_cache = v;
        else if (!strcmp(a, "--nvml-lib")) cfg.nvml_lib = v;
        else if (!strcmp(a, "--warmup") && parse_int(v, 0, 1000, &n)) cfg.warmup = (int)n;
        else if (!strcmp(a, "--timed") && parse_int(v, 1, 100000, &n)) cfg.timed = (int)n;
        else if (!strcmp(a, "--gpu") && parse_int(v, 0, 255, &n)) cfg.gpu_index = (int)n;
        else if (!strcmp(a, "--idle-samples") && parse_int(v, 0, 10000, &n)) cfg.idle_samples = (int)n;
        else if (!strcmp(a, "--seed") && parse_int(v, 0, 1L << 52, &n)) cfg.seed_base = n;
        else if (!strcmp(a, "--disclose") && parse_int(v, 1, 0x7fffffff, &n)) pids[np++] = (unsigned)n;
        else if (!strcmp(a, "--period") && (cfg.sample_period_s = strtod(v, NULL)) > 0) {}
        else if (!strcmp(a, "--timeout") && (timeout_s = strtod(v, NULL)) > 0) {}
        else if (!strcmp(a, "--ups-stop") && (cfg.ups_stop_pct = strtod(v, NULL)) > 0) {}
        else if (!strcmp(a, "--gate") &&
                 sscanf(v, "%lf,%lf,%d,%d,%lf", &cfg.gate.max_util_pct, &cfg.gate.window_s, &cfg.gate.samples,
                        &cfg.gate.attempts, &cfg.gate.retry_wait_s) == 5 &&
                 cfg.gate.samples > 0 && cfg.gate.attempts > 0 && cfg.gate.window_s > 0) {}
        else { fprintf(stderr, "kiln bench run: bad option or value: %s %s\n", a, v); rc = 2; break; }
        if (takes) i++;
    }
    if (!rc && (!url || ng == 0 || !cfg.manifest)) {
        fprintf(stderr, "kiln bench run: --url, --graph and --bank are required\n");
        rc = 2;
    }
    kiln_err err = {0};
    kiln_target *t = NULL;
    json_t *report = NULL;
    if (!rc) {
        cfg.graphs = graphs;
        cfg.n_graphs = ng;
        cfg.models = models;
        cfg.n_models = nm;
        cfg.disclosed_pids = pids;
        cfg.n_disclosed = np;
        kiln_http_opts ho = {.save_dir = save, .timeout_s = timeout_s};
        if (kiln_target_open_spec(url, &ho, &t, &err) != KILN_OK) rc = fail(&err);
    }
    if (!rc) {
        kiln_status st = kiln_bench_run(&cfg, t, &report, &err);
        if (report) {
            int flags = JSON_INDENT(1) | JSON_REAL_PRECISION(17);
            if (out_path ? json_dump_file(report, out_path, flags) != 0 : json_dumpf(report, stdout, flags) != 0) {
                fprintf(stderr, "kiln bench run: cannot write %s\n", out_path ? out_path : "stdout");
                rc = 5;
            }
            if (!out_path) putchar('\n');
            size_t nref = json_array_size(json_object_get(report, "refusals"));
            if (nref) {
                fprintf(stderr, "kiln bench run: %zu refusal(s) in the report%s\n", nref,
                        cfg.force ? " (timed anyway: --force)" : "; nothing was timed");
                if (!cfg.force && st == KILN_OK) rc = kiln_status_exit_code(KILN_E_CANCELLED);
            }
        }
        if (st != KILN_OK) rc = fail(&err);
    }
    json_decref(report);
    kiln_target_close(t);
    kiln_free(graphs);
    kiln_free(models);
    kiln_free(pids);
    return rc;
}

static int cmd_compare(int argc, char **argv) {
    kiln_compare_cfg cfg = kiln_compare_cfg_default();
    const char *ua = NULL, *ub = NULL, *out_path = NULL, *md = NULL;
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        if (!v) { fprintf(stderr, "kiln bench compare: %s needs a value\n", a); return 2; }
        if (!strcmp(a, "--a")) ua = v;
        else if (!strcmp(a, "--b")) ub = v;
        else if (!strcmp(a, "--graph")) cfg.graph = v;
        else if (!strcmp(a, "--bank")) cfg.manifest = v;
        else if (!strcmp(a, "--cell")) cfg.cell = v;
        else if (!strcmp(a, "-o")) out_path = v;
        else if (!strcmp(a, "--md")) md = v;
        else if (!strcmp(a, "--label-a")) cfg.label_a = v;
        else if (!strcmp(a, "--label-b")) cfg.label_b = v;
        else if (!strcmp(a, "--scope")) cfg.scope = v;
        else if (!strcmp(a, "--rounds") && parse_int(v, 1, 1000, &n)) cfg.rounds = (int)n;
        else if (!strcmp(a, "--warmup") && parse_int(v, 0, 1000, &n)) cfg.warmup = (int)n;
        else if (!strcmp(a, "--seed") && parse_int(v, 0, 1L << 52, &n)) cfg.seed = n;
        else { fprintf(stderr, "kiln bench compare: bad option or value: %s %s\n", a, v); return 2; }
    }
    if (!ua || !ub || !cfg.graph || !cfg.manifest) {
        fprintf(stderr, "kiln bench compare: --a, --b, --graph and --bank are required\n");
        return 2;
    }
    kiln_err err = {0};
    kiln_target *ta = NULL, *tb = NULL;
    json_t *rep = NULL;
    int rc = 0;
    if (kiln_target_open_spec(ua, NULL, &ta, &err) != KILN_OK || kiln_target_open_spec(ub, NULL, &tb, &err) != KILN_OK ||
        kiln_bench_compare(&cfg, ta, tb, &rep, &err) != KILN_OK)
        rc = fail(&err);
    if (rep) {
        int flags = JSON_INDENT(1) | JSON_REAL_PRECISION(17);
        if (out_path && json_dump_file(rep, out_path, flags) != 0) {
            fprintf(stderr, "kiln bench compare: cannot write %s\n", out_path);
            rc = 5;
        }
        FILE *mf = md ? fopen(md, "w") : stdout;
        if (!mf) {
            fprintf(stderr, "kiln bench compare: cannot write %s\n", md);
            rc = 5;
        } else {
            kiln_compare_markdown(rep, mf);
            if (md) fclose(mf);
        }
    }
    json_decref(rep);
    kiln_target_close(ta);
    kiln_target_close(tb);
    return rc;
}

int kiln_cmd_bench(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "run")) return cmd_run(argc - 1, argv + 1);
    if (!strcmp(argv[1], "compare")) return cmd_compare(argc - 1, argv + 1);
    if (!strcmp(argv[1], "serve")) return kiln_cmd_bench_serve(argc - 1, argv + 1);
    if (!strcmp(argv[1], "variants")) return kiln_cmd_bench_variants(argc - 1, argv + 1);
    if (!strcmp(argv[1], "show")) return cmd_show(argc - 1, argv + 1);
    if (!strcmp(argv[1], "check")) return cmd_check(argc - 1, argv + 1);
    if (!strcmp(argv[1], "digest")) return cmd_digest(argc - 1, argv + 1);
    if (!strcmp(argv[1], "plot")) return cmd_plot(argc - 1, argv + 1);
    fprintf(stderr, "kiln bench: unknown subcommand '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}

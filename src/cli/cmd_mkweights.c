/* cmd_mkweights.c - `kiln mkweights --manifest M --out DIR [--seed S] [--threads N] [--tokenizer DIR]
 * [--dry-run] [--sparse]`: full-size random-weight checkpoints in the real layouts (io/mkweights.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/threadpool.h"
#include "cli/commands.h"
#include "io/manifest.h"
#include "io/mkweights.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: kiln mkweights --manifest M --out DIR [--seed S] [--threads N] [--tokenizer DIR] [--dry-run] [--sparse]\n\n"
            "  --manifest M    a kiln-manifest/1 file (tests/data/manifests/*.json)\n"
            "  --out DIR       output folder (created); files land atomically\n"
            "  --seed S        value seed (default 0); the same seed gives byte-identical files\n"
            "  --threads N     generation threads (default: KILN_THREADS or all CPUs)\n"
            "  --tokenizer DIR where copy_tokenizer takes tokenizer.json from (default: data/tokenizer/qwen3)\n"
            "  --dry-run       validate the manifest and print what would be written\n"
            "  --sparse        headers only, data left as holes (zeros, no disk used): full-size layouts in seconds\n");
}

static void progress(void *ctx, uint64_t done, uint64_t total) {
    (void)ctx;
    fprintf(stderr, "\rkiln mkweights: %6.2f / %.2f GB", (double)done / 1e9, (double)total / 1e9);
}

static bool parse_u64(const char *s, uint64_t *out) {
    if (!s || !*s || *s == '-') return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end) return false;
    *out = v;
    return true;
}

int kiln_cmd_mkweights(int argc, char **argv) {
    const char *manifest = NULL, *out = NULL, *tok = NULL;
    uint64_t seed = 0, threads = 0;
    bool dry = false, sparse = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--dry-run")) dry = true;
        else if (!strcmp(a, "--sparse")) sparse = true;
        else if (!strcmp(a, "--manifest") && v) manifest = argv[++i];
        else if (!strcmp(a, "--out") && v) out = argv[++i];
        else if (!strcmp(a, "--tokenizer") && v) tok = argv[++i];
        else if (!strcmp(a, "--seed") && v) {
            if (!parse_u64(argv[++i], &seed)) {
                fprintf(stderr, "kiln mkweights: --seed wants a non-negative integer, got '%s'\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "--threads") && v) {
            if (!parse_u64(argv[++i], &threads) || threads < 1 || threads > KILN_POOL_MAX_THREADS) {
                fprintf(stderr, "kiln mkweights: --threads wants 1..%d, got '%s'\n", KILN_POOL_MAX_THREADS, argv[i]);
                return 2;
            }
        } else {
            fprintf(stderr, "kiln mkweights: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!manifest || (!out && !dry)) {
        fprintf(stderr, "kiln mkweights: --manifest and --out are required\n");
        usage(stderr);
        return 2;
    }
    kiln_err err = {0};
    kiln_ckpt_manifest *m;
    if (kiln_ckpt_manifest_load(manifest, &m, &err) != KILN_OK) {
        fprintf(stderr, "kiln mkweights: %s\n", err.msg);
        return kiln_status_exit_code(err.code);
    }
    printf("%s: %s %s (%s layout): %zu files, %zu tensors, %llu parameters, %.3f GB of tensor data\n", manifest,
           m->model, m->component, m->layout, m->n_files, m->total_tensors, (unsigned long long)m->total_params,
           (double)m->total_bytes / 1e9);
    for (size_t i = 0; i < m->n_files; i++)
        printf("  %-60s %5zu tensors %9.3f GB%s\n", m->files[i].path, m->files[i].n_tensors,
               (double)m->files[i].bytes / 1e9, m->files[i].in_index ? "  (indexed)" : "");
    if (m->index_path) printf("  %s (shard index)\n", m->index_path);
    for (size_t i = 0; i < m->n_extras; i++) printf("  %s\n", m->extras[i].path);
    if (m->copy_tokenizer) printf("  %s/ (tokenizer)\n", m->copy_tokenizer);
    fflush(stdout);
    if (dry) {
        kiln_ckpt_manifest_free(m);
        return 0;
    }
    kiln_pool *pool = NULL;
    if (kiln_pool_create((int)threads, &pool, &err) != KILN_OK) {
        fprintf(stderr, "kiln mkweights: %s\n", err.msg);
        kiln_ckpt_manifest_free(m);
        return kiln_status_exit_code(err.code);
    }
    kiln_mkweights_opts o = {.seed = seed, .pool = pool, .tokenizer_dir = tok, .sparse = sparse,
                             .progress = sparse ? NULL : progress};
    kiln_mkweights_stats st;
    kiln_status s = kiln_mkweights(m, out, &o, &st, &err);
    fprintf(stderr, "\n");
    if (s != KILN_OK) fprintf(stderr, "kiln mkweights: %s\n", err.msg);
    else
        printf("wrote %zu files, %zu tensors, %.3f GB to %s in %.2f s (%.2f GB/s; generating %.2f s on %d threads)\n",
               st.files, st.tensors, (double)st.bytes / 1e9, out, st.seconds,
               st.seconds > 0 ? (double)st.bytes / 1e9 / st.seconds : 0.0, st.gen_seconds, kiln_pool_size(pool));
    kiln_pool_destroy(pool);
    kiln_ckpt_manifest_free(m);
    return kiln_status_exit_code(s);
}

/* cmd_mkweights.c - `kiln mkweights --manifest M --out DIR [--seed S] [--threads N] [--tokenizer DIR]
 * [--dry-run] [--sparse]`: full-size random-weight checkpoints in the real layouts (io/mkweights.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/threadpool.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "io/manifest.h"
#include "io/mkweights.h"

static void progress(void *ctx, uint64_t done, uint64_t total) {
    (void)ctx;
    fprintf(stderr, "\rkiln mkweights: %6.2f / %.2f GB", (double)done / 1e9, (double)total / 1e9);
}

int kiln_cmd_mkweights(int argc, char **argv) {
    const char *manifest = NULL, *out = NULL, *tok = NULL;
    uint64_t seed = 0;
    bool dry = false, sparse = false;
    int threads = 0;
    const kiln_opt opts[] = {
        KILN_OPT_STR("--manifest", NULL, "M", "a kiln-manifest/1 file (tests/data/manifests/*.json)", &manifest),
        KILN_OPT_STR("--out", NULL, "DIR", "output folder (created); files land atomically", &out),
        KILN_OPT_U64("--seed", NULL, "S", "value seed (default 0); the same seed gives byte-identical files", &seed, 0,
                     (double)UINT64_MAX),
        KILN_OPT_INT("--threads", NULL, "N", "generation threads (default: KILN_THREADS or all CPUs)", &threads, 1,
                     KILN_POOL_MAX_THREADS),
        KILN_OPT_STR("--tokenizer", NULL, "DIR",
                     "where copy_tokenizer takes tokenizer.json from (default: data/tokenizer/qwen3)", &tok),
        KILN_OPT_FLAG("--dry-run", NULL, "validate the manifest and print what would be written", &dry),
        KILN_OPT_FLAG("--sparse", NULL, "headers only, data left as holes (zeros, no disk used): full-size layouts in\n"
                      "seconds", &sparse),
    };
    const kiln_opts spec = {.cmd = "kiln mkweights", .opts = opts, .n = KILN_N(opts),
                            .synopsis = "usage: kiln mkweights --manifest M --out DIR [options]\n\n"};
    int prc = kiln_opts_parse(&spec, argc, argv, NULL, NULL);
    if (prc != KILN_OPTS_CONTINUE) return prc;
    if (!manifest || (!out && !dry)) {
        fprintf(stderr, "kiln mkweights: --manifest and --out are required (kiln mkweights --help)\n");
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
    if (kiln_pool_create(threads, &pool, &err) != KILN_OK) {
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

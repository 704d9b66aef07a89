/* cmd_bench_sys.c - `kiln bench-sys [--mb N] [--reps R] [--threads N] [--checkpoint PATH] [--json]`: the
 * foundation's benchmarks, measured side by side in one run so the ratios hold on a noisy machine:
 *   1. memory bandwidth: memcpy, a read-only sum and memset over buffers far bigger than the caches,
 *      one thread and all threads (bytes counted: memcpy = read + write);
 *   2. bf16 -> f32 conversion (kiln_convert) per implementation (scalar, avx2, avx512) and threads, as GB/s
 *      of read + write traffic and as a fraction of the memcpy bandwidth at the same thread count;
 *   3. with --checkpoint: open it (kiln_st_open) and report the resident set before/after, the open time and
 *      the lookups - the proof that opening copies nothing.
 * Each figure is the median of --reps runs (default 5). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/threadpool.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "io/detect.h"
#include "io/safetensors.h"
#include "tensor/convert.h"

static double rss_mb(void) {
    FILE *fp = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (!fp) return -1;
    if (fscanf(fp, "%ld %ld", &pages, &resident) != 2) resident = -1;
    fclose(fp);
    return resident < 0 ? -1 : (double)resident * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0);
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef enum op { OP_COPY, OP_READ, OP_WRITE, OP_BF16, OP_BF16_NT } op;

typedef struct job {
    op kind;
    uint8_t *dst;
    const uint8_t *src;
    size_t bytes; /* of src for reads/copies; elements for OP_BF16 */
    size_t parts;
    uint64_t sums[KILN_POOL_MAX_THREADS];
} job;

static void part(void *ctx, size_t i, int thread) {
    job *j = ctx;
    size_t n = j->bytes, lo = n * i / j->parts, hi = n * (i + 1) / j->parts;
    switch (j->kind) {
    case OP_COPY: memcpy(j->dst + lo, j->src + lo, hi - lo); break;
    case OP_WRITE: memset(j->dst + lo, (int)i, hi - lo); break;
    case OP_READ: {
        const uint64_t *p = (const uint64_t *)(const void *)(j->src + (lo & ~(size_t)7));
        uint64_t a = 0, b = 0, c = 0, d = 0;
        size_t words = (hi - (lo & ~(size_t)7)) / 8, w = 0;
        for (; w + 4 <= words; w += 4) a += p[w], b += p[w + 1], c += p[w + 2], d += p[w + 3];
        for (; w < words; w++) a += p[w];
        j->sums[thread] += a + b + c + d;
        break;
    }
    case OP_BF16:
        kiln_bf16_to_f32_n((float *)(void *)j->dst + lo, (const uint16_t *)(const void *)j->src + lo, hi - lo);
        break;
    case OP_BF16_NT:
        kiln_bf16_to_f32_stream_n((float *)(void *)j->dst + lo, (const uint16_t *)(const void *)j->src + lo, hi - lo);
        break;
    }
}

/* Median seconds of reps runs of the job on pool (threads = pool size). */
static double time_job(kiln_pool *pool, job *j, int reps) {
    double t[64];
    if (reps > 64) reps = 64;
    j->parts = pool ? (size_t)kiln_pool_size(pool) * 4 : 1;
    for (int r = 0; r < reps; r++) {
        double t0 = kiln_clock_s();
        kiln_pool_run(pool, j->parts, part, j);
        t[r] = kiln_clock_s() - t0;
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_d);
    return t[reps / 2];
}

int kiln_cmd_bench_sys(int argc, char **argv) {
    long mb = 512, reps = 5, threads = 0;
    const char *ck = NULL;
    bool as_json = false;
    const kiln_opt opts[] = {
        KILN_OPT_LONG("--mb", NULL, "N",
                      "buffer size in MiB for the bandwidth runs (default 512; the bf16 run converts\n"
                      "N/2 MiB of bf16 into N MiB of f32)", &mb, 16, 65536),
        KILN_OPT_LONG("--reps", NULL, "R", "repetitions of each run (default 5)", &reps, 1, 64),
        KILN_OPT_LONG("--threads", NULL, "N", "threads (default 0: all CPUs)", &threads, 0, KILN_POOL_MAX_THREADS),
        KILN_OPT_STR("--checkpoint", NULL, "P",
                     "also open P and report RSS before/after (a 16 GB file: scripts/bench-foundation.sh)", &ck),
        KILN_OPT_FLAG("--json", NULL, "one JSON object on stdout", &as_json),
    };
    const kiln_opts spec = {.cmd = "kiln bench-sys", .opts = opts, .n = KILN_N(opts),
                            .synopsis = "usage: kiln bench-sys [--mb N] [--reps R] [--threads N] [--checkpoint PATH] "
                                        "[--json]\n"};
    int prc = kiln_opts_parse(&spec, argc, argv, NULL, NULL);
    if (prc != KILN_OPTS_CONTINUE) return prc;
    kiln_err err = {0};
    json_t *out = json_object();
    double rss0 = rss_mb();
    if (ck) { /* first, so the bandwidth buffers do not count in its RSS */
        kiln_st_file *f;
        double t0 = kiln_clock_s();
        kiln_status s = kiln_st_open(ck, &f, &err);
        double t_open = kiln_clock_s() - t0;
        if (s != KILN_OK) {
            fprintf(stderr, "kiln bench-sys: %s\n", err.msg);
            json_decref(out);
            return kiln_status_exit_code(s);
        }
        double rss1 = rss_mb();
        uint64_t bytes = 0;
        size_t found = 0;
        t0 = kiln_clock_s();
        for (size_t i = 0; i < kiln_st_count(f); i++) {
            bytes += kiln_st_at(f, i)->nbytes;
            found += kiln_st_find(f, kiln_st_at(f, i)->name) != NULL;
        }
        double t_find = kiln_clock_s() - t0;
        kiln_detect_result d;
        kiln_detect(f, &d);
        printf("checkpoint %s: %s, %zu tensors, %.2f GB of tensor data in %zu file(s)\n", ck, d.id,
               kiln_st_count(f), (double)bytes / 1e9, kiln_st_shard_count(f));
        printf("  open %.1f ms; RSS %.1f MiB before, %.1f MiB after open (+%.1f MiB = %.4f%% of the data); "
               "%zu lookups in %.1f us (%.0f ns each)\n",
               t_open * 1e3, rss0, rss1, rss1 - rss0, (rss1 - rss0) * 1048576.0 / (double)(bytes ? bytes : 1) * 100,
               found, t_find * 1e6, t_find * 1e9 / (double)(found ? found : 1));
        json_object_set_new(out, "checkpoint",
                            json_pack("{s:s,s:s,s:I,s:I,s:f,s:f,s:f,s:f}", "path", ck, "model", d.id, "tensors",
                                      (json_int_t)kiln_st_count(f), "bytes", (json_int_t)bytes, "open_ms",
                                      t_open * 1e3, "rss_before_mib", rss0, "rss_after_mib", rss1,
                                      "lookup_ns", t_find * 1e9 / (double)(found ? found : 1)));
        kiln_st_close(f);
    }
    kiln_pool *pool = NULL;
    if (kiln_pool_create((int)threads, &pool, &err) != KILN_OK) {
        fprintf(stderr, "kiln bench-sys: %s\n", err.msg);
        json_decref(out);
        return kiln_status_exit_code(err.code);
    }
    size_t bytes = (size_t)mb << 20;
    uint8_t *a = kiln_aligned_alloc(bytes), *b = kiln_aligned_alloc(bytes);
    if (!a || !b) {
        fprintf(stderr, "kiln bench-sys: cannot allocate 2 x %ld MiB\n", mb);
        kiln_aligned_free(a);
        kiln_aligned_free(b);
        kiln_pool_destroy(pool);
        json_decref(out);
        return 6;
    }
    for (size_t i = 0; i < bytes; i += 4096) a[i] = (uint8_t)i, b[i] = 0; /* fault the pages in */
    uint16_t *src16 = (uint16_t *)(void *)a;
    for (size_t i = 0; i < bytes / 2; i += 1) src16[i] = (uint16_t)(0x3f80 + (i & 0x7f)); /* finite bf16 */
    int nt = kiln_pool_size(pool);
    printf("memory bandwidth (buffers %ld MiB, median of %ld; GB/s = 1e9 B/s):\n", mb, reps);
    json_t *bw = json_array(), *conv = json_array();
    double copy_bw[2] = {0, 0};
    kiln_pool *pools[2] = {NULL, pool};
    const char *names[] = {"memcpy (read+write)", "read (sum)", "write (memset)"};
    for (int pi = 0; pi < 2; pi++) {
        if (pi == 1 && nt < 2) {
            copy_bw[1] = copy_bw[0];
            break;
        }
        int th = pi ? nt : 1;
        for (int k = 0; k < 3; k++) {
            job j = {.kind = (op)k, .dst = b, .src = a, .bytes = bytes};
            double t = time_job(pools[pi], &j, (int)reps);
            double gbs = (double)bytes * (k == OP_COPY ? 2 : 1) / t / 1e9;
            if (k == OP_COPY) copy_bw[pi] = gbs;
            printf("  %-22s %3d thread%s %7.2f GB/s\n", names[k], th, th > 1 ? "s" : " ", gbs);
            json_array_append_new(bw, json_pack("{s:s,s:i,s:f}", "op", names[k], "threads", th, "gb_per_s", gbs));
        }
    }
    size_t elems = bytes / 4; /* f32 dst fills b; src is the first half of a */
    kiln_isa best = kiln_isa_detect();
    printf("bf16 -> f32 (%zu Mi elements; GB/s of read+write traffic, 6 B per element):\n", elems >> 20);
    for (int isa = 0; isa <= (int)best; isa++) {
        kiln_convert_set_isa((kiln_isa)isa);
        for (int pi = 0; pi < 2; pi++) {
            if (pi == 1 && nt < 2) break;
            int th = pi ? nt : 1;
            for (int stream = 0; stream < (isa ? 2 : 1); stream++) {
                job j = {.kind = stream ? OP_BF16_NT : OP_BF16, .dst = b, .src = a, .bytes = elems};
                double t = time_job(pools[pi], &j, (int)reps);
                double gbs = (double)elems * 6 / t / 1e9;
                char name[32];
                snprintf(name, sizeof name, "%s%s", kiln_isa_name((kiln_isa)isa), stream ? "+nt" : "");
                printf("  %-10s %3d thread%s %7.2f GB/s = %5.1f%% of memcpy bandwidth (%.2f GB/s, same threads)\n",
                       name, th, th > 1 ? "s" : " ", gbs, 100 * gbs / copy_bw[pi], copy_bw[pi]);
                json_array_append_new(conv, json_pack("{s:s,s:i,s:f,s:f}", "isa", name, "threads", th, "gb_per_s",
                                                      gbs, "fraction_of_memcpy", gbs / copy_bw[pi]));
            }
        }
    }
    kiln_convert_set_isa(best);
    /* check the last conversion so a broken kernel cannot post a good number */
    const float *dst = (const float *)(const void *)b;
    size_t bad = 0;
    for (size_t i = 0; i < elems; i += 4099) bad += dst[i] != kiln_bf16_to_f32(src16[i]);
    if (bad) fprintf(stderr, "kiln bench-sys: bf16 conversion gave %zu wrong values\n", bad);
    json_object_set_new(out, "bandwidth", bw);
    json_object_set_new(out, "bf16_to_f32", conv);
    json_object_set_new(out, "threads", json_integer(nt));
    if (as_json) {
        json_dumpf(out, stdout, JSON_INDENT(2));
        printf("\n");
    }
    json_decref(out);
    kiln_aligned_free(a);
    kiln_aligned_free(b);
    kiln_pool_destroy(pool);
    return bad ? 70 : 0;
}

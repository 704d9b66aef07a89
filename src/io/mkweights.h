/* mkweights.h - writes full-size random-weight checkpoints from a manifest (manifest.h), for benchmarks and
 * loader tests where the real weights cannot be downloaded.
 *
 *     kiln_mkweights_opts o = {.seed = 42, .pool = pool};
 *     kiln_mkweights_stats st;
 *     if (kiln_mkweights(m, "/tmp/klein", &o, &st, &err) != KILN_OK) ...
 *
 * Files are streamed (64 MiB at a time through kiln_st_writer: never a whole file in memory) and each lands
 * atomically (tmp + fsync + rename). Tensor data is ordered by decreasing dtype size (manifest order within a
 * size), as the reference safetensors writer does, so every tensor is aligned to its element size. Values are a pure function of (seed, tensor name, element index), so
 * generation splits freely across threads, the output is byte-identical for any thread count, and a tensor
 * has the same values whichever file or layout it is written in. Distributions, chosen by name so a
 * full-size random model runs without overflow:
 *   - norm gains/scales (a name containing "norm" ending in .weight or .scale): 1 + 0.1 n
 *   - norm biases: 0.1 n;  bn running_mean: 0.1 n;  running_var: uniform [0.5, 1.5)
 *   - integer and bool tensors (num_batches_tracked): 0
 *   - everything else: n / sqrt(fan_in), fan_in = product of the dims after the first (1 for 0-D/1-D)
 * where n is a cheap approximately-normal variate (sum of four 16-bit uniforms, mean 0, variance 1, |n| < 3.5).
 * Before writing, the free space of the output folder is checked against the total (KILN_E_LIMIT if short).
 * Errors: KILN_E_IO / KILN_E_NOT_FOUND naming the path, KILN_E_LIMIT, KILN_E_NOMEM.
 */
#ifndef KILN_IO_MKWEIGHTS_H
#define KILN_IO_MKWEIGHTS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "base/threadpool.h"
#include "io/manifest.h"

typedef struct kiln_mkweights_opts {
    uint64_t seed;
    kiln_pool *pool;           /* NULL: one thread */
    const char *tokenizer_dir; /* source for copy_tokenizer; NULL: $KILN_SOURCE_DIR/data/tokenizer/qwen3 */
    bool sparse; /* write headers only and leave the data as holes (zeros): layout checks in seconds */
    size_t buffer_bytes; /* per buffer (two are used); 0 = 64 MiB. Tests set it small to cross many buffers */
    /* Called after each buffer is written (may be NULL). */
    void (*progress)(void *ctx, uint64_t done_bytes, uint64_t total_bytes);
    void *progress_ctx;
} kiln_mkweights_opts;

typedef struct kiln_mkweights_stats {
    uint64_t bytes; /* tensor data written */
    size_t files, tensors;
    double seconds;     /* wall time, including fsync */
    double gen_seconds; /* of which: generating values */
} kiln_mkweights_stats;

kiln_status kiln_mkweights(const kiln_ckpt_manifest *m, const char *out_dir, const kiln_mkweights_opts *o,
                           kiln_mkweights_stats *stats, kiln_err *err);

/* The value element i of the named tensor gets (before conversion to the tensor's dtype). For tests. */
float kiln_mkweights_value(uint64_t seed, const char *name, kiln_dtype dtype, int ndim, const int64_t *shape,
                           uint64_t i);

#endif

/* threadpool.h - a fixed pool of worker threads running parallel-for loops.
 *
 * Scales from 1 to 256 threads. The caller's thread takes part in the work, so a pool of n threads has n-1
 * workers. kiln_pool_run blocks until every task index has been run exactly once; tasks are handed out in
 * chunks by an atomic counter so uneven tasks balance. Nested kiln_pool_run from inside a task runs serially
 * on the calling thread (no deadlock).
 *
 *     kiln_pool *pool;
 *     if (kiln_pool_create(0, &pool, &err) != KILN_OK) ...   // 0 = one thread per online CPU (or KILN_THREADS)
 *     kiln_pool_run(pool, rows, row_fn, &ctx);                // row_fn(ctx, i, thread_index) for i in [0, rows)
 *     kiln_pool_destroy(pool);
 */
#ifndef KILN_BASE_THREADPOOL_H
#define KILN_BASE_THREADPOOL_H

#include <stddef.h>

#include "base/status.h"

typedef struct kiln_pool kiln_pool;

/* task(ctx, index, thread) with thread in [0, kiln_pool_size(pool)) - usable to index per-thread scratch. */
typedef void (*kiln_pool_task)(void *ctx, size_t index, int thread);

#define KILN_POOL_MAX_THREADS 256

/* n_threads 0: KILN_THREADS from the environment if set, else the number of online CPUs. */
kiln_status kiln_pool_create(int n_threads, kiln_pool **out, kiln_err *err);
void kiln_pool_destroy(kiln_pool *pool);
int kiln_pool_size(const kiln_pool *pool);
/* Runs task for every index in [0, n). pool may be NULL (runs serially). */
void kiln_pool_run(kiln_pool *pool, size_t n, kiln_pool_task task, void *ctx);

#endif

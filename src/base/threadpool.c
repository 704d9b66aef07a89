/* threadpool.c - parallel-for over a fixed set of pthreads (see threadpool.h).
 *
 * One job at a time: kiln_pool_run publishes (task, ctx, n) under the mutex, bumps the generation and wakes the
 * workers; everyone (the caller too) claims index chunks from an atomic counter until none are left; the caller
 * waits until every worker has checked out of the generation. Workers spin briefly before sleeping because
 * model code issues thousands of short parallel loops per second and a futex wake costs microseconds.
 */
#include "base/threadpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/log.h"

struct kiln_pool {
    int n_threads;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    bool stop;
    _Atomic uint64_t generation; /* bumped per job */
    /* current job */
    kiln_pool_task task;
    void *ctx;
    size_t n, chunk;
    _Atomic size_t next;
    _Atomic int active; /* workers still inside the current job */
};

static _Thread_local int in_pool_task; /* nested runs go serial */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

typedef struct worker_arg {
    kiln_pool *pool;
    int index;
} worker_arg;

static void run_chunks(kiln_pool *p, int thread) {
    in_pool_task = 1;
    for (;;) {
        size_t start = atomic_fetch_add(&p->next, p->chunk);
        if (start >= p->n) break;
        size_t end = start + p->chunk < p->n ? start + p->chunk : p->n;
        for (size_t i = start; i < end; i++) p->task(p->ctx, i, thread);
    }
    in_pool_task = 0;
}

static void *worker_main(void *argp) {
    worker_arg arg = *(worker_arg *)argp;
    kiln_free(argp);
    kiln_pool *p = arg.pool;
    uint64_t seen = 0;
    for (;;) {
        /* spin a little for the next job, then sleep */
        for (int spin = 0; spin < 20000 && atomic_load(&p->generation) == seen; spin++) cpu_relax();
        pthread_mutex_lock(&p->mu);
        while (!p->stop && atomic_load(&p->generation) == seen) pthread_cond_wait(&p->wake, &p->mu);
        if (p->stop) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        seen = atomic_load(&p->generation);
        pthread_mutex_unlock(&p->mu);
        run_chunks(p, arg.index);
        if (atomic_fetch_sub(&p->active, 1) == 1) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

kiln_status kiln_pool_create(int n_threads, kiln_pool **out, kiln_err *err) {
    *out = NULL;
    if (n_threads <= 0) {
        const char *env = getenv("KILN_THREADS");
        if (env && *env) {
            char *end;
            long v = strtol(env, &end, 10);
            if (*end || v < 1 || v > KILN_POOL_MAX_THREADS)
                return KILN_FAIL(err, KILN_E_INVALID, "KILN_THREADS=%s is not a number in 1..%d", env,
                                 KILN_POOL_MAX_THREADS);
            n_threads = (int)v;
        } else {
            long cpus = sysconf(_SC_NPROCESSORS_ONLN);
            n_threads = cpus < 1 ? 1 : cpus > KILN_POOL_MAX_THREADS ? KILN_POOL_MAX_THREADS : (int)cpus;
        }
    }
    if (n_threads > KILN_POOL_MAX_THREADS)
        return KILN_FAIL(err, KILN_E_INVALID, "thread count %d over the maximum %d", n_threads,
                         KILN_POOL_MAX_THREADS);
    kiln_pool *p = kiln_calloc(1, sizeof *p);
    if (!p) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory creating a thread pool");
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    if (n_threads > 1) {
        p->threads = kiln_calloc((size_t)n_threads - 1, sizeof *p->threads);
        if (!p->threads) {
            p->n_threads = 1; /* no workers were started */
            kiln_pool_destroy(p);
            return KILN_FAIL(err, KILN_E_NOMEM, "out of memory creating a thread pool");
        }
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *arg = kiln_malloc(sizeof *arg);
        int rc = arg ? 0 : -1;
        if (arg) {
            arg->pool = p;
            arg->index = i;
            rc = pthread_create(&p->threads[i - 1], NULL, worker_main, arg);
            if (rc != 0) kiln_free(arg);
        }
        if (rc != 0) {
            p->n_threads = i; /* only threads 1..i-1 exist */
            kiln_pool_destroy(p);
            return KILN_FAIL(err, KILN_E_NOMEM, "cannot start worker thread %d of %d", i, n_threads);
        }
    }
    *out = p;
    return KILN_OK;
}

void kiln_pool_destroy(kiln_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n_threads; i++) pthread_join(p->threads[i - 1], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    kiln_free(p->threads);
    kiln_free(p);
}

int kiln_pool_size(const kiln_pool *p) { return p ? p->n_threads : 1; }

void kiln_pool_run(kiln_pool *p, size_t n, kiln_pool_task task, void *ctx) {
    if (n == 0) return;
    if (!p || p->n_threads == 1 || n == 1 || in_pool_task) {
        for (size_t i = 0; i < n; i++) task(ctx, i, 0);
        return;
    }
    size_t chunk = n / ((size_t)p->n_threads * 4);
    pthread_mutex_lock(&p->mu);
    p->task = task;
    p->ctx = ctx;
    p->n = n;
    p->chunk = chunk ? chunk : 1;
    atomic_store(&p->next, 0);
    atomic_store(&p->active, p->n_threads - 1);
    atomic_fetch_add(&p->generation, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    run_chunks(p, 0);
    /* wait for the workers to leave this job before the next one may reuse the fields */
    for (int spin = 0; spin < 200000 && atomic_load(&p->active) > 0; spin++) cpu_relax();
    if (atomic_load(&p->active) > 0) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load(&p->active) > 0) pthread_cond_wait(&p->done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}

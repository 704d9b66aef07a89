/* test_base.c - status records, logging levels, checked allocation with fault injection, the growable byte buffer,
 * thread pool, clock. */
#include <stdatomic.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/bytes.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/status.h"
#include "base/threadpool.h"
#include "test.h"

static kiln_status fail_deep(kiln_err *err) { return KILN_FAIL(err, KILN_E_FORMAT, "bad %s at %d", "thing", 7); }

static void test_status_records_place_and_message(void) {
    kiln_err err = {0};
    CHECK_EQ_INT(fail_deep(&err), KILN_E_FORMAT);
    CHECK_EQ_INT(err.code, KILN_E_FORMAT);
    CHECK_EQ_STR(err.msg, "bad thing at 7");
    CHECK(strstr(err.file, "test_base.c") != NULL);
    CHECK(err.line > 0);
    kiln_err_prefix(&err, "loading %s", "x.safetensors");
    CHECK_EQ_STR(err.msg, "loading x.safetensors: bad thing at 7");
    CHECK_EQ_INT(fail_deep(NULL), KILN_E_FORMAT); /* NULL err is allowed */
    CHECK_EQ_STR(kiln_status_name(KILN_E_NOT_FOUND), "not-found");
    CHECK_EQ_STR(kiln_status_name((kiln_status)999), "unknown");
    CHECK_EQ_INT(kiln_status_exit_code(KILN_OK), 0);
    CHECK_EQ_INT(kiln_status_exit_code(KILN_E_INVALID), 2);
    CHECK(kiln_status_exit_code(KILN_E_INTERNAL) != 0);
    kiln_err_clear(&err);
    CHECK_EQ_INT(err.code, KILN_OK);
    CHECK_EQ_STR(err.msg, "");
}

static void test_log_levels(void) {
    kiln_log_level l;
    CHECK(kiln_log_parse_level("debug", &l) && l == KILN_LOG_DEBUG);
    CHECK(kiln_log_parse_level("WARN", &l) && l == KILN_LOG_WARN);
    CHECK(kiln_log_parse_level("4", &l) && l == KILN_LOG_TRACE);
    CHECK(!kiln_log_parse_level("loud", &l));
    CHECK(!kiln_log_parse_level("", &l));
    kiln_log_set_level(KILN_LOG_ERROR);
    CHECK(kiln_log_enabled(KILN_LOG_ERROR));
    CHECK(!kiln_log_enabled(KILN_LOG_INFO));
    kiln_log_set_level(KILN_LOG_WARN);
}

static void test_alloc_overflow_and_alignment(void) {
    size_t out = 0;
    CHECK(!kiln_mul_size(SIZE_MAX / 2, 3, &out));
    CHECK(kiln_mul_size(1u << 20, 1u << 10, &out) && out == (size_t)1 << 30);
    CHECK(!kiln_add_size(SIZE_MAX, 1, &out));
    CHECK(kiln_calloc(SIZE_MAX / 2, 3) == NULL);
    for (size_t n = 1; n < 300; n += 37) {
        void *p = kiln_aligned_alloc(n);
        CHECK(p && ((uintptr_t)p % KILN_ALIGN) == 0);
        kiln_aligned_free(p);
    }
    CHECK(kiln_aligned_alloc(SIZE_MAX) == NULL);
    char *s = kiln_strndup("abcdef", 3);
    CHECK_EQ_STR(s, "abc");
    kiln_free(s);
}

/* kiln_bytes_append: grows by doubling from its first capacity, keeps a NUL after the bytes, and on a failed
 * allocation or an overflowing size leaves the buffer as it was. */
static void test_bytes_append(void) {
    char *p = NULL;
    size_t len = 0, cap = 0;
    CHECK(kiln_bytes_append(&p, &len, &cap, 4, "abc", 3));
    CHECK(len == 3 && cap == 4 && !strcmp(p, "abc"));
    CHECK(kiln_bytes_append(&p, &len, &cap, 4, "defgh", 5)); /* 9 bytes with the NUL: 4 -> 16 */
    CHECK(len == 8 && cap == 16 && !strcmp(p, "abcdefgh"));
    CHECK(kiln_bytes_append(&p, &len, &cap, 4, NULL, 0));
    CHECK(len == 8 && !strcmp(p, "abcdefgh"));
    CHECK(!kiln_bytes_append(&p, &len, &cap, 4, "x", SIZE_MAX - 8)); /* len + n + 1 overflows */
    CHECK(len == 8 && cap == 16 && !strcmp(p, "abcdefgh"));
    char big[40];
    memset(big, 'z', sizeof big);
    kiln_fault_alloc_fail_at(1, false);
    CHECK(!kiln_bytes_append(&p, &len, &cap, 4, big, sizeof big)); /* the growth fails: nothing changes */
    kiln_fault_alloc_fail_at(0, false);
    CHECK(len == 8 && cap == 16 && !strcmp(p, "abcdefgh"));
    CHECK(kiln_bytes_append(&p, &len, &cap, 4, big, sizeof big));
    CHECK(len == 48 && cap == 64 && p[48] == 0 && p[47] == 'z' && p[8] == 'z');
    kiln_free(p);
}

static void test_alloc_fault_injection(void) {
    kiln_fault_alloc_fail_at(2, false);
    void *a = kiln_malloc(8), *b = kiln_malloc(8), *c = kiln_malloc(8);
    CHECK(a && !b && c);
    CHECK(kiln_fault_alloc_fired());
    kiln_free(a);
    kiln_free(c);
    kiln_fault_alloc_fail_at(1, true);
    a = kiln_malloc(8);
    b = kiln_calloc(2, 8);
    CHECK(!a && !b);
    kiln_fault_alloc_fail_at(0, false);
    a = kiln_malloc(8);
    CHECK(a != NULL);
    kiln_free(a);
}

/* A thread pool failing to allocate must report NOMEM and leak nothing, whichever allocation fails. */
static void test_pool_create_survives_every_alloc_failure(void) {
    for (uint64_t n = 1; n < 64; n++) {
        kiln_err err = {0};
        kiln_pool *pool = NULL;
        kiln_fault_alloc_fail_at(n, false);
        kiln_status s = kiln_pool_create(4, &pool, &err);
        bool fired = kiln_fault_alloc_fired();
        kiln_fault_alloc_fail_at(0, false);
        if (!fired) {
            CHECK_EQ_INT(s, KILN_OK);
            kiln_pool_destroy(pool);
            break;
        }
        CHECK_EQ_INT(s, KILN_E_NOMEM);
        CHECK(pool == NULL);
    }
}

typedef struct sum_ctx {
    _Atomic long hits[1000];
    _Atomic int max_thread;
} sum_ctx;

static void count_task(void *ctx, size_t i, int thread) {
    sum_ctx *c = ctx;
    atomic_fetch_add(&c->hits[i], 1);
    int m = atomic_load(&c->max_thread);
    while (thread > m && !atomic_compare_exchange_weak(&c->max_thread, &m, thread)) {}
}

static void nested_task(void *ctx, size_t i, int thread) {
    kiln_pool *pool = ctx;
    static sum_ctx inner; /* nested runs go serial on this thread; hits only need to be counted */
    kiln_pool_run(pool, 10, count_task, &inner);
    (void)i;
    (void)thread;
}

static void test_pool_runs_every_index_once(void) {
    int sizes[] = {1, 2, 3, 8, 17};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        kiln_err err = {0};
        kiln_pool *pool;
        CHECK_EQ_INT(kiln_pool_create(sizes[s], &pool, &err), KILN_OK);
        CHECK_EQ_INT(kiln_pool_size(pool), sizes[s]);
        for (int rep = 0; rep < 50; rep++) {
            static sum_ctx c;
            memset(&c, 0, sizeof c);
            size_t n = (size_t)(rep * 19 % 1000) + 1;
            kiln_pool_run(pool, n, count_task, &c);
            for (size_t i = 0; i < 1000; i++) CHECK_EQ_INT(c.hits[i], i < n ? 1 : 0);
            CHECK(c.max_thread < sizes[s]);
        }
        kiln_pool_run(pool, 7, nested_task, pool); /* must not deadlock */
        kiln_pool_destroy(pool);
    }
    static sum_ctx c;
    kiln_pool_run(NULL, 5, count_task, &c); /* NULL pool: serial */
    CHECK_EQ_INT(c.hits[4], 1);
}

static void test_pool_rejects_bad_counts(void) {
    kiln_err err = {0};
    kiln_pool *pool = (kiln_pool *)1;
    CHECK_EQ_INT(kiln_pool_create(KILN_POOL_MAX_THREADS + 1, &pool, &err), KILN_E_INVALID);
    CHECK(pool == NULL);
    setenv("KILN_THREADS", "zero", 1);
    CHECK_EQ_INT(kiln_pool_create(0, &pool, &err), KILN_E_INVALID);
    CHECK_ERR_CONTAINS(&err, "KILN_THREADS");
    setenv("KILN_THREADS", "3", 1);
    CHECK_EQ_INT(kiln_pool_create(0, &pool, &err), KILN_OK);
    CHECK_EQ_INT(kiln_pool_size(pool), 3);
    kiln_pool_destroy(pool);
    unsetenv("KILN_THREADS");
}

static void test_clock_monotonic(void) {
    uint64_t a = kiln_clock_ns(), b = kiln_clock_ns();
    CHECK(b >= a);
    CHECK(kiln_clock_wall_s() > 1.7e9); /* after 2023 */
    CHECK(kiln_clock_since_start_s() >= 0.0);
}

int main(void) {
    RUN(test_status_records_place_and_message);
    RUN(test_log_levels);
    RUN(test_alloc_overflow_and_alignment);
    RUN(test_alloc_fault_injection);
    RUN(test_pool_create_survives_every_alloc_failure);
    RUN(test_bytes_append);
    RUN(test_pool_runs_every_index_once);
    RUN(test_pool_rejects_bad_counts);
    RUN(test_clock_monotonic);
    return test_summary();
}

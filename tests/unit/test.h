/* test.h - a minimal test harness: CHECK macros that record failures and keep going, and a summary line
 * "N passed, M failed" that CI reads. Each test file defines its tests as static void functions and a main:
 *
 *     static void test_add(void) { CHECK_EQ_INT(1 + 1, 2); }
 *     int main(void) { RUN(test_add); return test_summary(); }
 */
#ifndef KILN_TEST_H
#define KILN_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_failures_in_current, test_passed, test_failed;
static const char *test_current = "";

#define CHECK(cond)                                                                                           \
    do {                                                                                                      \
        if (!(cond)) {                                                                                        \
            fprintf(stderr, "  FAIL %s:%d in %s: %s\n", __FILE__, __LINE__, test_current, #cond);             \
            test_failures_in_current++;                                                                       \
        }                                                                                                     \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                                  \
    do {                                                                                                      \
        if (!(cond)) {                                                                                        \
            fprintf(stderr, "  FAIL %s:%d in %s: %s: ", __FILE__, __LINE__, test_current, #cond);             \
            fprintf(stderr, __VA_ARGS__);                                                                     \
            fputc('\n', stderr);                                                                              \
            test_failures_in_current++;                                                                       \
        }                                                                                                     \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                                    \
    do {                                                                                                      \
        long long ta_ = (long long)(a), tb_ = (long long)(b);                                                 \
        CHECK_MSG(ta_ == tb_, "%lld != %lld", ta_, tb_);                                                      \
    } while (0)

#define CHECK_EQ_STR(a, b)                                                                                    \
    do {                                                                                                      \
        const char *ta_ = (a), *tb_ = (b);                                                                    \
        CHECK_MSG(ta_ && tb_ && strcmp(ta_, tb_) == 0, "\"%s\" != \"%s\"", ta_ ? ta_ : "(null)",             \
                  tb_ ? tb_ : "(null)");                                                                      \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                                                 \
    do {                                                                                                      \
        double ta_ = (double)(a), tb_ = (double)(b);                                                          \
        CHECK_MSG(fabs(ta_ - tb_) <= (tol), "%.9g vs %.9g (tol %.3g)", ta_, tb_, (double)(tol));            \
    } while (0)

/* The message of a kiln_err must contain a substring. */
#define CHECK_ERR_CONTAINS(errp, needle)                                                                      \
    CHECK_MSG(strstr((errp)->msg, (needle)) != NULL, "message \"%s\" lacks \"%s\"", (errp)->msg, (needle))

#define RUN(fn)                                                                                               \
    do {                                                                                                      \
        test_current = #fn;                                                                                   \
        test_failures_in_current = 0;                                                                         \
        fn();                                                                                                 \
        if (test_failures_in_current) {                                                                       \
            test_failed++;                                                                                    \
            fprintf(stderr, "not ok %s\n", #fn);                                                              \
        } else {                                                                                              \
            test_passed++;                                                                                    \
            printf("ok %s\n", #fn);                                                                           \
        }                                                                                                     \
    } while (0)

static inline int test_summary(void) {
    printf("%d passed, %d failed\n", test_passed, test_failed);
    return test_failed ? 1 : 0;
}

/* Path of a file in the source tree (tests run from the build dir). Static buffer: use immediately. */
static inline const char *test_src_path(const char *rel) {
    static char buf[4096];
    const char *root = getenv("KILN_SOURCE_DIR");
    snprintf(buf, sizeof buf, "%s/%s", root ? root : KILN_SOURCE_DIR, rel);
    return buf;
}

#endif

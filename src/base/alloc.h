/* alloc.h - every heap allocation in kiln goes through here.
 *
 * Why: (1) sizes are overflow-checked (kiln_mul_size) before anything is allocated; (2) a test can make the
 * N-th allocation fail (kiln_fault_alloc_fail_at) and prove that every failure path cleans up, the way SQLite's
 * fault simulator does; (3) large buffers are 64-byte aligned for AVX-512 loads.
 *
 * kiln_malloc/kiln_calloc/kiln_realloc return NULL on failure (never abort); free with kiln_free.
 * kiln_aligned_alloc returns 64-byte aligned memory; free it with kiln_aligned_free.
 */
#ifndef KILN_BASE_ALLOC_H
#define KILN_BASE_ALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KILN_ALIGN 64

void *kiln_malloc(size_t n);
void *kiln_calloc(size_t count, size_t size);
void *kiln_realloc(void *p, size_t n);
void kiln_free(void *p);
char *kiln_strdup(const char *s);
char *kiln_strndup(const char *s, size_t n);

void *kiln_aligned_alloc(size_t n); /* 64-byte aligned, n rounded up; NULL on failure */
void kiln_aligned_free(void *p);

/* *out = a * b; false (and *out untouched) on overflow. */
static inline bool kiln_mul_size(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool kiln_add_size(size_t a, size_t b, size_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

/* Fault injection for tests: the n-th allocation from now (1-based) and, if repeat, every later one fails.
 * n = 0 disables. Returns how many allocations have happened since the last arm (for loops that try N=1,2,..). */
void kiln_fault_alloc_fail_at(uint64_t n, bool repeat);
uint64_t kiln_fault_alloc_count(void);
bool kiln_fault_alloc_fired(void);

#endif

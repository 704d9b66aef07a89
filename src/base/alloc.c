/* alloc.c - checked allocation with fault injection (see alloc.h). */
#include "base/alloc.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static _Atomic uint64_t fault_at;    /* 0 = off */
static _Atomic uint64_t fault_count; /* allocations since armed */
static atomic_bool fault_repeat, fault_fired;

void kiln_fault_alloc_fail_at(uint64_t n, bool repeat) {
    atomic_store(&fault_count, 0);
    atomic_store(&fault_repeat, repeat);
    atomic_store(&fault_fired, false);
    atomic_store(&fault_at, n);
}

uint64_t kiln_fault_alloc_count(void) { return atomic_load(&fault_count); }
bool kiln_fault_alloc_fired(void) { return atomic_load(&fault_fired); }

/* True when this allocation should fail. */
static bool fault_check(void) {
    uint64_t at = atomic_load_explicit(&fault_at, memory_order_relaxed);
    uint64_t c = atomic_fetch_add(&fault_count, 1) + 1;
    if (at == 0) return false;
    if (c == at || (c > at && atomic_load(&fault_repeat))) {
        atomic_store(&fault_fired, true);
        return true;
    }
    return false;
}

void *kiln_malloc(size_t n) {
    if (fault_check()) return NULL;
    return malloc(n ? n : 1);
}

void *kiln_calloc(size_t count, size_t size) {
    if (fault_check()) return NULL;
    size_t total;
    if (!kiln_mul_size(count, size, &total)) return NULL;
    return calloc(total ? count : 1, total ? size : 1);
}

void *kiln_realloc(void *p, size_t n) {
    if (fault_check()) return NULL;
    return realloc(p, n ? n : 1);
}

void kiln_free(void *p) { free(p); }

char *kiln_strndup(const char *s, size_t n) {
    size_t len = strnlen(s, n);
    char *d = kiln_malloc(len + 1);
    if (!d) return NULL;
    memcpy(d, s, len);
    d[len] = '\0';
    return d;
}

char *kiln_strdup(const char *s) { return kiln_strndup(s, SIZE_MAX); }

void *kiln_aligned_alloc(size_t n) {
    if (fault_check()) return NULL;
    size_t rounded;
    if (!kiln_add_size(n ? n : 1, KILN_ALIGN - 1, &rounded)) return NULL;
    rounded &= ~(size_t)(KILN_ALIGN - 1);
    return aligned_alloc(KILN_ALIGN, rounded);
}

void kiln_aligned_free(void *p) { free(p); }

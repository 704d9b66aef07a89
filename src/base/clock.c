/* clock.c - monotonic time (see clock.h). */
#include "base/clock.h"

#include <stdatomic.h>
#include <time.h>

uint64_t kiln_clock_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double kiln_clock_s(void) { return (double)kiln_clock_ns() * 1e-9; }

double kiln_clock_since_start_s(void) {
    static _Atomic uint64_t start;
    uint64_t now = kiln_clock_ns(), zero = 0;
    atomic_compare_exchange_strong(&start, &zero, now);
    return (double)(now - atomic_load(&start)) * 1e-9;
}

double kiln_clock_wall_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

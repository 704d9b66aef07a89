/* clock.h - monotonic time. Never goes backwards; unaffected by wall-clock changes. */
#ifndef KILN_BASE_CLOCK_H
#define KILN_BASE_CLOCK_H

#include <stdint.h>

/* Nanoseconds from an arbitrary fixed origin (CLOCK_MONOTONIC). */
uint64_t kiln_clock_ns(void);
/* Seconds as a double, same origin. */
double kiln_clock_s(void);
/* Seconds since the first call into the clock (roughly process start); used by the logger. */
double kiln_clock_since_start_s(void);
/* Wall-clock time as Unix seconds with sub-second precision (for reports, never for durations). */
double kiln_clock_wall_s(void);

#endif

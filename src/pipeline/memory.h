/* memory.h - process memory facts for the up-front request estimate and the perf dump (Linux /proc). */
#ifndef KILN_PIPELINE_MEMORY_H
#define KILN_PIPELINE_MEMORY_H

#include <stddef.h>

/* Memory a request may use: MemAvailable plus this process's resident set (what it already holds can be
 * reused). 0 when unknown. */
size_t kiln_mem_usable(void);
/* Peak resident set (VmHWM) in bytes; 0 when unknown. */
size_t kiln_mem_peak_rss(void);
/* Resets the peak (writes 5 to /proc/self/clear_refs); harmless when not permitted. */
void kiln_mem_reset_peak(void);

#endif

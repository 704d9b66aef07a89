/* memory.c - /proc readers (see memory.h). */
#include "pipeline/memory.h"

#include <stdio.h>
#include <string.h>

/* The value in kB of "Key:   123 kB" in a /proc file, as bytes; 0 when absent. */
static size_t proc_kb(const char *path, const char *key) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[256];
    size_t kl = strlen(key), v = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, key, kl) && line[kl] == ':') {
            unsigned long long kb = 0;
            if (sscanf(line + kl + 1, "%llu", &kb) == 1) v = (size_t)kb * 1024;
            break;
        }
    }
    fclose(f);
    return v;
}

size_t kiln_mem_usable(void) {
    size_t avail = proc_kb("/proc/meminfo", "MemAvailable");
    if (!avail) return 0;
    return avail + proc_kb("/proc/self/status", "VmRSS");
}

size_t kiln_mem_peak_rss(void) { return proc_kb("/proc/self/status", "VmHWM"); }

void kiln_mem_reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return;
    fputs("5", f);
    fclose(f);
}

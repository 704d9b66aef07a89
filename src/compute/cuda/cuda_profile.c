/* cuda_profile.c - the per-op GPU time table of KILN_CUDA_PROFILE=1 (cuda_profile.h). */
#include "compute/cuda/cuda_profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kcu_prof_add(kcu_profile *p, const char *name, double ms) {
    for (int i = 0; i < p->n_rows; i++)
        if (p->rows[i].name == name || strcmp(p->rows[i].name, name) == 0) {
            p->rows[i].calls++;
            p->rows[i].ms += ms;
            return;
        }
    if (p->n_rows == KCU_PROF_OPS) {
        p->dropped++;
        return;
    }
    p->rows[p->n_rows++] = (kcu_prof_row){name, 1, ms};
}

static int by_time(const void *a, const void *b) {
    const kcu_prof_row *x = a, *y = b;
    return x->ms < y->ms ? 1 : x->ms > y->ms ? -1 : strcmp(x->name, y->name);
}

size_t kcu_prof_format(const kcu_profile *p, char *buf, size_t cap) {
    kcu_prof_row rows[KCU_PROF_OPS];
    int n = p->n_rows;
    memcpy(rows, p->rows, (size_t)n * sizeof *rows);
    qsort(rows, (size_t)n, sizeof *rows, by_time);
    double total = 0;
    uint64_t calls = 0;
    for (int i = 0; i < n; i++) total += rows[i].ms, calls += rows[i].calls;
    size_t len = 0;
    char line[256];
    if (cap) buf[0] = 0;
    for (int i = 0; i <= n; i++) {
        int w = i < n ? snprintf(line, sizeof line, "cuda: profile: %-22s %8llu calls %10.3f ms %5.1f%%\n",
                                 rows[i].name, (unsigned long long)rows[i].calls, rows[i].ms,
                                 total > 0 ? 100.0 * rows[i].ms / total : 0.0)
                      : snprintf(line, sizeof line, "cuda: profile: %-22s %8llu calls %10.3f ms (GPU time between "
                                 "op starts, eager launches)%s\n", "total", (unsigned long long)calls, total,
                                 p->dropped ? ", some ops past the table" : "");
        if (w < 0) continue;
        if (len + (size_t)w < cap) memcpy(buf + len, line, (size_t)w + 1);
        len += (size_t)w;
    }
    return len;
}

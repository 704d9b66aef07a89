/* cuda_profile.h - KILN_CUDA_PROFILE=1: where a run's GPU time goes, per backend op, without a profiler.
 *
 * Why: Nsight Compute times one kernel at a time, and a GPU is lent for minutes: a whole 1024x1024 image needs
 * its split by op (matmul, attention, conv2d, group_norm, ...) from one ordinary run. Each op records a CUDA
 * event on the backend's one stream when it starts (cuda_rt.cu kcu_op_begin); after a synchronisation the time
 * between an op's event and the next one's is that op's - the stream runs them in order - and is added to the op's
 * row here. Graphs are not captured while profiling (an event inside a capture would be replayed as a node), so
 * the figures are eager launches', gaps where the GPU waited for the host included.
 *
 * This file is the host side (pure logic, unit-tested in tests/unit/test_compute_cuda_profile.c); the events are
 * cuda_rt.cu's. */
#ifndef KILN_COMPUTE_CUDA_PROFILE_H
#define KILN_COMPUTE_CUDA_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#define KCU_PROF_OPS 48 /* distinct op names (the backend has about 25) */

typedef struct kcu_prof_row {
    const char *name; /* a static string (the op function's __func__) */
    uint64_t calls;
    double ms;
} kcu_prof_row;

typedef struct kcu_profile {
    kcu_prof_row rows[KCU_PROF_OPS];
    int n_rows;
    uint64_t dropped; /* intervals of names past KCU_PROF_OPS */
    /* the events recorded since the last flush: pool[i] (cudaEvent_t) marks where op names[i] started (NULL:
     * where the last one ended), in stream order; created once and reused after each flush */
    void **pool;
    const char **names;
    size_t n_marks, cap_marks, n_pool;
} kcu_profile;

/* Adds one interval of ms to the row of name (a new row when it is new). */
void kcu_prof_add(kcu_profile *p, const char *name, double ms);
/* Writes the rows, most time first, as lines "cuda: profile: NAME  CALLS calls  MS ms  PCT%" and a total line,
 * into buf (always terminated); returns the length it needed. */
size_t kcu_prof_format(const kcu_profile *p, char *buf, size_t cap);

#endif

/* cpu_bench.h - measurements of this machine for `kiln bench-ops`: the peak arithmetic rate of each kind of
 * instruction the CPU backend uses, run on every thread of a pool at once.
 *
 *     double gf = kiln_cpu_peak_gflops(KILN_PEAK_AMX_BF16, 2, 0.3);   // 0 if this CPU lacks AMX
 */
#ifndef KILN_COMPUTE_CPU_BENCH_H
#define KILN_COMPUTE_CPU_BENCH_H

#include <stdbool.h>

typedef enum kiln_peak_kind {
    KILN_PEAK_F32_AVX2,    /* vfmadd231ps ymm: 16 flop */
    KILN_PEAK_F32_AVX512,  /* vfmadd231ps zmm: 32 flop */
    KILN_PEAK_BF16_AVX512, /* vdpbf16ps zmm: 64 flop */
    KILN_PEAK_AMX_BF16,    /* tdpbf16ps 16x16x32: 16384 flop */
    KILN_PEAK_COUNT
} kiln_peak_kind;

const char *kiln_peak_name(kiln_peak_kind k);
/* GFLOP/s of back-to-back independent instructions of that kind on n_threads threads for about `seconds`
 * in all (the median of seven runs), counted per CPU-second of the process times n_threads, so that other
 * processes sharing the cores do not lower it. 0 when the CPU does not have the instructions. */
double kiln_cpu_peak_gflops(kiln_peak_kind k, int n_threads, double seconds);
/* Whether the AVX-512 tier's FAST matmul runs on bf16 dot products (true) or the packed f32 FMA kernel: the
 * peak its rates are measured against (cpu_internal.h, kiln_cpu_prefers_bf16_dot). */
bool kiln_cpu_prefers_bf16_dot(void);

#endif

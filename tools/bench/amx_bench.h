/* amx_bench.h - what the standalone AMX microbenchmarks in tools/bench share (they build with one gcc line each,
 * without the kiln library): the tile configuration, the tile-data permission request, thread CPU time, and the
 * register-only 4-tile tdpbf16ps loop every figure is a fraction of (the same loop as src/compute/cpu/peak.c).
 * Needs a CPU with AMX-BF16 and Linux >= 5.16. */
#ifndef KILN_TOOLS_AMX_BENCH_H
#define KILN_TOOLS_AMX_BENCH_H

#define _GNU_SOURCE
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define TARGET __attribute__((target("amx-tile,amx-bf16,avx512f")))
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_cfg;

/* 1 if this CPU and kernel run AMX tiles (else a message naming the tool, and 0) */
static int amx_available(const char *tool) {
    if (!__builtin_cpu_supports("avx512f") || syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)) {
        fprintf(stderr, "%s: no AMX on this CPU (or the kernel refused tile data)\n", tool);
        return 0;
    }
    return 1;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* all 8 tiles 16 rows x 64 bytes */
TARGET static void configure(void) {
    tile_cfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++) c.colsb[t] = 64, c.rows[t] = 16;
    __asm__ volatile("ldtilecfg %0" ::"m"(c));
}

/* tiles configured, 4..7 loaded with the 1 KB `operand`, C tiles 0..3 zeroed */
TARGET static void load_operands(const uint16_t *operand) {
    configure();
    _tile_loadd(4, operand, 64);
    _tile_loadd(5, operand, 64);
    _tile_loadd(6, operand, 64);
    _tile_loadd(7, operand, 64);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
}

/* GFLOP/s of n rounds of 4 products into 4 C tiles, operands in tiles 4..7 (load_operands) */
TARGET static double peak_gflops(const uint16_t *operand, long n) {
    load_operands(operand);
    double t = now();
    for (long i = 0; i < n; i++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    t = now() - t;
    _tile_release();
    return (double)n * 4 * 16384.0 / t / 1e9;
}

#endif

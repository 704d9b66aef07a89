/* amx_tile_loop.c - how much the AMX 2x2 tile loop loses when its C tiles are stored and reloaded every S k
 * steps (docs/cpu-backend.md, "Third pass"). Every operand sits in L1, so only the drain is measured: "noC"
 * never stores C, "C1" stores/reloads one 4 KB set (L1), "C64" cycles through 64 sets (256 KB: L2). Each round
 * first times the register-only tdpbf16ps loop (the peak) and prints every variant as a % of it; one thread,
 * thread CPU time. Rounds where the peak reads far below ~1,024 flop/cycle ran beside a busy neighbour.
 *
 *     gcc -O2 -o /tmp/amx_tile_loop tools/bench/amx_tile_loop.c && /tmp/amx_tile_loop
 *
 * Needs a CPU with AMX-BF16 and Linux >= 5.16 (amx_bench.h). */
#include "amx_bench.h"

static uint16_t A[8 * 1024] __attribute__((aligned(64))), B[8 * 1024] __attribute__((aligned(64)));
static float C[64][4][256] __attribute__((aligned(64)));

/* sets < 0: C never stored; else C stored/reloaded every S k steps, cycling through `sets` 4 KB buffers */
TARGET static double loop_gflops(int S, int sets, long total_steps) {
    configure();
    double t0 = now();
    int slot = 0;
    for (long done = 0; done < total_steps; done += S) {
        float(*c)[256] = C[slot];
        if (sets > 0) slot = (slot + 1) % sets;
        if (sets > 0) {
            _tile_loadd(0, c[0], 64);
            _tile_loadd(1, c[1], 64);
            _tile_loadd(2, c[2], 64);
            _tile_loadd(3, c[3], 64);
        }
        for (int k = 0; k < S; k++) {
            const uint16_t *a = A + (k & 7) * 1024, *b = B + (k & 7) * 1024;
            _tile_loadd(4, a, 64);
            _tile_loadd(6, b, 64);
            _tile_dpbf16ps(0, 4, 6);
            _tile_loadd(7, b + 512, 64);
            _tile_dpbf16ps(1, 4, 7);
            _tile_loadd(5, a + 512, 64);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
        if (sets > 0) {
            _tile_stored(0, c[0], 64);
            _tile_stored(1, c[1], 64);
            _tile_stored(2, c[2], 64);
            _tile_stored(3, c[3], 64);
        }
    }
    double t = now() - t0;
    _tile_release();
    return (double)total_steps * 4 * 16384.0 / t / 1e9;
}

int main(void) {
    if (!amx_available("amx_tile_loop")) return 2;
    for (int i = 0; i < 8 * 1024; i++) A[i] = 0x3f80, B[i] = 0x3c00; /* 1.0 and 2^-7: finite sums */
    static const int steps[] = {4, 8, 16, 32, 96, 384};
    for (int round = 0; round < 3; round++) {
        double pk = peak_gflops(A, 300000);
        printf("peak %.0f GFLOP/s:", pk);
        for (int i = 0; i < 6; i++)
            printf("  S=%d noC %.0f%% C1 %.0f%% C64 %.0f%%", steps[i], 100 * loop_gflops(steps[i], -1, 400000) / pk,
                   100 * loop_gflops(steps[i], 1, 400000) / pk, 100 * loop_gflops(steps[i], 64, 400000) / pk);
        printf("\n");
    }
    return 0;
}

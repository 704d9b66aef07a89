/* amx_overlap.c - two facts about the AMX tile unit that shape the attention kernel (docs/cpu-backend.md,
 * "Fourth pass"), measured on one thread with every operand in registers or L1:
 *   chains: tdpbf16ps into 1, 2 or 4 independent C tiles - does one accumulator chain reach the tile rate, or
 *           must products into the same C tile wait for each other?
 *   overlap: 4 tile products followed by N independent 512-bit FMAs - does the FMA work hide behind the products
 *           (time = the longer of the two) or add to them (time = the sum)?
 * Each round first times the register-only 4-tile loop (the peak); rounds where it reads far below ~1,024
 * flop/cycle ran beside a busy neighbour on a shared core.
 *
 *     gcc -O2 -o /tmp/amx_overlap tools/bench/amx_overlap.c && /tmp/amx_overlap
 *
 * Needs a CPU with AMX-BF16 and Linux >= 5.16 (amx_bench.h). */
#include "amx_bench.h"

static uint16_t ONES[16 * 32] __attribute__((aligned(64))); /* 1.0 and 2^-7 alternating: finite sums */

/* GFLOP/s of 4 products per iteration into 1 or 2 distinct C tiles (4: peak_gflops) */
TARGET static double chains_gflops(int chains, long iters) {
    load_operands(ONES);
    double t = now();
    if (chains == 1)
        for (long i = 0; i < iters; i++) {
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(0, 4, 7);
            _tile_dpbf16ps(0, 5, 6);
            _tile_dpbf16ps(0, 5, 7);
        }
    else
        for (long i = 0; i < iters; i++) {
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(0, 5, 6);
            _tile_dpbf16ps(1, 5, 7);
        }
    t = now() - t;
    _tile_release();
    return (double)iters * 4 * 16384.0 / t / 1e9;
}

/* ns per iteration of: (4 products if `tiles`) then `fmas` FMAs over 16 independent zmm accumulators */
TARGET static double overlap_ns(int tiles, int fmas, long iters) {
    load_operands(ONES);
    __m512 v[16], c = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < 16; i++) v[i] = _mm512_set1_ps((float)i);
    double t = now();
    for (long it = 0; it < iters; it++) {
        if (tiles) {
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
        for (int g = 0; g < fmas; g += 16)
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++) v[i] = _mm512_fmadd_ps(v[i], c, b);
    }
    t = now() - t;
    _tile_release();
    float s = 0;
    for (int i = 0; i < 16; i++) s += _mm512_cvtss_f32(v[i]);
    __asm__ volatile("" ::"x"(s));
    return t / (double)iters * 1e9;
}

int main(void) {
    if (!amx_available("amx_overlap")) return 2;
    for (int i = 0; i < 16 * 32; i++) ONES[i] = i & 1 ? 0x3c00 : 0x3f80;
    for (int round = 0; round < 5; round++) {
        double pk = peak_gflops(ONES, 300000);
        printf("peak %4.0f GFLOP/s  chains: 1 %3.0f%%  2 %3.0f%%  |  4 products %5.1f ns;", pk,
               100 * chains_gflops(1, 300000) / pk, 100 * chains_gflops(2, 300000) / pk, overlap_ns(1, 0, 300000));
        for (int f = 64; f <= 512; f *= 2)
            printf("  %d FMA %5.1f ns, both %5.1f", f, overlap_ns(0, f, 200000), overlap_ns(1, f, 200000));
        printf("\n");
    }
    return 0;
}

/* ew_kernels_avx2.c - the elementwise row kernels (ew_kernels.inc) compiled for the avx2 tier. */
#include "compute/cpu/ew_kernels.h"
#define VEC_AVX2 /* vec.h: forms GCC lowers well for two-ymm vectors */
#include "compute/cpu/vec.h"

#define EW_TARGET __attribute__((target("avx2,fma")))
#define EW_TABLE cpu_ew_avx2
#include "compute/cpu/ew_kernels.inc"

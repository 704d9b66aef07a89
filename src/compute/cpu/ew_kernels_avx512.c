/* ew_kernels_avx512.c - the elementwise row kernels (ew_kernels.inc) compiled for the avx512 tier. */
#include "compute/cpu/ew_kernels.h"
#include "compute/cpu/vec.h"

#define EW_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#define EW_TABLE cpu_ew_avx512
#include "compute/cpu/ew_kernels.inc"

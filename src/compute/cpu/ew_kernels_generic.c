/* ew_kernels_generic.c - the elementwise row kernels (ew_kernels.inc) compiled for the generic tier. */
#include "compute/cpu/ew_kernels.h"
#include "compute/cpu/vec.h"

#define EW_TARGET 
#define EW_TABLE cpu_ew_generic
#include "compute/cpu/ew_kernels.inc"

const cpu_ew_kernels *cpu_ew_for(kiln_cpu_tier t) {
    return t >= KILN_CPU_AVX512 ? &cpu_ew_avx512 : t >= KILN_CPU_AVX2 ? &cpu_ew_avx2 : &cpu_ew_generic;
}

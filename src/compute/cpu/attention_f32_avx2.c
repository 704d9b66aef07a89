/* attention_f32_avx2.c - the f32 attention kernel (attention_f32.inc) compiled for the avx2 tier. */
#include <math.h>

#include "compute/cpu/attention.h"
#define VEC_AVX2 /* vec.h: forms GCC lowers well for two-ymm vectors */
#include "compute/cpu/vec.h"

#define ATT_MR 6 /* queries per register block: 6 x 2 ymm sums of 16 registers */
#define ATT_NV 2
#define ATT_VL 8 /* lanes of the native vector */
#define ATT_SET1(f) ((attv){f, f, f, f, f, f, f, f})
#define ATT_NAME att_task_f32_avx2
#define ATT_TARGET __attribute__((target("avx2,fma")))
#include "compute/cpu/attention_f32.inc"

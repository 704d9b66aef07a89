/* attention_f32_avx512.c - the f32 attention kernel (attention_f32.inc) compiled for the avx512 tier. */
#include <immintrin.h>
#include <math.h>

#include "compute/cpu/attention.h"
#include "compute/cpu/vec.h"

#define ATT_MR 12 /* queries per register block: 12 x 2 zmm sums of 32 registers */
#define ATT_NV 2
#define ATT_VL 16 /* lanes of the native vector */
#define ATT_SET1(f) ((attv)_mm512_set1_ps(f)) /* "(attv){0} + f" became vaddss + a port-5 vbroadcastss */
#define ATT_NAME att_task_f32_avx512
#define ATT_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#include "compute/cpu/attention_f32.inc"

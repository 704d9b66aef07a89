/* attention_f32_avx512.c - the f32 attention kernel (attention_f32.inc) compiled for the avx512 tier. */
#include <math.h>

#include "compute/cpu/attention.h"
#include "compute/cpu/vec.h"

#define ATT_NAME att_task_f32_avx512
#define ATT_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma")))
#include "compute/cpu/attention_f32.inc"

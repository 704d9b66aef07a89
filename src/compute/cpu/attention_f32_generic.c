/* attention_f32_generic.c - the f32 attention kernel (attention_f32.inc) compiled for the generic tier. */
#include <math.h>

#include "compute/cpu/attention.h"
#include "compute/cpu/vec.h"

#define ATT_MR 6 /* queries per register block: 6 x 2 xmm sums of 16 registers */
#define ATT_NV 2
#define ATT_VL 4 /* lanes of the native vector */
#define ATT_SET1(f) ((attv){f, f, f, f})
#define ATT_NAME att_task_f32_generic
#define ATT_TARGET 
#include "compute/cpu/attention_f32.inc"

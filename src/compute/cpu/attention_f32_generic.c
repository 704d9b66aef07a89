/* attention_f32_generic.c - the f32 attention kernel (attention_f32.inc) compiled for the generic tier. */
#include <math.h>

#include "compute/cpu/attention.h"
#include "compute/cpu/vec.h"

#define ATT_NAME att_task_f32_generic
#define ATT_TARGET 
#include "compute/cpu/attention_f32.inc"

/* conv.h - a convolution's geometry, shared by conv2d.c (checks, im2col path) and conv_amx.c (implicit GEMM).
 * CPU backend internals. */
#ifndef KILN_COMPUTE_CPU_CONV_H
#define KILN_COMPUTE_CPU_CONV_H

#include "compute/cpu/cpu_internal.h"

typedef struct cpu_conv {
    int64_t ci, co, h, w_in, ho, wo, k, stride, pad_b, pad_e;
    const void *w; /* [Co][Ci][k][k] as stored */
    bool w_bf16, fast;
    cpu_param bias; /* p NULL = none */
    kiln_cpu_tier tier;
} cpu_conv;

bool cpu_conv_amx_ok(const cpu_conv *c);
void cpu_conv_amx_pack_w(const cpu_conv *c, uint16_t *wp, int64_t co0, int64_t co1);
void cpu_conv_amx_pack_x(const cpu_conv *c, uint16_t *xp, const float *x, int64_t iy0, int64_t r0, int64_t r1);
void cpu_conv_amx_row(const cpu_conv *c, const uint16_t *xp, const uint16_t *wpk, int64_t oy, int64_t oy0,
                      int64_t co0, float *y);

#endif

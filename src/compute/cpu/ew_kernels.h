/* ew_kernels.h - row kernels of the elementwise ops, one table per tier (ew_kernels.inc compiled three times
 * with different target attributes; vec.h vectors become zmm, ymm pairs or xmm quads). */
#ifndef KILN_COMPUTE_CPU_EW_KERNELS_H
#define KILN_COMPUTE_CPU_EW_KERNELS_H

#include "compute/cpu/cpu_internal.h"

/* The activation of act_mul (one kernel for every gated product: y = act(a) * b). */
typedef enum cpu_ew_act { CPU_ACT_SILU, CPU_ACT_GELU } cpu_ew_act;

typedef struct cpu_ew_kernels {
    void (*silu)(float *y, const float *x, int64_t n);
    void (*gelu_tanh)(float *y, const float *x, int64_t n);
    /* y = act(a) * b (SiLU: swiglu, silu_mul; GELU tanh: gelu_mul); y may be a */
    void (*act_mul)(float *y, const float *a, const float *b, cpu_ew_act act, int64_t n);
    void (*axpb)(float *y, const float *x, float a, float b, int64_t n);   /* y = a x + b */
    void (*gated_add)(float *x, const float *gate, const float *y, int64_t n); /* x += gate * y */
    void (*add)(float *y, const float *a, const float *b, int64_t n);
    /* y = exp(x - m), returns the sum (f32 lanes, double across lanes) */
    double (*exp_sub_sum)(float *y, const float *x, float m, int64_t n);
    float (*max)(const float *x, int64_t n);
    /* sum of (x - m)^p for p = 1 or 2: f32 lanes over blocks of 256, blocks summed in double (norm statistics) */
    double (*sum_dev)(const float *x, float m, int p, int64_t n);
    /* y = x * s + t, then SiLU if silu (group norm's affine step) */
    void (*affine)(float *y, const float *x, float s, float t, bool silu, int64_t n);
    /* y += a * x (the direct convolution's inner step, conv2d.c) */
    void (*axpy)(float *y, const float *x, float a, int64_t n);
    /* y = x rounded to bf16 (kept in f32): FAST operands for the direct convolution */
    void (*round_bf16)(float *y, const float *x, int64_t n);
    /* y = ((x - m) * r) * (1 + scale) + shift   (layer_norm_modulate's apply step; scale/shift may be NULL) */
    void (*ln_apply)(float *y, const float *x, float m, float r, const float *shift, const float *scale, int64_t n);
} cpu_ew_kernels;

const cpu_ew_kernels *cpu_ew_for(kiln_cpu_tier t);
extern const cpu_ew_kernels cpu_ew_generic, cpu_ew_avx2, cpu_ew_avx512;

#endif

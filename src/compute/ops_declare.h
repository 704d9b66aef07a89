/* ops_declare.h - one list of the op entry points a backend defines: KILN_DECLARE_OPS(cpu) declares
 * cpu_matmul ... cpu_upsample2x, each with the signature of its kiln_ops field (ops.h).
 *
 * Why a macro: the CPU (cpu/cpu_internal.h) and CUDA (cuda/cuda_ops.h) backends share names, argument order
 * and tensor structs (cpu_rope and cuda_rope, both kiln_ops.rope), so their declarations were one list written
 * twice. The compiler checks this list against kiln_ops where each backend fills in its table.
 */
#ifndef KILN_COMPUTE_OPS_DECLARE_H
#define KILN_COMPUTE_OPS_DECLARE_H

#include "compute/ops.h"

#define KILN_DECLARE_OPS(P)                                                                                     \
    kiln_status P##_matmul(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, const kiln_tensor *w,        \
                           const kiln_tensor *bias, const kiln_epilogue *epi, kiln_err *err);                   \
    kiln_status P##_attention(kiln_backend *be, kiln_tensor *out, const kiln_tensor *q, const kiln_tensor *k,   \
                              const kiln_tensor *v, int n_q_heads, int n_kv_heads, float scale, bool causal,    \
                              const kiln_tensor *key_mask, const kiln_tensor *bias, kiln_err *err);             \
    kiln_status P##_rms_norm(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, const kiln_tensor *gain,   \
                             float eps, kiln_err *err);                                                         \
    kiln_status P##_layer_norm_modulate(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x,                 \
                                        const kiln_tensor *shift, const kiln_tensor *scale, float eps,          \
                                        kiln_err *err);                                                         \
    kiln_status P##_rope(kiln_backend *be, kiln_tensor *x, const kiln_tensor *cos, const kiln_tensor *sin,      \
                         int n_heads, bool interleaved, kiln_err *err);                                         \
    kiln_status P##_swiglu(kiln_backend *be, kiln_tensor *y, const kiln_tensor *ab, kiln_err *err);             \
    kiln_status P##_silu_mul(kiln_backend *be, kiln_tensor *y, const kiln_tensor *a, const kiln_tensor *b,      \
                             kiln_err *err);                                                                    \
    kiln_status P##_gelu_mul(kiln_backend *be, kiln_tensor *y, const kiln_tensor *a, const kiln_tensor *b,      \
                             kiln_err *err);                                                                    \
    kiln_status P##_silu(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, kiln_err *err);                \
    kiln_status P##_gelu_tanh(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, kiln_err *err);           \
    kiln_status P##_softmax(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, kiln_err *err);             \
    kiln_status P##_add(kiln_backend *be, kiln_tensor *y, const kiln_tensor *a, const kiln_tensor *b,           \
                        kiln_err *err);                                                                         \
    kiln_status P##_gated_add(kiln_backend *be, kiln_tensor *x, const kiln_tensor *gate, const kiln_tensor *y,  \
                              kiln_err *err);                                                                   \
    kiln_status P##_scale_shift(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, float a, float b,       \
                                kiln_err *err);                                                                 \
    kiln_status P##_copy(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, kiln_err *err);                \
    kiln_status P##_conv2d(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, const kiln_tensor *w,        \
                           const kiln_tensor *bias, int stride, int pad_begin, int pad_end, kiln_err *err);     \
    kiln_status P##_group_norm(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, int groups,              \
                               const kiln_tensor *gamma, const kiln_tensor *beta, float eps, bool silu,         \
                               kiln_err *err);                                                                  \
    kiln_status P##_upsample2x(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, kiln_err *err)

#endif

/* cuda_ops.h - the CUDA backend's entry points, one per kiln_ops field, with the same names (cuda_ for cpu_),
 * argument order and tensor structs as the CPU backend's (cpu_internal.h). Each checks its arguments with
 * cuda_check.h and enqueues its kernels on the backend's stream. Only defined when built with KILN_HAVE_CUDA. */
#ifndef KILN_COMPUTE_CUDA_OPS_H
#define KILN_COMPUTE_CUDA_OPS_H

#include "compute/ops.h"

kiln_status cuda_matmul(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, const kiln_tensor *w,
                        const kiln_tensor *bias, const kiln_epilogue *epi, kiln_err *err);
kiln_status cuda_attention(kiln_backend *be, kiln_tensor *out, const kiln_tensor *q, const kiln_tensor *k,
                           const kiln_tensor *v, int n_q_heads, int n_kv_heads, float scale, bool causal,
                           const kiln_tensor *key_mask, kiln_err *err);
kiln_status cuda_rms_norm(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, const kiln_tensor *gain, float eps,
                          kiln_err *err);
kiln_status cuda_layer_norm_modulate(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, const kiln_tensor *shift,
                                     const kiln_tensor *scale, float eps, kiln_err *err);
kiln_status cuda_rope(kiln_backend *be, kiln_tensor *x, const kiln_tensor *cos, const kiln_tensor *sin, int n_heads,
                      bool interleaved, kiln_err *err);
kiln_status cuda_swiglu(kiln_backend *be, kiln_tensor *y, const kiln_tensor *ab, kiln_err *err);
kiln_status cuda_silu_mul(kiln_backend *be, kiln_tensor *y, const kiln_tensor *a, const kiln_tensor *b, kiln_err *err);
kiln_status cuda_silu(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, kiln_err *err);
kiln_status cuda_gelu_tanh(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, kiln_err *err);
kiln_status cuda_softmax(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, kiln_err *err);
kiln_status cuda_add(kiln_backend *be, kiln_tensor *y, const kiln_tensor *a, const kiln_tensor *b, kiln_err *err);
kiln_status cuda_gated_add(kiln_backend *be, kiln_tensor *x, const kiln_tensor *gate, const kiln_tensor *y,
                           kiln_err *err);
kiln_status cuda_scale_shift(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, float a, float b, kiln_err *err);
kiln_status cuda_copy(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, kiln_err *err);
kiln_status cuda_conv2d(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, const kiln_tensor *w,
                        const kiln_tensor *bias, int stride, int pad_begin, int pad_end, kiln_err *err);
kiln_status cuda_group_norm(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, int groups,
                            const kiln_tensor *gamma, const kiln_tensor *beta, float eps, bool silu, kiln_err *err);
kiln_status cuda_upsample2x(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, kiln_err *err);

#endif

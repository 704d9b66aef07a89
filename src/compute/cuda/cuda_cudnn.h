/* cuda_cudnn.h - cuDNN where it beats kiln's own kernels, opt-in until a GPU run has measured it beside them
 * (tests/gpu/run.sh does): attention variant 3, cuDNN's fused scaled-dot-product attention (its flash-attention
 * engines, built for each GPU generation by NVIDIA; KILN_CUDA_ATTENTION=cudnn), and the VAE's convolutions as
 * cuDNN convolutions with the bias fused (KILN_CUDA_CONV=cudnn) instead of im2col and a GEMM.
 *
 * cuDNN is not linked: cuda_cudnn.cpp is compiled against the headers of cuDNN's frontend (PyPI
 * nvidia-cudnn-frontend, header-only C++; scripts/fetch-cudnn-frontend.sh) in its dynamic-loading mode, and loads
 * libcudnn.so.9 (or the file KILN_CUDNN names) when the backend opens with the variant asked for - a machine
 * without cuDNN still runs kiln, and asking for it there is an error that says what failed to load. Built when
 * CMake found the frontend headers (KILN_HAVE_CUDNN).
 *
 * What cuDNN is given: the calls its SDPA runs exactly as kiln's attention (cuda_ops.c) - bf16 q, k, v and out,
 * head dim a multiple of 8 up to 128, 16-byte aligned rows, no key mask, no additive bias, causal only for as many
 * queries as keys (kiln's causal mask is cuDNN's top-left one). Every other call goes to variant 2, and the close
 * line counts both. Convolutions: FAST, bf16 x and w (the weights as stored, [Co, Ci, kh, kw]), a bf16 or f32 y,
 * an f32 or bf16 bias or none, NCHW as kiln keeps images, 16-byte aligned; EXACT keeps its f32 GEMM. The rules are
 * plain C here, so a host test checks them without a GPU. */
#ifndef KILN_COMPUTE_CUDA_CUDNN_H
#define KILN_COMPUTE_CUDA_CUDNN_H

#include <stdbool.h>
#include <stdint.h>

#include "compute/cuda/cuda_check.h"

#define KCU_CUDNN_MAX_DH 128

static inline bool kcu_cudnn_mat_ok(const kcu_mat *m) {
    return m->dt == KILN_DT_BF16 && m->ld % 8 == 0 && (uintptr_t)m->data % 16 == 0;
}

/* NULL when cuDNN's SDPA takes this attention call, else why not (for the log) */
static inline const char *kcu_cudnn_attention_refusal(const kcu_mat *out, const kcu_mat *q, const kcu_mat *k,
                                                      const kcu_mat *v, int n_q_heads, int n_kv_heads, bool causal,
                                                      bool key_mask, bool bias) {
    if (key_mask) return "a key mask";
    if (bias) return "an additive bias";
    if (!kcu_cudnn_mat_ok(out) || !kcu_cudnn_mat_ok(q) || !kcu_cudnn_mat_ok(k) || !kcu_cudnn_mat_ok(v))
        return "not bf16 with 16-byte aligned rows";
    if (n_q_heads <= 0 || n_kv_heads <= 0 || n_q_heads % n_kv_heads) return "a head count that does not divide";
    int64_t dh = q->cols / n_q_heads;
    if (dh * n_q_heads != q->cols || dh % 8 || dh > KCU_CUDNN_MAX_DH) return "a head dim over 128 or not a multiple of 8";
    if (q->rows <= 0 || k->rows <= 0) return "no queries or no keys";
    if (causal && q->rows != k->rows) return "causal with more keys than queries";
    return NULL;
}

/* NULL when cuDNN takes this convolution, else why not */
static inline const char *kcu_cudnn_conv_refusal(bool fast, kiln_dtype ydt, const void *y, kiln_dtype xdt, const void *x,
                                                 kiln_dtype wdt, const void *w, const kcu_mat *bias) {
    if (!fast) return "EXACT (f32 GEMMs)";
    if (xdt != KILN_DT_BF16 || wdt != KILN_DT_BF16) return "x or w not bf16";
    if (ydt != KILN_DT_BF16 && ydt != KILN_DT_F32) return "y neither bf16 nor f32";
    if (bias && bias->data && bias->dt != KILN_DT_F32 && bias->dt != KILN_DT_BF16) return "a bias neither f32 nor bf16";
    if ((uintptr_t)y % 16 || (uintptr_t)x % 16 || (uintptr_t)w % 16 || (bias && (uintptr_t)bias->data % 16))
        return "not 16-byte aligned";
    return NULL;
}

#endif

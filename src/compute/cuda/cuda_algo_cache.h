/* cuda_algo_cache.h - the GEMM algorithm cache: one pinned cuBLASLt algorithm per GEMM shape.
 *
 * Why: cuBLASLt's heuristic may answer differently for the same shape over time (or after a library update
 * inside a process, or with a different workspace size), and different algorithms sum in different orders, so
 * the bits of a result can change from one call to the next. Asking once per shape and reusing the answer pins
 * the algorithm: same shape, same algorithm, same bits (the deterministic mode also restricts the heuristic to
 * algorithms without split-K atomics). It also keeps the heuristic query (tens of microseconds) out of the
 * denoising loop and out of CUDA-graph capture.
 *
 * Pure host logic: the algorithm is an opaque 64-byte blob (cublasLtMatmulAlgo_t is 8 x uint64) that only
 * cuda_gemm.cu interprets. Unit-tested in tests/unit/test_compute_cuda_algo_cache.c.
 *
 *     kcu_algo_cache c;  kcu_algo_cache_init(&c);
 *     const kcu_algo *a = kcu_algo_cache_find(&c, &key);
 *     if (!a) { kcu_algo fresh = pick(...); KILN_TRY(kcu_algo_cache_put(&c, &key, &fresh, err)); }
 *     kcu_algo_cache_free(&c);
 */
#ifndef KILN_COMPUTE_CUDA_ALGO_CACHE_H
#define KILN_COMPUTE_CUDA_ALGO_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* Everything that selects an algorithm. Zero-initialise before filling (the bytes are hashed and compared). */
typedef struct kcu_gemm_key {
    int64_t m, n, k;       /* row-major y[m,n] = x[m,k] . w[n,k]^T */
    int64_t ldx, ldw, ldy; /* leading dimensions (elements) */
    int32_t in_dtype;      /* kiln_dtype of both operands (bf16 or f32) */
    int32_t out_dtype;     /* kiln_dtype of y */
    int32_t accumulate;    /* 1 when y += P (beta = 1) */
    int32_t align;         /* smallest pointer alignment of the operands (and a bias) in bytes (16, 8, 4, ...) */
    int32_t epilogue;      /* kcu_gemm_epilogue: what cuBLASLt's own epilogue adds */
} kcu_gemm_key;

/* A GEMM's fused epilogue (cuda_gemm.cu): none; + bias[n] in y's dtype (CUBLASLT_EPILOGUE_BIAS, as the header
 * requires); y += gate[n] * P through a device alpha vector (CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST,
 * beta = 1), the DiT's gated residual. */
typedef enum kcu_gemm_epilogue { KCU_GEMM_PLAIN = 0, KCU_GEMM_BIAS = 1, KCU_GEMM_GATE = 2 } kcu_gemm_epilogue;

typedef struct kcu_algo {
    uint64_t blob[8];       /* cublasLtMatmulAlgo_t, opaque here */
    size_t workspace_bytes; /* what the algorithm needs */
    uint64_t uses;          /* how often it was looked up (statistics) */
    int refused;            /* cuBLASLt has no algorithm for this key (a fused epilogue it does not take) */
} kcu_algo;

typedef struct kcu_algo_slot {
    kcu_gemm_key key;
    kcu_algo algo;
    int used;
} kcu_algo_slot;

typedef struct kcu_algo_cache {
    kcu_algo_slot *slots; /* open addressing, linear probing; capacity a power of two */
    size_t cap, count;
    uint64_t hits, misses;
} kcu_algo_cache;

void kcu_algo_cache_init(kcu_algo_cache *c);
void kcu_algo_cache_free(kcu_algo_cache *c);
/* The algorithm pinned for key, or NULL. Counts a hit or a miss. The pointer is valid until the next put. */
kcu_algo *kcu_algo_cache_find(kcu_algo_cache *c, const kcu_gemm_key *key);
/* Pins algo for key (replaces an existing entry). KILN_E_NOMEM when the table cannot grow. */
kiln_status kcu_algo_cache_put(kcu_algo_cache *c, const kcu_gemm_key *key, const kcu_algo *algo, kiln_err *err);
/* Drops every entry (e.g. after the workspace shrank). */
void kcu_algo_cache_clear(kcu_algo_cache *c);
/* Alignment class of a set of addresses: the largest power of two up to 16 dividing all of them. */
int32_t kcu_ptr_align(const void *a, const void *b, const void *c);

#endif

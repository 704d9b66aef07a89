/* cpu_internal.h - what the CPU backend's files share: the backend struct, the instruction-set tier picked at
 * run time, shape checks that turn tensors into plain row-major matrices, and bf16 helpers.
 *
 * Not a public header: only src/compute/cpu/ and the compute tests include it.
 */
#ifndef KILN_COMPUTE_CPU_INTERNAL_H
#define KILN_COMPUTE_CPU_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/status.h"
#include "base/threadpool.h"
#include "compute/mem_ranges.h"
#include "compute/ops.h"
#include "compute/ops_declare.h"
#include "tensor/convert.h"
#include "tensor/tensor.h"

/* Instruction-set tiers, lowest first. Each tier may use every kernel of the tiers below it. */
typedef enum kiln_cpu_tier {
    KILN_CPU_GENERIC = 0, /* portable C (the compiler may auto-vectorise for baseline x86-64) */
    KILN_CPU_AVX2,        /* AVX2 + FMA + F16C */
    KILN_CPU_AVX512,      /* AVX-512 F/BW/VL/DQ + AVX512-BF16 dot products */
    KILN_CPU_AMX,         /* AVX512 tier + AMX-BF16 tiles (Sapphire Rapids and later) */
} kiln_cpu_tier;

/* The best tier this CPU (and OS, for AMX) supports. Thread-safe, cached. */
kiln_cpu_tier kiln_cpu_detect_tier(void);
const char *kiln_cpu_tier_name(kiln_cpu_tier t); /* "generic", "avx2", "avx512", "amx" */
/* Parses KILN_CPU-style names; false if unknown. */
bool kiln_cpu_parse_tier(const char *s, kiln_cpu_tier *out);
/* Asks Linux for permission to use AMX tile data in this process (arch_prctl). Idempotent; false when the
 * kernel refuses (pre-5.16 or disabled). */
bool kiln_cpu_amx_enable(void);
/* Whether bf16 dot products (vdpbf16ps) are the faster way to multiply bf16 matrices on this CPU's AVX-512 tier:
 * on AMD Zen 4/5 one vdpbf16ps does twice the work of an f32 FMA at the same rate; on Intel (Cooper Lake,
 * Sapphire Rapids) it issues at half the FMA rate (measured here: docs/cpu-backend.md). KILN_GEMM=dot|fma
 * overrides (tests and benchmarks use it to run both kernels on one machine). */
bool kiln_cpu_prefers_bf16_dot(void);

typedef struct kiln_cpu_backend {
    kiln_backend base; /* must be first */
    kiln_pool *pool;
    int n_threads;
    kiln_cpu_tier tier;
    /* FAST bf16 matmuls on the AVX-512 tier use bf16 dot products (vdpbf16ps) instead of the packed f32 FMA
     * kernel: true where that instruction outruns f32 FMA (see kiln_cpu_prefers_bf16_dot) */
    bool prefer_bf16_dot;
    /* Grow-only scratch for one op at a time (a backend, like a CUDA stream, serves one caller at a time):
     * bf16/packed activations for matmul, K/V tiles for attention. Sized on first use, so the denoising loop
     * allocates nothing after its first step. */
    void *scratch;
    size_t scratch_cap;
    /* Strict-residency mode (KILN_STRICT_RESIDENCY=1, cpu_strict.c): every range alloc returned or place
     * recorded; ops refuse tensors outside them. Guarded by owned_lock (alloc may race an op's check). */
    bool strict;
    kiln_ranges owned;
    pthread_mutex_t owned_lock;
} kiln_cpu_backend;

/* The plain ops table of a tier (cpu_backend.c). */
const kiln_ops *cpu_tier_ops(kiln_cpu_tier tier);
/* Strict-residency mode (cpu_strict.c). The ops table of tier `tier` whose entries first check residency. */
const kiln_ops *cpu_strict_ops(kiln_cpu_tier tier);
/* Records / forgets an owned range (no-ops unless cb->strict). what: "allocation" or "placement", for errors. */
kiln_status cpu_strict_own(kiln_cpu_backend *cb, const void *p, size_t bytes, const char *what, kiln_err *err);
void cpu_strict_disown(kiln_cpu_backend *cb, const void *p, const char *what);

/* At least `bytes` of 64-byte aligned scratch owned by the backend (valid until the next call). */
kiln_status cpu_scratch(kiln_cpu_backend *cb, size_t bytes, void **out, kiln_err *err);

static inline kiln_cpu_backend *cpu_be(kiln_backend *be) { return (kiln_cpu_backend *)be; }

/* A 2-D row-major view: rows x cols elements, row stride ld (elements), last dim contiguous. */
typedef struct cpu_mat {
    char *data;
    int64_t rows, cols, ld;
    kiln_dtype dt;
} cpu_mat;

/* Views t as a matrix: the last dim is the columns, the leading dims (which must collapse into one evenly
 * strided dim) are the rows. Checks the backend is the CPU and the dtype is dt (any dtype if dt < 0). The
 * checks are compute/check.h's, shared with the CUDA backend. */
kiln_status cpu_as_mat(const kiln_tensor *t, int dt, const char *op, const char *name, cpu_mat *m, kiln_err *err);
/* A 1-D f32 vector of length n (contiguous), e.g. a gain, bias or gate. NULL t fails unless optional. */
kiln_status cpu_as_vec(const kiln_tensor *t, int64_t n, const char *op, const char *name, const float **out,
                       kiln_err *err);
/* A small parameter vector (gain, gamma, beta, bias) stored as f32 or bf16 - used as stored. */
typedef struct cpu_param {
    const void *p;
    bool bf16;
} cpu_param;
kiln_status cpu_as_param(const kiln_tensor *t, int64_t n, const char *op, const char *name, cpu_param *out,
                         kiln_err *err);
/* A contiguous 4-D f32 NCHW image. */
kiln_status cpu_as_nchw(const kiln_tensor *t, const char *op, const char *name, int64_t dims[4], kiln_err *err);

/* Runs fn(ctx, r0, r1) over [0, rows) split into chunks of about `grain` rows on the backend's pool. */
typedef void (*cpu_range_fn)(void *ctx, int64_t r0, int64_t r1);
void cpu_parallel_rows(kiln_cpu_backend *cb, int64_t rows, int64_t grain, cpu_range_fn fn, void *ctx);
/* A grain (rows per task) giving tasks of roughly 32K elements for rows `width` wide. */
static inline int64_t cpu_grain(int64_t width) { return width >= 32768 ? 1 : 32768 / (width > 0 ? width : 1); }

static inline float *mat_f32_row(const cpu_mat *m, int64_t r) { return (float *)m->data + r * m->ld; }

static inline float param_at(const cpu_param *p, int64_t i);

/* bf16 <-> f32 by the kernels' short names: tensor/convert.h's scalar reference (bf16 is the top half of an f32;
 * rounding is to nearest even, NaN stays NaN), so the CPU backend and the converters round alike. */
static inline float bf16_to_f32(uint16_t h) { return kiln_bf16_to_f32(h); }
static inline uint16_t f32_to_bf16(float f) { return kiln_f32_to_bf16(f); }
/* f32 -> bf16 -> f32: the value a bf16 dot product sees. */
static inline float round_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

static inline float param_at(const cpu_param *p, int64_t i) {
    return p->bf16 ? bf16_to_f32(((const uint16_t *)p->p)[i]) : ((const float *)p->p)[i];
}

/* Per-op entry points cpu_matmul ... cpu_upsample2x, one file each (signatures as in kiln_ops). */
KILN_DECLARE_OPS(cpu);

#endif

/* attention.h - the attention op's shared job description and its per-tier kernels (CPU backend internals).
 * attention.c checks arguments and splits the work into (head, block of ATT_BQ queries) tasks; a kernel runs
 * one task with its thread's scratch. See attention.c for the algorithm. */
#ifndef KILN_COMPUTE_CPU_ATTENTION_H
#define KILN_COMPUTE_CPU_ATTENTION_H

#include "compute/cpu/cpu_internal.h"

#define ATT_BQ 32  /* queries per task of the scalar kernel, per sub-block of the AMX kernel */
#define ATT_BQ_F32 48 /* queries per task in the f32 vector kernels (a multiple of every tier's ATT_MR) */
#define ATT_BK 128 /* keys per block in the f32 kernels */
#define ATT_BKP (ATT_BK + 16) /* row stride of the f32 kernels' score block (padded off a multiple of 256 B) */
#define ATT_BK_AMX 128 /* keys per block in the AMX kernel */
#define ATT_BQ_AMX 128 /* queries per task in the AMX kernel (a multiple of ATT_BQ; see attention_amx.c) */

typedef struct att_job {
    cpu_mat out, q, k, v;
    const uint8_t *mask;
    const float *bias; /* NULL or [hq * Sq][bias_ld]: row h * Sq + i, added to query i's scaled scores (ops.h) */
    int64_t bias_ld;
    int64_t hq, hkv, dh, nqb, bq; /* bq: queries per task (ATT_BQ, or ATT_BQ_AMX), nqb: tasks per head */
    float scale;
    bool causal;
    char *scratch; /* n_threads * per_thread bytes */
    size_t per_thread;
    /* AMX: K and V of every kv head as bf16 B tiles (attention_amx.c), keys padded to ATT_BK_AMX */
    uint16_t *kp, *vp;
    /* f32 vector kernels: K of every kv head transposed per block of ATT_BK keys, [hkv][sk_pad / ATT_BK][dh][ATT_BK],
     * and V of every kv head as contiguous rows, [hkv][sk_pad][dh] (keys past Sk zero; keys padded to ATT_BK) */
    float *kt, *vc;
    int64_t sk_pad;
} att_job;

/* One task: head h, queries [q0, q0 + j->bq) clipped to Sq. */
void att_task_scalar(const att_job *j, int64_t h, int64_t q0, float *scratch);
void att_task_f32_generic(const att_job *j, int64_t h, int64_t q0, float *scratch);
void att_task_f32_avx2(const att_job *j, int64_t h, int64_t q0, float *scratch);
void att_task_f32_avx512(const att_job *j, int64_t h, int64_t q0, float *scratch);
size_t att_scratch_f32(int64_t dh); /* bytes per thread for the f32 kernels */
void att_f32_pack_kv(const att_job *j, int64_t hk, int64_t k0); /* j->kt, j->vc of kv head hk, keys [k0, k0 + ATT_BK) */

/* AMX (FAST, dh % 32 == 0): pack K/V of kv head hk, keys [k0, k1) (multiples of 32 except the end), then tasks. */
void att_amx_pack(const att_job *j, int64_t hk, int64_t k0, int64_t k1);
void att_task_amx(const att_job *j, int64_t h, int64_t q0, float *scratch);
size_t att_scratch_amx(int64_t dh);

#endif

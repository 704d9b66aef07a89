/* cuda_launch.h - kernel launch configurations chosen against per-architecture limits, in plain C shared by the
 * .cu launchers (which use the choice) and a host unit test (which proves every choice fits every architecture
 * kiln is built for: tests/unit/test_compute_cuda_launch.c). Header-only because the .cu files may not call up
 * into kiln_compute (cuda_internal.h: link order) and the test has no nvcc.
 *
 * Why: the VAE's single-head mid-block attention has head dim 512; the attention kernel's K/V tiles of 32 keys
 * then need 147.6 KB of shared memory per block - fine on A100 (163 KB) and H100/H200 (227 KB), over the limit of
 * every consumer card (RTX 30/40/50: 99 KB), where the launch failed. Now the kernel takes its key-tile width as
 * a template parameter and the launcher picks the widest that fits the device.
 *
 * Shared memory per block after opt-in (cudaFuncAttributeMaxDynamicSharedMemorySize), from the CUDA C++
 * Programming Guide, "Compute Capabilities", table "Technical Specifications per Compute Capability"
 * (https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/compute-capabilities.html): 8.0 163 KB,
 * 8.6 99 KB, 8.9 99 KB, 9.0 227 KB, 12.0 99 KB (KB = 1024 bytes; 1 KB per SM is reserved for the system, already
 * excluded). At run time the device's own sharedMemPerBlockOptin is used; this table is for the test.
 */
#ifndef KILN_COMPUTE_CUDA_LAUNCH_H
#define KILN_COMPUTE_CUDA_LAUNCH_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __CUDACC__
#define KCU_HD __host__ __device__
#else
#define KCU_HD
#endif

typedef struct kcu_arch_limits {
    int sm;                /* compute capability x 10 + minor: 80, 86, 89, 90, 120 */
    size_t smem_optin;     /* bytes of dynamic shared memory one block may use after opt-in */
    int max_threads;       /* per block */
    const char *examples;  /* for messages */
} kcu_arch_limits;

static const kcu_arch_limits KCU_ARCHS[] = {
    {80, 163 * 1024, 1024, "A100, A30"},
    {86, 99 * 1024, 1024, "RTX 30xx, A40, A10"},
    {89, 99 * 1024, 1024, "RTX 40xx, L40S, L4"},
    {90, 227 * 1024, 1024, "H100, H200"},
    {120, 99 * 1024, 1024, "RTX 50xx, RTX PRO 6000"},
};
#define KCU_N_ARCHS (sizeof KCU_ARCHS / sizeof KCU_ARCHS[0])

/* The table entry for an architecture, NULL for one kiln does not know. */
static inline const kcu_arch_limits *kcu_arch_find(int sm) {
    for (size_t i = 0; i < KCU_N_ARCHS; i++)
        if (KCU_ARCHS[i].sm == sm) return &KCU_ARCHS[i];
    return NULL;
}

/* ---- attention variant 1 (cuda_attention.cu): f32 on CUDA cores ---- */
#define KCU_ATT_WARPS 8   /* one query row per warp */
#define KCU_ATT_MAX_DH 512

/* Shared memory of one block: K tile [kt][dh + 1] (padded: conflict-free), V tile [kt][dh], Q rows [warps][dh]. */
static inline KCU_HD size_t kcu_att_smem(int dh, int kt) {
    return ((size_t)kt * (dh + 1) + (size_t)kt * dh + (size_t)KCU_ATT_WARPS * dh) * sizeof(float);
}

/* The key-tile width for head dim dh under a shared-memory limit: 32 (one key per lane: the fastest), else 16
 * (half the lanes score; what consumer cards need at dh 512); 0 when even that does not fit or dh is out of range. */
static inline int kcu_att_pick_kt(int dh, size_t smem_limit) {
    if (dh <= 0 || dh > KCU_ATT_MAX_DH) return 0;
    if (kcu_att_smem(dh, 32) <= smem_limit) return 32;
    if (kcu_att_smem(dh, 16) <= smem_limit) return 16;
    return 0;
}

/* ---- attention variant 2 (cuda_attention_tc.cu): tensor cores through mma.sync m16n8k16, bf16 operands ---- */
#define KCU_TC_BQ 64     /* query rows per block: 16 per warp */
#define KCU_TC_BK 64     /* keys per shared-memory tile */
#define KCU_TC_WARPS 4
#define KCU_TC_MAX_DH 512 /* kernel A (dh <= 128): Q fragments and O in registers, dh/4 + dh/2 per lane; kernel
                           * B (dh <= 512): the dims split over dh/128 warps, 16 query rows per block */
#define KCU_TC_WIDE_BK 32 /* kernel B's keys per tile */

/* The head dim a kernel is instantiated for: dh rounded up to 64, 128, 256 or 512 (the extra columns are zeros). */
static inline KCU_HD int kcu_tc_dh(int dh) { return dh <= 64 ? 64 : dh <= 128 ? 128 : dh <= 256 ? 256 : 512; }

/* Shared memory of one block, bf16 tiles with pads that put the 8 rows a fragment load (or an ldmatrix phase)
 * touches in different banks. Kernel A: K and V tiles [64][DH + 8] (K's also Q's staging). Kernel B: K and V
 * [32][DH + 8] and the warps' f32 shares of S [DH / 128][16][32]. */
static inline KCU_HD size_t kcu_tc_smem(int dh) {
    int DH = kcu_tc_dh(dh);
    if (DH <= 128) return (size_t)2 * KCU_TC_BK * (DH + 8) * 2;
    return (size_t)2 * KCU_TC_WIDE_BK * (DH + 8) * 2 + (size_t)(DH / 128) * (KCU_TC_WIDE_BK / 2) * 32 * 4;
}

/* ... with KILN_CUDA_TC_QSMEM=1 (dh <= 128): Q's rows stay in a tile of their own, [rows][DH + 8], read by ldmatrix
 * at every key tile instead of held in registers (dh/4 fewer per lane: 3 blocks per SM at dh 128 instead of 2) */
static inline KCU_HD size_t kcu_tc_smem_qs(int dh, int rows) {
    return kcu_tc_smem(dh) + (size_t)rows * (kcu_tc_dh(dh) + 8) * 2;
}

/* Whether variant 2 can run head dim dh on a device with this limit (else the launcher uses variant 1): any head
 * dim up to 512 on sm_80+ (34 KB at dh 128, 73 KB at 512: every architecture). */
static inline bool kcu_tc_fits(int sm, int dh, size_t smem_limit) {
    return sm >= 80 && dh > 0 && dh <= KCU_TC_MAX_DH && kcu_tc_smem(dh) <= smem_limit;
}

#endif

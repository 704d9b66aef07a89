/* test_compute_cuda_launch.c - every kernel launch configuration the CUDA backend can choose fits every
 * architecture kiln is built for (cuda_launch.h; host logic, no GPU needed). KILN_CUDA_ARCHS is the build's
 * CMAKE_CUDA_ARCHITECTURES (CMakeLists.txt); a build without CUDA checks the release list. */
#include <stdlib.h>
#include <string.h>

#include "compute/cuda/cuda_launch.h"
#include "test.h"

#ifndef KILN_CUDA_ARCHS
#define KILN_CUDA_ARCHS "80;86;89;90;120"
#endif

/* Head dims the models use: DiT and Qwen3 128 (real), VAE mid-block 512 (real), and the tiny test models'. */
static const int MODEL_DH[] = {16, 32, 64, 128, 512};

static int built_archs(int *out, int cap) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", KILN_CUDA_ARCHS);
    int n = 0;
    for (char *t = strtok(buf, "; ,"); t && n < cap; t = strtok(NULL, "; ,")) out[n++] = atoi(t); /* "90-real" -> 90 */
    return n;
}

static void test_table_knows_every_built_arch(void) {
    int a[16], n = built_archs(a, 16);
    CHECK(n >= 1);
    for (int i = 0; i < n; i++) CHECK_MSG(kcu_arch_find(a[i]) != NULL, "sm_%d is built but has no limits in cuda_launch.h", a[i]);
    CHECK_EQ_INT(kcu_arch_find(90)->smem_optin, 227 * 1024);
    CHECK_EQ_INT(kcu_arch_find(86)->smem_optin, 99 * 1024);
    CHECK(kcu_arch_find(75) == NULL);
}

static void test_attention_configs_fit(void) {
    int a[16], n = built_archs(a, 16);
    for (int i = 0; i < n; i++) {
        const kcu_arch_limits *L = kcu_arch_find(a[i]);
        if (!L) continue;
        CHECK(KCU_ATT_WARPS * 32 <= L->max_threads && KCU_TC_WARPS * 32 <= L->max_threads);
        int bad = 0;
        for (int dh = 8; dh <= KCU_ATT_MAX_DH; dh += 8) {
            int kt = kcu_att_pick_kt(dh, L->smem_optin);
            if (!kt || kcu_att_smem(dh, kt) > L->smem_optin) bad++;
            if (kcu_tc_fits(L->sm, dh, L->smem_optin) && kcu_tc_smem(dh) > L->smem_optin) bad++;
        }
        CHECK_MSG(bad == 0, "sm_%d: %d attention configurations over %zu bytes", L->sm, bad, L->smem_optin);
        for (size_t j = 0; j < sizeof MODEL_DH / sizeof MODEL_DH[0]; j++)
            CHECK_MSG(kcu_att_pick_kt(MODEL_DH[j], L->smem_optin) > 0, "sm_%d cannot run head dim %d", L->sm, MODEL_DH[j]);
    }
}

/* The case that failed: the VAE's head dim 512 with 32-key tiles needs 147.6 KB. */
static void test_vae_head_dim_per_arch(void) {
    CHECK_EQ_INT(kcu_att_smem(512, 32), 147584);
    CHECK(kcu_att_smem(512, 32) > kcu_arch_find(86)->smem_optin);
    CHECK_EQ_INT(kcu_att_pick_kt(512, kcu_arch_find(90)->smem_optin), 32);
    CHECK_EQ_INT(kcu_att_pick_kt(512, kcu_arch_find(80)->smem_optin), 32);
    CHECK_EQ_INT(kcu_att_pick_kt(512, kcu_arch_find(86)->smem_optin), 16);
    CHECK_EQ_INT(kcu_att_pick_kt(512, kcu_arch_find(89)->smem_optin), 16);
    CHECK_EQ_INT(kcu_att_pick_kt(512, kcu_arch_find(120)->smem_optin), 16);
    CHECK_EQ_INT(kcu_att_pick_kt(128, kcu_arch_find(86)->smem_optin), 32);
    CHECK_EQ_INT(kcu_att_pick_kt(513, 1u << 30), 0);
    CHECK_EQ_INT(kcu_att_pick_kt(512, 48 * 1024), 0);
    /* tensor-core variant: 34 KB at dh 128 and 73 KB at the VAE's 512 (its dims split across 4 warps), so every
     * architecture takes every head of the models */
    CHECK_EQ_INT(kcu_tc_smem(128), 34816);
    CHECK_EQ_INT(kcu_tc_smem(12), kcu_tc_smem(64));
    for (size_t i = 0; i < KCU_N_ARCHS; i++) {
        CHECK(kcu_tc_fits(KCU_ARCHS[i].sm, 128, KCU_ARCHS[i].smem_optin));
        CHECK(kcu_tc_fits(KCU_ARCHS[i].sm, 64, KCU_ARCHS[i].smem_optin));
    }
    /* KILN_CUDA_TC_QSMEM=1: Q's own tile on top, 52 KB at 64 rows and 68 KB at 128 (dh 128): every architecture */
    CHECK_EQ_INT(kcu_tc_smem_qs(128, 64), 34816 + 64 * 136 * 2);
    for (size_t i = 0; i < KCU_N_ARCHS; i++) CHECK(kcu_tc_smem_qs(128, 128) <= KCU_ARCHS[i].smem_optin);
    CHECK_EQ_INT(kcu_tc_smem(512), 74752);
    for (size_t i = 0; i < KCU_N_ARCHS; i++) CHECK(kcu_tc_fits(KCU_ARCHS[i].sm, 512, KCU_ARCHS[i].smem_optin));
    CHECK(kcu_tc_fits(90, 96, 1u << 30));
    CHECK(kcu_tc_fits(90, 136, 1u << 30));
    CHECK(!kcu_tc_fits(90, 520, 1u << 30));
    CHECK(!kcu_tc_fits(75, 64, 1u << 30));
}

int main(void) {
    RUN(test_table_knows_every_built_arch);
    RUN(test_attention_configs_fit);
    RUN(test_vae_head_dim_per_arch);
    return test_summary();
}

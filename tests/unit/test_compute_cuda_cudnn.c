/* test_compute_cuda_cudnn.c - attention variant 3 (cuDNN's SDPA, cuda_cudnn.h) without a GPU: which calls kiln
 * gives cuDNN (the rest run on variant 2, so a wrong "yes" would hand cuDNN a mask it never applies), and, in a
 * build with the cuDNN frontend (KILN_HAVE_CUDNN), that the graph kiln builds for each model's attention passes
 * the frontend's own support checks on every architecture kiln is built for - and fails them on sm_75, which has
 * no such engine (so the check is not a formality). On a GPU, tests/gpu/run.sh compares its numbers. */
#include <stdint.h>
#include <string.h>

#include "compute/cuda/cuda_cudnn.h"
#include "test.h"
#ifdef KILN_HAVE_CUDNN
#include "compute/cuda/cuda_internal.h"
#endif

static _Alignas(16) uint16_t buf[64];

static kcu_mat mat(int64_t rows, int64_t cols, int64_t ld) {
    return (kcu_mat){.data = buf, .rows = rows, .cols = cols, .ld = ld, .dt = KILN_DT_BF16};
}

static void test_refusals(void) {
    kcu_mat q = mat(4608, 3072, 9216), k = mat(4608, 3072, 9216), v = mat(4608, 3072, 9216), o = mat(4608, 3072, 3072);
    CHECK(kcu_cudnn_attention_refusal(&o, &q, &k, &v, 24, 24, false, false, false) == NULL); /* the DiT's */
    kcu_mat qq = mat(77, 4096, 4096), kq = mat(77, 1024, 1024);
    CHECK(kcu_cudnn_attention_refusal(&qq, &qq, &kq, &kq, 32, 8, true, false, false) == NULL); /* Qwen3: GQA, causal */
    CHECK_EQ_STR(kcu_cudnn_attention_refusal(&o, &q, &k, &v, 24, 24, false, true, false), "a key mask");
    CHECK_EQ_STR(kcu_cudnn_attention_refusal(&o, &q, &k, &v, 24, 24, false, false, true), "an additive bias");
    kcu_mat f = q;
    f.dt = KILN_DT_F32;
    CHECK(kcu_cudnn_attention_refusal(&o, &f, &k, &v, 24, 24, false, false, false) != NULL);
    kcu_mat odd = q;
    odd.ld = 9217; /* rows not 16-byte aligned */
    CHECK(kcu_cudnn_attention_refusal(&o, &q, &odd, &v, 24, 24, false, false, false) != NULL);
    kcu_mat off = v;
    off.data = (char *)buf + 2;
    CHECK(kcu_cudnn_attention_refusal(&o, &q, &k, &off, 24, 24, false, false, false) != NULL);
    kcu_mat vae = mat(16384, 512, 512); /* the VAE's single 512-wide head: over 128 */
    CHECK(kcu_cudnn_attention_refusal(&vae, &vae, &vae, &vae, 1, 1, false, false, false) != NULL);
    kcu_mat d12 = mat(10, 24, 24); /* 2 heads of 12: not a multiple of 8 */
    CHECK(kcu_cudnn_attention_refusal(&d12, &d12, &d12, &d12, 2, 2, false, false, false) != NULL);
    CHECK(kcu_cudnn_attention_refusal(&o, &q, &k, &v, 24, 5, false, false, false) != NULL); /* 24 % 5 */
    kcu_mat k2 = mat(100, 3072, 3072); /* causal with more keys than queries: kiln's rule is top-left */
    CHECK(kcu_cudnn_attention_refusal(&o, &q, &k2, &k2, 24, 24, true, false, false) != NULL);
    CHECK(kcu_cudnn_attention_refusal(&o, &q, &k2, &k2, 24, 24, false, false, false) == NULL);
}

static void test_conv_refusals(void) {
    char *p = (char *)buf;
    kcu_mat b32 = {.data = p, .rows = 1, .cols = 8, .ld = 8, .dt = KILN_DT_F32}, none = {0};
    CHECK(kcu_cudnn_conv_refusal(true, KILN_DT_BF16, p, KILN_DT_BF16, p, KILN_DT_BF16, p, &b32) == NULL);
    CHECK(kcu_cudnn_conv_refusal(true, KILN_DT_F32, p, KILN_DT_BF16, p, KILN_DT_BF16, p, &none) == NULL);
    CHECK_EQ_STR(kcu_cudnn_conv_refusal(false, KILN_DT_BF16, p, KILN_DT_BF16, p, KILN_DT_BF16, p, &b32), "EXACT (f32 GEMMs)");
    CHECK(kcu_cudnn_conv_refusal(true, KILN_DT_BF16, p, KILN_DT_F32, p, KILN_DT_BF16, p, &b32) != NULL); /* f32 x */
    CHECK(kcu_cudnn_conv_refusal(true, KILN_DT_BF16, p, KILN_DT_BF16, p, KILN_DT_F32, p, &b32) != NULL); /* f32 w */
    CHECK(kcu_cudnn_conv_refusal(true, KILN_DT_F16, p, KILN_DT_BF16, p, KILN_DT_BF16, p, &b32) != NULL);
    CHECK(kcu_cudnn_conv_refusal(true, KILN_DT_BF16, p + 2, KILN_DT_BF16, p, KILN_DT_BF16, p, &b32) != NULL);
    CHECK(kcu_cudnn_conv_refusal(true, KILN_DT_BF16, p, KILN_DT_BF16, p + 4, KILN_DT_BF16, p, &b32) != NULL);
    kcu_mat b16 = b32, bodd = b32;
    b16.dt = KILN_DT_F16;
    bodd.data = p + 4;
    CHECK(kcu_cudnn_conv_refusal(true, KILN_DT_BF16, p, KILN_DT_BF16, p, KILN_DT_BF16, p, &b16) != NULL);
    CHECK(kcu_cudnn_conv_refusal(true, KILN_DT_BF16, p, KILN_DT_BF16, p, KILN_DT_BF16, p, &bodd) != NULL);
}

#ifdef KILN_HAVE_CUDNN
static void test_conv_graphs_pass_cudnn_checks(void) {
    static const int sms[] = {80, 86, 89, 90, 120};
    /* the FLUX.2 VAE decoder's: conv_in (32 -> 512), a mid-block 3x3, an up-block's 1x1 shortcut (no bias here),
     * conv_out to RGB in f32; the encoder's stride-2 downsample with ComfyUI's (0, 1) padding */
    static const struct { int64_t xd[4], co; int kh, stride, pb, pe; kiln_dtype ydt; int bdt; } convs[] = {
        {{1, 32, 128, 128}, 512, 3, 1, 1, 1, KILN_DT_BF16, KILN_DT_F32},
        {{2, 512, 64, 64}, 512, 3, 1, 1, 1, KILN_DT_BF16, KILN_DT_F32},
        {{1, 256, 512, 512}, 128, 1, 1, 0, 0, KILN_DT_BF16, -1},
        {{1, 128, 1024, 1024}, 3, 3, 1, 1, 1, KILN_DT_F32, KILN_DT_BF16},
        {{1, 128, 512, 512}, 128, 3, 2, 0, 1, KILN_DT_BF16, KILN_DT_F32},
    };
    for (size_t i = 0; i < sizeof sms / sizeof sms[0]; i++)
        for (size_t c = 0; c < sizeof convs / sizeof convs[0]; c++) {
            kiln_err err = {0};
            CHECK_MSG(kcu_cudnn_check_conv(sms[i], convs[c].xd, convs[c].co, convs[c].kh, convs[c].stride, convs[c].pb,
                                           convs[c].pe, convs[c].ydt, convs[c].bdt, &err) == KILN_OK,
                      "sm_%d conv %zu: %s", sms[i], c, err.msg);
        }
}

static void test_graphs_pass_cudnn_checks(void) {
    static const int sms[] = {80, 86, 89, 90, 120};
    for (size_t i = 0; i < sizeof sms / sizeof sms[0]; i++) {
        kiln_err err = {0};
        /* klein 4B's DiT at 1024x1024 (4096 image + 512 text tokens, q/k/v views of a fused qkv), Qwen3's text
         * encoder (causal, 32 query heads over 8), FLUX.1's T5-free double blocks at 512x512 */
        CHECK_MSG(kcu_cudnn_check_graph(sms[i], 4608, 4608, 24, 24, 128, 9216, 9216, false, 0.0883883f, &err) == KILN_OK,
                  "sm_%d DiT: %s", sms[i], err.msg);
        CHECK_MSG(kcu_cudnn_check_graph(sms[i], 512, 512, 32, 8, 128, 4096, 1024, true, 0.0883883f, &err) == KILN_OK,
                  "sm_%d Qwen3: %s", sms[i], err.msg);
        CHECK_MSG(kcu_cudnn_check_graph(sms[i], 1536, 1536, 4, 4, 64, 256, 256, false, 0.125f, &err) == KILN_OK,
                  "sm_%d dh 64: %s", sms[i], err.msg);
    }
    kiln_err err = {0};
    CHECK(kcu_cudnn_check_graph(75, 4608, 4608, 24, 24, 128, 9216, 9216, false, 0.0883883f, &err) != KILN_OK);
    CHECK_ERR_CONTAINS(&err, "cuDNN SDPA");
}
#endif

int main(void) {
    RUN(test_refusals);
    RUN(test_conv_refusals);
#ifdef KILN_HAVE_CUDNN
    /* the graph checks need cuDNN itself (the CUDA toolkit's): without it they cannot run - Skipped, not passed */
    kiln_err err = {0};
    if (kcu_cudnn_check_graph(90, 64, 64, 2, 2, 64, 128, 128, false, 0.125f, &err) != KILN_OK &&
        strstr(err.msg, "cannot load")) {
        printf("not run: the cuDNN graph checks (%s)\n", err.msg);
        int rc = test_summary();
        return rc ? rc : 77;
    }
    RUN(test_graphs_pass_cudnn_checks);
    RUN(test_conv_graphs_pass_cudnn_checks);
#else
    printf("not run: the cuDNN graph checks (this build has no cuDNN frontend)\n");
#endif
    return test_summary();
}

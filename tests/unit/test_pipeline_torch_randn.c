/* test_pipeline_torch_randn.c - torch.randn's CPU float32 stream (pipeline/torch_randn.h) and ComfyUI's batch noise
 * bit for bit against the comfy_noise golden (tools/reference/make_comfy_noise_golden.py: torch.randn of ComfyUI's
 * latent shapes, one generator per batch, under torch's AVX2 and default CPU kernels): both kernels, a batch of 3
 * at 112x48 for FLUX.1 and FLUX.2, sizes that are not a multiple of 16, seeds above 2^32; FLUX.1's 2x2 packing. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden.h"
#include "pipeline/torch_randn.h"
#include "test.h"

static bool same_bits(const float *a, const float *b, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof *a)) {
            printf("   %s[%zu]: %.9g vs torch %.9g\n", what, i, a[i], b[i]);
            return false;
        }
    return true;
}

static void test_golden(void) {
    golden g;
    if (!golden_open(&g, "comfy_noise")) return;
    json_error_t je;
    json_t *cases = json_loads(golden_meta(&g, "cases") ? golden_meta(&g, "cases") : "", 0, &je);
    CHECK(cases && json_array_size(cases) == 6);
    static const char *kernels[2] = {"avx2", "default"};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; cases && i < json_array_size(cases); i++) {
            json_t *c = json_array_get(cases, i);
            const char *name = json_string_value(json_object_get(c, "name"));
            uint64_t seed = strtoull(json_string_value(json_object_get(c, "seed")), NULL, 10);
            char key[128];
            snprintf(key, sizeof key, "%s.%s", kernels[k], name);
            size_t n = 0;
            float *ref = golden_f32(&g, key, &n);
            float *got = malloc((n ? n : 1) * sizeof *got);
            kiln_err err = {0};
            CHECK(ref && got && kiln_torch_randn(got, n, seed, k ? KILN_RANDN_LIBM : KILN_RANDN_AVX2, &err) == KILN_OK);
            CHECK_MSG(ref && got && same_bits(got, ref, n, key), "%s: not torch's values", key);
            free(got);
            free(ref);
        }
    /* the graph's noise (AVX2 kernel), in kiln's token layout: FLUX.2 as drawn, FLUX.1 packed 2x2 */
    struct { const char *key; int batch, h16, w16; bool flux1; } nz[] = {
        {"avx2.flux2_b3_112x48", 3, 3, 7, false},
        {"avx2.flux1_b3_112x48.packed", 3, 3, 7, true},
        {"avx2.flux1_b1_112x48.packed", 1, 3, 7, true},
    };
    for (size_t i = 0; i < sizeof nz / sizeof nz[0]; i++) {
        size_t n = 0;
        float *ref = golden_f32(&g, nz[i].key, &n);
        size_t want = (size_t)nz[i].batch * (nz[i].flux1 ? 64 : 128) * (size_t)(nz[i].h16 * nz[i].w16);
        CHECK_MSG(n == want, "%s: %zu values, expected %zu", nz[i].key, n, want);
        float *got = malloc(want * sizeof *got);
        kiln_err err = {0};
        CHECK(got && kiln_comfy_noise(got, nz[i].batch, nz[i].flux1 ? 64 : 128, nz[i].h16, nz[i].w16, nz[i].flux1, 1234, &err) == KILN_OK);
        CHECK_MSG(ref && got && n == want && same_bits(got, ref, n, nz[i].key), "%s: not ComfyUI's noise", nz[i].key);
        free(got);
        free(ref);
    }
    json_decref(cases);
    golden_close(&g);
}

/* the batch is one draw: image 0 of a batch of 3 is the batch-1 draw of the same seed (torch fills in memory order
 * and an image is a whole number of 16-value blocks), image 1 is not the batch-1 draw of seed + 1 */
static void test_batch_is_one_draw(void) {
    size_t one = 64 * 3 * 7;
    float *b3 = malloc(3 * one * sizeof *b3), *b1 = malloc(one * sizeof *b1);
    kiln_err err = {0};
    CHECK(kiln_comfy_noise(b3, 3, 64, 3, 7, true, 5, &err) == KILN_OK);
    CHECK(kiln_comfy_noise(b1, 1, 64, 3, 7, true, 6, &err) == KILN_OK);
    CHECK(memcmp(b3 + one, b1, one * sizeof *b1) != 0);
    CHECK(kiln_comfy_noise(b1, 1, 64, 3, 7, true, 5, &err) == KILN_OK);
    CHECK(memcmp(b3, b1, one * sizeof *b1) == 0);
    free(b3);
    free(b1);
}

static void test_refusals(void) {
    float buf[16];
    kiln_err err = {0};
    CHECK(kiln_torch_randn(buf, 15, 1, KILN_RANDN_AVX2, &err) == KILN_E_INVALID);
    CHECK(kiln_comfy_noise(buf, 0, 128, 1, 1, false, 1, &err) == KILN_E_INVALID);
    CHECK(kiln_comfy_noise(buf, 1, 6, 1, 1, true, 1, &err) == KILN_E_INVALID); /* FLUX.1: 2x2 packs of channels */
}

int main(void) {
    RUN(test_golden);
    RUN(test_batch_is_one_draw);
    RUN(test_refusals);
    return test_summary();
}

/* test_graph_comfy_sigmas.c - ComfyUI's flow-model sigmas (pipeline/comfy_sigmas.h) bit for bit against the oracle
 * (comfy_sigmas golden, tools/reference/make_comfy_sigmas_golden.py: ComfyUI's formulas in torch float32) for the
 * FLUX.1 [dev]/[schnell], FLUX.2 and ModelSamplingFlux shifts, the simple/normal/sgm_uniform schedulers and
 * BasicScheduler's denoise tail, Flux2Scheduler's; and ModelSamplingFlux's shift line. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden.h"
#include "pipeline/comfy_sigmas.h"
#include "test.h"

static void test_golden(void) {
    golden g;
    if (!golden_open(&g, "comfy_sigmas")) return;
    const char *cases = golden_meta(&g, "cases");
    json_error_t je;
    json_t *list = cases ? json_loads(cases, 0, &je) : NULL;
    CHECK(list && json_array_size(list) == 231);
    int exact = 0;
    for (size_t i = 0; list && i < json_array_size(list); i++) {
        json_t *c = json_array_get(list, i);
        const char *key = json_string_value(json_object_get(c, "key"));
        double shift = strtod(json_string_value(json_object_get(c, "shift")), NULL);
        const char *sch = json_string_value(json_object_get(c, "scheduler"));
        int steps = (int)json_integer_value(json_object_get(c, "steps"));
        double denoise = json_number_value(json_object_get(c, "denoise"));
        float got[64];
        int n = kiln_comfy_sigmas(shift, sch, steps, denoise, got, 64);
        char k[96];
        snprintf(k, sizeof k, "sigmas.%s", key);
        size_t gn = 0;
        float *ref = golden_f32(&g, k, &gn);
        bool same = ref && n == (int)gn && !memcmp(ref, got, gn * sizeof(float));
        CHECK_MSG(same, "%s: %d values, golden %zu, not bit-exact", k, n, gn);
        for (size_t j = 0; ref && !same && j < gn && (int)j < n; j++)
            printf("   %s[%zu] %.9g vs %.9g\n", k, j, got[j], ref[j]);
        exact += same;
        free(ref);
    }
    printf("   %d schedules bit-exact\n", exact);
    json_decref(list);
    json_t *sc = json_loads(golden_meta(&g, "shift_cases"), 0, &je);
    float shifts[8];
    size_t ns = json_array_size(sc);
    CHECK(sc && ns > 0 && ns <= 8);
    for (size_t i = 0; i < ns && i < 8; i++) {
        json_t *c = json_array_get(sc, i);
        shifts[i] = (float)kiln_comfy_flux_shift(json_number_value(json_array_get(c, 0)),
                                                 json_number_value(json_array_get(c, 1)),
                                                 (int)json_integer_value(json_array_get(c, 2)),
                                                 (int)json_integer_value(json_array_get(c, 3)));
    }
    golden_check(&g, "shifts", shifts, ns);
    json_decref(sc);
    /* Flux2Scheduler, at sizes off the latent grid too (the edit templates pass GetImageSize's) */
    json_t *fc = json_loads(golden_meta(&g, "flux2_cases"), 0, &je);
    CHECK(fc && json_array_size(fc) == 8);
    for (size_t i = 0; fc && i < json_array_size(fc); i++) {
        json_t *c = json_array_get(fc, i);
        int steps = (int)json_integer_value(json_array_get(c, 0)), w = (int)json_integer_value(json_array_get(c, 1)),
            h = (int)json_integer_value(json_array_get(c, 2));
        float got[64];
        int n = kiln_comfy_flux2_sigmas(steps, w, h, got, 64);
        char k[64];
        snprintf(k, sizeof k, "flux2.%d.%dx%d", steps, w, h);
        size_t gn = 0;
        float *ref = golden_f32(&g, k, &gn);
        CHECK_MSG(ref && n == (int)gn && !memcmp(ref, got, gn * sizeof(float)), "%s: not bit-exact", k);
        for (size_t j = 0; ref && j < gn && (int)j < n && memcmp(ref, got, gn * sizeof(float)); j++)
            printf("   %s[%zu] %.9g vs %.9g\n", k, j, got[j], ref[j]);
        free(ref);
    }
    json_decref(fc);
    golden_close(&g);
}

static void test_refusals(void) {
    float s[8];
    CHECK_EQ_INT(kiln_comfy_sigmas(1.15, "karras", 4, 1.0, s, 8), -1); /* not implemented: refused, not guessed */
    CHECK_EQ_INT(kiln_comfy_sigmas(1.15, "simple", 8, 1.0, s, 8), -1); /* 9 values do not fit 8 */
    CHECK_EQ_INT(kiln_comfy_sigmas(1.15, "simple", 4, 0.0, s, 8), 0);  /* denoise 0: no sigmas, as ComfyUI */
    CHECK_EQ_INT(kiln_comfy_sigmas(1.15, "simple", 4, 0.5, s, 8), 5);  /* the tail of 8 steps */
    CHECK(s[4] == 0.0f && s[0] < 0.9f);
}

int main(void) {
    RUN(test_golden);
    RUN(test_refusals);
    return test_summary();
}

/* test_pipeline_schedule.c - the sigma schedule (spec 4.1 table and the diffusers golden), Euler, CFG, and the
 * documented noise generator. */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"

#include "golden.h"
#include "pipeline/noise.h"
#include "pipeline/schedule.h"
#include "test.h"

/* spec/flux2-klein.md 4.1 test values (double precision). */
static void test_spec_table(void) {
    struct {
        int w, h, steps;
        double mu, sig[5];
    } rows[] = {
        {64, 64, 2, 1.960378, {1, 0.876574, 0}},
        {256, 256, 4, 1.965567, {1, 0.955391, 0.877134, 0.704112, 0}},
        {512, 512, 4, 2.030690, {1, 0.958085, 0.883982, 0.717497, 0}},
        {1024, 1024, 4, 2.291180, {1, 0.967384, 0.908144, 0.767200, 0}},
        {1360, 768, 4, 2.289823, {1, 0.967341, 0.908031, 0.766958, 0}},
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        long n = (long)(rows[r].w / 16) * (rows[r].h / 16);
        CHECK_NEAR(kiln_flux2_empirical_mu(rows[r].steps, n), rows[r].mu, 1e-6);
        double s[5];
        kiln_flux2_schedule(rows[r].steps, n, s);
        for (int k = 0; k <= rows[r].steps; k++) CHECK_NEAR(s[k], rows[r].sig[k], 1e-6);
    }
    /* 1024x1024, 50 steps: the first values of the table */
    double s50[51];
    kiln_flux2_schedule(50, 4096, s50);
    CHECK_NEAR(kiln_flux2_empirical_mu(50, 4096), 2.023351, 1e-6);
    CHECK_NEAR(s50[1], 0.997309, 1e-6);
    CHECK_NEAR(s50[2], 0.994521, 1e-6);
    CHECK_NEAR(s50[3], 0.991632, 1e-6);
    CHECK(s50[50] == 0.0);
    /* above 4300 tokens mu no longer depends on the step count */
    CHECK_NEAR(kiln_flux2_empirical_mu(4, 16384), kiln_flux2_empirical_mu(50, 16384), 1e-12);
}

/* Every size of the diffusers golden: mu and sigmas as FlowMatchEulerDiscreteScheduler computes them. */
static void test_golden_schedule(void) {
    golden g;
    if (!golden_open(&g, "schedule")) return;
    const char *sizes[] = {"64x64.2",     "256x256.4", "512x512.4", "1024x1024.4", "768x1360.4",
                           "1024x1024.50", "48x80.4",  "64x64.4",   "2048x2048.4", "1024x1024.1"};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        int w, h, steps;
        CHECK(sscanf(sizes[i], "%dx%d.%d", &w, &h, &steps) == 3);
        long n = (long)(w / 16) * (h / 16);
        char key[64];
        snprintf(key, sizeof key, "tokens.%s", sizes[i]);
        const char *tok = golden_meta(&g, key);
        CHECK(tok && atol(tok) == n);
        double sig[64];
        kiln_flux2_schedule(steps, n, sig);
        float fs[64], mu = (float)kiln_flux2_empirical_mu(steps, n), ts[64];
        for (int k = 0; k <= steps; k++) fs[k] = (float)sig[k];
        for (int k = 0; k < steps; k++) ts[k] = fs[k] * 1000.0f;
        snprintf(key, sizeof key, "sigmas.%s", sizes[i]);
        golden_check(&g, key, fs, (size_t)steps + 1);
        /* the f32 schedule the pipeline runs is the diffusers one, bit for bit */
        float f32s[64];
        kiln_flux2_schedule_f32(steps, n, f32s);
        size_t gn;
        float *ref = golden_f32(&g, key, &gn);
        CHECK(ref && gn == (size_t)steps + 1 && memcmp(ref, f32s, gn * sizeof(float)) == 0);
        if (ref && memcmp(ref, f32s, gn * sizeof(float)))
            for (size_t k = 0; k < gn; k++) printf("   %s[%zu] %.9g vs %.9g\n", key, k, f32s[k], ref[k]);
        free(ref);
        snprintf(key, sizeof key, "mu.%s", sizes[i]);
        golden_check(&g, key, &mu, 1);
        snprintf(key, sizeof key, "timesteps.%s", sizes[i]);
        golden_check(&g, key, ts, (size_t)steps);
    }
    golden_close(&g);
}

static void test_euler_and_cfg(void) {
    float x[3] = {1, 2, 3}, v[3] = {0.5f, -1, 2};
    kiln_euler_step(x, v, 3, 1.0, 0.75);
    CHECK_NEAR(x[0], 1 - 0.125, 1e-7);
    CHECK_NEAR(x[1], 2 + 0.25, 1e-7);
    CHECK_NEAR(x[2], 3 - 0.5, 1e-7);
    float c[2] = {2, -1}, u[2] = {1, 1};
    kiln_cfg_combine(c, u, 2, 4.0f);
    CHECK_NEAR(c[0], 1 + 4 * 1, 1e-6);
    CHECK_NEAR(c[1], 1 + 4 * -2, 1e-6);
}

static void test_noise(void) {
    enum { N = 200001 };
    float *a = malloc(N * sizeof(float)), *b = malloc(N * sizeof(float));
    kiln_noise_fill(a, N, 42);
    kiln_noise_fill(b, N, 42);
    CHECK(memcmp(a, b, N * sizeof(float)) == 0); /* deterministic */
    kiln_noise_fill(b, N, 43);
    CHECK(memcmp(a, b, N * sizeof(float)) != 0); /* seed matters */
    double s = 0, s2 = 0;
    for (int i = 0; i < N; i++) {
        s += a[i];
        s2 += (double)a[i] * a[i];
        CHECK(isfinite(a[i]));
    }
    double mean = s / N, var = s2 / N - mean * mean;
    CHECK_NEAR(mean, 0.0, 0.01);
    CHECK_NEAR(var, 1.0, 0.02);
    /* The generator is frozen: these first values are part of kiln's contract (a seed gives the same image
     * in every kiln version). Computed once by this implementation and recorded. */
    kiln_noise_fill(a, 4, 0);
    printf("  noise(seed 0)[0..3] = %.9g %.9g %.9g %.9g\n", a[0], a[1], a[2], a[3]);
    CHECK_NEAR(a[0], -0.0141067971, 1e-9);
    CHECK_NEAR(a[1], -1.00858653, 1e-7);
    CHECK_NEAR(a[2], -1.84589505, 1e-7);
    CHECK_NEAR(a[3], 1.06692827, 1e-7);
    free(a);
    free(b);
}

static void test_noise_files(void) {
    kiln_err err = {0};
    char path[] = "/tmp/kiln_noise_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    float vals[6] = {1, 2, 3, 4, 5, 6};
    CHECK(write(fd, vals, sizeof vals) == (ssize_t)sizeof vals);
    close(fd);
    float *out = NULL;
    CHECK(kiln_noise_load(path, 6, &out, &err) == KILN_OK);
    CHECK(out && out[5] == 6.0f);
    kiln_free(out);
    CHECK(kiln_noise_load(path, 7, &out, &err) == KILN_E_INVALID);
    CHECK_ERR_CONTAINS(&err, "needs 7");
    unlink(path);
    CHECK(kiln_noise_load("/nonexistent/noise.bin", 6, &out, &err) == KILN_E_NOT_FOUND);
    /* safetensors: a file with many tensors, one named "noise" (the golden's injected noise) */
    size_t n = 1 * 128 * 3 * 5;
    CHECK(kiln_noise_load(test_src_path("tests/data/golden/cfg_base_f32.safetensors"), n, &out, &err) == KILN_OK);
    golden g;
    if (out && golden_open(&g, "cfg_base_f32")) {
        golden_check(&g, "noise", out, n);
        golden_close(&g);
    }
    kiln_free(out);
    CHECK(kiln_noise_load(test_src_path("tests/data/golden/cfg_base_f32.safetensors"), n + 1, &out, &err) ==
          KILN_E_INVALID);
    /* a file with many tensors and none named noise */
    CHECK(kiln_noise_load(test_src_path("tests/data/golden/schedule.safetensors"), 5, &out, &err) == KILN_E_INVALID);
    CHECK_ERR_CONTAINS(&err, "noise");
}

int main(void) {
    RUN(test_spec_table);
    RUN(test_golden_schedule);
    RUN(test_euler_and_cfg);
    RUN(test_noise);
    RUN(test_noise_files);
    return test_summary();
}

/* test_pipeline_flux1_schedule.c - FLUX.1's sigmas (FluxPipeline: linspace(1, 1/n, n), calculate_shift's mu for
 * [dev], no shift for [schnell]) bit for bit against the official scheduler (flux1_schedule golden,
 * tools/reference/make_flux1_schedule_golden.py), read from the official scheduler_config.json files and from the
 * built-in defaults single files use; and the refusals of the FLUX.1 keys. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "golden.h"
#include "pipeline/schedule.h"
#include "test.h"

static void test_golden(void) {
    golden g;
    if (!golden_open(&g, "flux1_schedule")) return;
    const char *cases = golden_meta(&g, "cases");
    json_error_t je;
    json_t *list = cases ? json_loads(cases, 0, &je) : NULL;
    CHECK(list && json_array_size(list) == 27);
    for (size_t i = 0; list && i < json_array_size(list); i++) {
        const char *key = json_string_value(json_array_get(list, i));
        char name[16], path[256], k[96];
        int h, w, steps;
        CHECK(sscanf(key, "%15[a-z].%dx%d.%d", name, &h, &w, &steps) == 4);
        snprintf(path, sizeof path, "tests/data/tiny/flux1_scheduler_%s/scheduler_config.json", name);
        kiln_sched_config c;
        kiln_err err = {0};
        CHECK_MSG(kiln_sched_config_read_flux1(test_src_path(path), !strcmp(name, "dev"), &c, &err) == KILN_OK, "%s",
                  err.msg);
        long n = (long)(h / 16) * (w / 16);
        float sig[64];
        kiln_flux2_schedule_cfg_f32(&c, steps, n, sig);
        snprintf(k, sizeof k, "sigmas.%s", key);
        size_t gn;
        float *ref = golden_f32(&g, k, &gn);
        CHECK_MSG(ref && gn == (size_t)steps + 1 && !memcmp(ref, sig, gn * sizeof(float)), "%s not bit-exact", k);
        for (size_t j = 0; ref && j < gn && memcmp(ref, sig, gn * sizeof(float)); j++)
            printf("   %s[%zu] %.9g vs %.9g\n", k, j, sig[j], ref[j]);
        free(ref);
        snprintf(k, sizeof k, "mu.%s", key);
        float mu = (float)kiln_sched_mu(&c, steps, n);
        golden_check(&g, k, &mu, 1);
        /* single files: the built-in [dev]/[schnell] defaults are the official configs */
        if (strcmp(name, "custom")) {
            kiln_sched_config d = kiln_sched_config_flux1(!strcmp(name, "dev"));
            float sd[64];
            kiln_flux2_schedule_cfg_f32(&d, steps, n, sd);
            CHECK_MSG(!memcmp(sd, sig, ((size_t)steps + 1) * sizeof(float)), "%s: defaults differ", key);
        }
    }
    json_decref(list);
    golden_close(&g);
}

static void refuse(const char *key, const char *value, kiln_status want) {
    char dir[] = "/tmp/kiln_flux1_sched_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char p[512];
    snprintf(p, sizeof p, "%s/scheduler_config.json", dir);
    json_error_t je;
    json_t *c = json_load_file(test_src_path("tests/data/tiny/flux1_scheduler_dev/scheduler_config.json"), 0, &je);
    CHECK(c != NULL);
    if (!c) return;
    json_object_set_new(c, key, json_loads(value, JSON_DECODE_ANY, &je));
    CHECK(json_dump_file(c, p, 0) == 0);
    json_decref(c);
    kiln_err err = {0};
    kiln_sched_config out;
    kiln_status s = kiln_sched_config_read_flux1(p, true, &out, &err);
    CHECK_MSG(s == want, "%s=%s: status %d (%s)", key, value, (int)s, err.msg);
    CHECK_MSG(strstr(err.msg, key) != NULL, "%s: message \"%s\" does not name it", key, err.msg);
    unlink(p);
    rmdir(dir);
}

static void test_refusals(void) {
    refuse("max_image_seq_len", "256", KILN_E_FORMAT);
    refuse("base_shift", "\"x\"", KILN_E_FORMAT);
    refuse("shift_terminal", "0.02", KILN_E_UNSUPPORTED);
    refuse("use_karras_sigmas", "true", KILN_E_UNSUPPORTED);
    refuse("time_shift_type", "\"cubic\"", KILN_E_UNSUPPORTED);
    refuse("num_train_timesteps", "500", KILN_E_UNSUPPORTED);
}

int main(void) {
    RUN(test_golden);
    RUN(test_refusals);
    return test_summary();
}

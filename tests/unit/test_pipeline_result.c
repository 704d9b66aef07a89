/* test_pipeline_result.c - the perf dump JSON (server-api.md section 3), result ownership, progress lines. */
#include <jansson.h>
#include <string.h>

#include "base/alloc.h"
#include "kiln.h"
#include "pipeline/progress_bar.h"
#include "test.h"

static kiln_result *fake(void) {
    kiln_result *r = kiln_calloc(1, sizeof *r);
    r->n_steps = 2;
    r->step_ms = kiln_calloc(2, sizeof(double));
    r->step_ms[0] = 10;
    r->step_ms[1] = 12;
    r->stage_ms[KILN_STAGE_TEXT_ENCODING] = 5;
    r->stage_ms[KILN_STAGE_DENOISING] = 22;
    r->stage_cpu_ms[KILN_STAGE_DENOISING] = 40;
    r->total_ms = 30;
    r->peak_memory_bytes = 123456789;
    r->timestamp = 1700000000.5;
    strcpy(r->request_id, "req-1");
    strcpy(r->commit, "abc123");
    strcpy(r->tag, "t");
    r->width = 512;
    r->height = 256;
    r->steps = 2;
    r->batch = 1;
    r->guidance = 1;
    r->variant = KILN_VARIANT_DISTILLED;
    return r;
}

static void test_perf_json(void) {
    kiln_result *r = fake();
    char *txt = kiln_result_perf_json(r, "{\"engine\": \"kiln\"}");
    CHECK(txt != NULL);
    json_error_t je;
    json_t *j = txt ? json_loads(txt, 0, &je) : NULL;
    CHECK(j != NULL);
    if (j) {
        CHECK_EQ_STR(json_string_value(json_object_get(j, "request_id")), "req-1");
        CHECK_EQ_STR(json_string_value(json_object_get(j, "commit")), "abc123");
        CHECK_EQ_STR(json_string_value(json_object_get(j, "tag")), "t");
        CHECK_NEAR(json_number_value(json_object_get(j, "total_duration_ms")), 30, 1e-9);
        CHECK_NEAR(json_number_value(json_object_get(j, "timestamp")), 1700000000.5, 1e-6);
        CHECK_EQ_INT(json_integer_value(json_object_get(j, "peak_memory_bytes")), 123456789);
        json_t *st = json_object_get(j, "stages");
        CHECK_EQ_INT(json_array_size(st), 6); /* Output absent: not set */
        CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(st, 0), "name")), "InputValidation");
        CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(st, 4), "name")), "Denoising");
        CHECK_NEAR(json_number_value(json_object_get(json_array_get(st, 4), "duration_ms")), 22, 1e-9);
        CHECK_NEAR(json_number_value(json_object_get(json_array_get(st, 4), "cpu_ms")), 40, 1e-9);
        json_t *steps = json_object_get(j, "denoise_steps_ms");
        CHECK_EQ_INT(json_array_size(steps), 2);
        CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(steps, 1), "step")), 1);
        CHECK_NEAR(json_number_value(json_object_get(json_array_get(steps, 1), "duration_ms")), 12, 1e-9);
        json_t *meta = json_object_get(j, "meta");
        CHECK_EQ_INT(json_integer_value(json_object_get(meta, "width")), 512);
        CHECK_EQ_STR(json_string_value(json_object_get(meta, "variant")), "distilled");
        CHECK_EQ_STR(json_string_value(json_object_get(meta, "engine")), "kiln");
    }
    json_decref(j);
    free(txt);
    /* Output time, once set, appears and counts in the total */
    kiln_result_set_output_ms(r, 4);
    CHECK_NEAR(r->total_ms, 34, 1e-9);
    kiln_result_set_output_ms(r, 5);
    CHECK_NEAR(r->total_ms, 35, 1e-9);
    txt = kiln_result_perf_json(r, NULL);
    CHECK(txt && strstr(txt, "\"Output\""));
    free(txt);
    CHECK(kiln_result_perf_json(r, "[1, 2]") == NULL); /* meta must be an object */
    CHECK(kiln_result_perf_json(r, "{bad") == NULL);
    kiln_result_free(r);
    kiln_result_free(NULL);
}

static void test_progress_lines(void) {
    char buf[256];
    kiln_progress p = {KILN_STAGE_DENOISING, 2, 4, 12.34, 10.0};
    kiln_progress_format(&p, false, buf, sizeof buf);
    CHECK_EQ_STR(buf, "Denoising step 2/4 elapsed 12.3s  eta 10.0s");
    kiln_progress_format(&p, true, buf, sizeof buf);
    CHECK(strstr(buf, "[##########..........] step 2/4") != NULL);
    kiln_progress q = {KILN_STAGE_DECODING, 0, 0, 1.0, -1};
    kiln_progress_format(&q, false, buf, sizeof buf);
    CHECK_EQ_STR(buf, "Decoding elapsed 1.0s");
    CHECK_EQ_STR(kiln_stage_name(KILN_STAGE_TIMESTEP_PREPARATION), "TimestepPreparation");
    CHECK_EQ_STR(kiln_stage_name((kiln_stage)99), "?");
}

int main(void) {
    RUN(test_perf_json);
    RUN(test_progress_lines);
    return test_summary();
}

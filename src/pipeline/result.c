/* result.c - kiln_result ownership and the perf dump JSON (server-api.md section 3). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "kiln.h"

void kiln_result_free(kiln_result *res) {
    if (!res) return;
    if (res->images)
        for (int i = 0; i < res->n_images; i++) kiln_free(res->images[i].pixels);
    kiln_free(res->images);
    kiln_free(res->step_ms);
    kiln_free(res->warnings);
    kiln_free(res);
}

void kiln_result_set_output_ms(kiln_result *res, double ms) {
    res->total_ms += ms - res->stage_ms[KILN_STAGE_OUTPUT];
    res->stage_ms[KILN_STAGE_OUTPUT] = ms;
}

static const char *variant_name(kiln_variant v) {
    return v == KILN_VARIANT_BASE                ? "base"
           : v == KILN_VARIANT_DISTILLED         ? "distilled"
           : v == KILN_VARIANT_FLUX1_DEV         ? "flux1-dev"
           : v == KILN_VARIANT_FLUX1_SCHNELL     ? "flux1-schnell"
                                                 : "auto";
}

char *kiln_result_perf_json(const kiln_result *res, const char *meta_json) {
    json_t *extra = NULL;
    if (meta_json) {
        json_error_t je;
        extra = json_loads(meta_json, 0, &je);
        if (!extra || !json_is_object(extra)) {
            json_decref(extra);
            return NULL;
        }
    }
    json_t *root = json_object(), *stages = json_array(), *steps = json_array(), *meta = json_object();
    json_object_set_new(root, "timestamp", json_real(res->timestamp));
    json_object_set_new(root, "request_id", json_string(res->request_id));
    json_object_set_new(root, "commit", json_string(res->commit));
    json_object_set_new(root, "tag", json_string(res->tag));
    json_object_set_new(root, "total_duration_ms", json_real(res->total_ms));
    for (int s = 0; s < KILN_STAGE_COUNT; s++) {
        if (s == KILN_STAGE_OUTPUT && res->stage_ms[s] == 0.0) continue; /* not encoded/saved by the caller */
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(kiln_stage_name((kiln_stage)s)));
        json_object_set_new(o, "duration_ms", json_real(res->stage_ms[s]));
        if (s != KILN_STAGE_OUTPUT) json_object_set_new(o, "cpu_ms", json_real(res->stage_cpu_ms[s]));
        json_array_append_new(stages, o);
    }
    for (int i = 0; i < res->n_steps; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "step", json_integer(i));
        json_object_set_new(o, "duration_ms", json_real(res->step_ms[i]));
        json_array_append_new(steps, o);
    }
    json_object_set_new(root, "stages", stages);
    json_object_set_new(root, "denoise_steps_ms", steps);
    json_object_set_new(root, "peak_memory_bytes", json_integer((json_int_t)res->peak_memory_bytes));
    json_object_set_new(meta, "width", json_integer(res->width));
    json_object_set_new(meta, "height", json_integer(res->height));
    json_object_set_new(meta, "steps", json_integer(res->steps));
    json_object_set_new(meta, "batch", json_integer(res->batch));
    json_object_set_new(meta, "guidance", json_real(res->guidance));
    json_object_set_new(meta, "variant", json_string(variant_name(res->variant)));
    json_object_set_new(meta, "n_images", json_integer(res->n_images));
    if (res->n_images > 0) json_object_set_new(meta, "seed", json_integer((json_int_t)res->images[0].seed));
    if (extra) json_object_update(meta, extra);
    json_decref(extra);
    json_object_set_new(root, "meta", meta);
    char *txt = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    return txt;
}

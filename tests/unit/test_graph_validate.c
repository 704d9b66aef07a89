/* test_graph_validate.c - API-format graph parsing and validation: the committed klein graphs pass, and each
 * kind of bad graph gets ComfyUI's error type on the right node. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake_models.h"
#include "graph/graph.h"
#include "test.h"

static char models[256];

static json_t *load(const char *rel) {
    json_error_t e;
    json_t *j = json_load_file(test_src_path(rel), 0, &e);
    CHECK_MSG(j != NULL, "%s: %s", rel, e.text);
    return j;
}

/* Parses text; returns the status and leaves the error body in *errors. */
static kiln_status parse_text(const char *text, json_t **errors) {
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    CHECK_MSG(j != NULL, "test JSON: %s", e.text);
    kiln_graph *g = NULL;
    kiln_status s = kiln_graph_parse(j, NULL, models, &g, errors);
    kiln_graph_free(g);
    json_decref(j);
    return s;
}

/* The first node error's type for node id. */
static const char *node_error_type(json_t *errors, const char *id) {
    json_t *e = json_array_get(json_object_get(json_object_get(json_object_get(errors, "node_errors"), id), "errors"), 0);
    return json_string_value(json_object_get(e, "type"));
}

static void test_committed_graphs_validate(void) {
    const char *files[] = {"tests/data/graphs/flux2_klein_t2i_template_api.json",
                           "tests/data/graphs/flux2_klein_ksampler_api.json",
                           "tests/data/graphs/flux2_klein_pixel4_api.json"};
    for (size_t i = 0; i < 3; i++) {
        json_t *j = load(files[i]), *errors = NULL;
        kiln_graph *g = NULL;
        CHECK_EQ_INT(kiln_graph_parse(j, NULL, models, &g, &errors), KILN_OK);
        CHECK(errors == NULL);
        CHECK(g && g->n_outputs == 1);
        CHECK(g && json_object_size(g->node_errors) == 0);
        kiln_graph_free(g);
        json_decref(j);
    }
}

#define BASE_GRAPH \
    "{\"1\":{\"class_type\":\"UNETLoader\",\"inputs\":{\"unet_name\":\"flux-2-klein-4b.safetensors\"," \
    "\"weight_dtype\":\"default\"}}," \
    "\"2\":{\"class_type\":\"CLIPLoader\",\"inputs\":{\"clip_name\":\"qwen_3_4b.safetensors\",\"type\":\"flux2\"}}," \
    "\"3\":{\"class_type\":\"VAELoader\",\"inputs\":{\"vae_name\":\"flux2-vae.safetensors\"}}," \
    "\"4\":{\"class_type\":\"CLIPTextEncode\",\"inputs\":{\"text\":\"x\",\"clip\":[\"2\",0]}}," \
    "\"6\":{\"class_type\":\"EmptyFlux2LatentImage\",\"inputs\":{\"width\":%s,\"height\":512,\"batch_size\":%s}}," \
    "\"7\":{\"class_type\":\"KSampler\",\"inputs\":{\"model\":%s,\"seed\":1,\"steps\":%s,\"cfg\":1.0," \
    "\"sampler_name\":\"euler\",\"scheduler\":\"simple\",\"positive\":[\"4\",0],\"negative\":[\"4\",0]," \
    "\"latent_image\":[\"6\",0],\"denoise\":1.0}}," \
    "\"8\":{\"class_type\":\"VAEDecode\",\"inputs\":{\"samples\":[\"7\",0],\"vae\":[\"3\",0]}}," \
    "\"9\":{\"class_type\":\"SaveImage\",\"inputs\":{\"images\":[\"8\",0],\"filename_prefix\":\"t\"}}}"

static kiln_status parse_variant(const char *width, const char *batch, const char *model, const char *steps,
                                 json_t **errors) {
    char text[4096];
    snprintf(text, sizeof text, BASE_GRAPH, width, batch, model, steps);
    return parse_text(text, errors);
}

static void test_bounds_and_types(void) {
    json_t *errors = NULL;
    CHECK_EQ_INT(parse_variant("512", "1", "[\"1\",0]", "4", &errors), KILN_OK);
    CHECK(errors == NULL);

    CHECK_EQ_INT(parse_variant("512", "1", "[\"1\",0]", "0", &errors), KILN_E_INVALID);
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(errors, "error"), "type")),
                 "prompt_outputs_failed_validation");
    CHECK_EQ_STR(node_error_type(errors, "7"), "value_smaller_than_min");
    /* the failing node names the output that depends on it */
    CHECK_EQ_STR(json_string_value(json_array_get(
                     json_object_get(json_object_get(json_object_get(errors, "node_errors"), "7"), "dependent_outputs"), 0)),
                 "9");
    json_decref(errors);

    CHECK_EQ_INT(parse_variant("512", "1", "[\"1\",0]", "-3", &errors), KILN_E_INVALID);
    CHECK_EQ_STR(node_error_type(errors, "7"), "value_smaller_than_min");
    json_decref(errors);

    CHECK_EQ_INT(parse_variant("512", "1", "[\"1\",0]", "100000", &errors), KILN_E_INVALID);
    CHECK_EQ_STR(node_error_type(errors, "7"), "value_bigger_than_max");
    json_decref(errors);

    CHECK_EQ_INT(parse_variant("99999999", "1", "[\"1\",0]", "4", &errors), KILN_E_INVALID);
    CHECK_EQ_STR(node_error_type(errors, "6"), "value_bigger_than_max");
    json_decref(errors);

    CHECK_EQ_INT(parse_variant("512", "1000", "[\"1\",0]", "4", &errors), KILN_E_INVALID);
    CHECK_EQ_STR(node_error_type(errors, "6"), "value_bigger_than_max");
    json_decref(errors);

    CHECK_EQ_INT(parse_variant("\"wide\"", "1", "[\"1\",0]", "4", &errors), KILN_E_INVALID);
    CHECK_EQ_STR(node_error_type(errors, "6"), "invalid_input_type");
    json_decref(errors);

    /* ComfyUI's int(): a real is truncated, a decimal string read; other strings and exponents refused */
    CHECK_EQ_INT(parse_variant("512.5", "1", "[\"1\",0]", "4", &errors), KILN_OK);
    CHECK_EQ_INT(parse_variant("\" 512 \"", "1", "[\"1\",0]", "4", &errors), KILN_OK);
    CHECK_EQ_INT(parse_variant("\"5e2\"", "1", "[\"1\",0]", "4", &errors), KILN_E_INVALID);
    CHECK_EQ_STR(node_error_type(errors, "6"), "invalid_input_type");
    json_decref(errors);
    CHECK_EQ_INT(parse_variant("\"99999\"", "1", "[\"1\",0]", "4", &errors), KILN_E_INVALID);
    CHECK_EQ_STR(node_error_type(errors, "6"), "value_bigger_than_max");
    json_decref(errors);

    /* links: missing node, missing output, wrong type, bad shape, literal where a link belongs */
    CHECK_EQ_INT(parse_variant("512", "1", "[\"42\",0]", "4", &errors), KILN_E_INVALID);
    CHECK_EQ_STR(node_error_type(errors, "7"), "bad_linked_input");
    json_decref(errors);
    CHECK_EQ_INT(parse_variant("512", "1", "[\"1\",5]", "4", &errors), KILN_E_INVALID);
    CHECK_EQ_STR(node_error_type(errors, "7"), "bad_linked_input");
    json_decref(errors);
    CHECK_EQ_INT(parse_variant("512", "1", "[\"3\",0]", "4", &errors), KILN_E_INVALID);
    CHECK_EQ_STR(node_error_type(errors, "7"), "return_type_mismatch");
    json_decref(errors);
    CHECK_EQ_INT(parse_variant("512", "1", "[1,0]", "4", &errors), KILN_E_INVALID);
    CHECK_EQ_STR(node_error_type(errors, "7"), "bad_linked_input");
    json_decref(errors);
    CHECK_EQ_INT(parse_variant("512", "1", "\"model.safetensors\"", "4", &errors), KILN_E_INVALID);
    CHECK_EQ_STR(node_error_type(errors, "7"), "invalid_input_type");
    json_decref(errors);
}

static void test_shape_errors(void) {
    json_t *errors = NULL;
    CHECK_EQ_INT(parse_text("[1,2]", &errors), KILN_E_INVALID);
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(errors, "error"), "type")), "invalid_prompt");
    json_decref(errors);
    CHECK_EQ_INT(parse_text("{\"1\":{\"inputs\":{}}}", &errors), KILN_E_INVALID);
    CHECK(strstr(json_string_value(json_object_get(json_object_get(errors, "error"), "message")), "class_type"));
    json_decref(errors);
    CHECK_EQ_INT(parse_text("{\"1\":{\"class_type\":\"NoSuchNode\",\"inputs\":{}}}", &errors), KILN_E_INVALID);
    CHECK(strstr(json_string_value(json_object_get(json_object_get(errors, "error"), "message")), "NoSuchNode"));
    json_decref(errors);
    CHECK_EQ_INT(parse_text("{\"1\":{\"class_type\":\"VAELoader\",\"inputs\":{\"vae_name\":\"flux2-vae.safetensors\"}}}",
                            &errors),
                 KILN_E_INVALID);
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(errors, "error"), "type")), "prompt_no_outputs");
    json_decref(errors);
    CHECK_EQ_INT(parse_text("{\"1\":\"node\"}", &errors), KILN_E_INVALID);
    json_decref(errors);
    CHECK_EQ_INT(parse_text("{\"1\":{\"class_type\":\"SaveImage\",\"inputs\":7}}", &errors), KILN_E_INVALID);
    json_decref(errors);
}

static void test_missing_inputs_models_and_cycles(void) {
    json_t *errors = NULL;
    CHECK_EQ_INT(parse_text("{\"9\":{\"class_type\":\"SaveImage\",\"inputs\":{\"filename_prefix\":\"x\"}}}", &errors),
                 KILN_E_INVALID);
    CHECK_EQ_STR(node_error_type(errors, "9"), "required_input_missing");
    json_decref(errors);
    /* an unknown model file is value_not_in_list, reported on the loader */
    CHECK_EQ_INT(parse_text("{\"3\":{\"class_type\":\"VAELoader\",\"inputs\":{\"vae_name\":\"../../etc/passwd\"}},"
                            "\"8\":{\"class_type\":\"VAEDecode\",\"inputs\":{\"samples\":[\"8\",0],\"vae\":[\"3\",0]}},"
                            "\"9\":{\"class_type\":\"SaveImage\",\"inputs\":{\"images\":[\"8\",0]}}}",
                            &errors),
                 KILN_E_INVALID);
    CHECK(node_error_type(errors, "3") && !strcmp(node_error_type(errors, "3"), "value_not_in_list"));
    json_decref(errors);
    /* a cycle: 14 -> 15 -> 14 */
    CHECK_EQ_INT(parse_text("{\"14\":{\"class_type\":\"ImagePixelize\",\"inputs\":{\"image\":[\"15\",0],\"factor\":2}},"
                            "\"15\":{\"class_type\":\"ImagePixelize\",\"inputs\":{\"image\":[\"14\",0],\"factor\":2}},"
                            "\"9\":{\"class_type\":\"SaveImage\",\"inputs\":{\"images\":[\"14\",0]}}}",
                            &errors),
                 KILN_E_INVALID);
    char *dump = json_dumps(errors, JSON_COMPACT);
    CHECK_MSG(dump && strstr(dump, "dependency_cycle"), "%s", dump ? dump : "");
    free(dump);
    json_decref(errors);
    /* a self-link */
    CHECK_EQ_INT(parse_text("{\"9\":{\"class_type\":\"SaveImage\",\"inputs\":{\"images\":[\"9\",0]}}}", &errors),
                 KILN_E_INVALID);
    json_decref(errors);
}

static void test_good_outputs_survive_bad_ones(void) {
    json_t *j = load("tests/data/graphs/flux2_klein_ksampler_api.json"), *errors = NULL;
    json_object_set_new(j, "99", json_pack("{s:s, s:{s:[s,i]}}", "class_type", "SaveImage", "inputs", "images", "3", 0));
    kiln_graph *g = NULL;
    CHECK_EQ_INT(kiln_graph_parse(j, NULL, models, &g, &errors), KILN_OK);
    CHECK(g && g->n_outputs == 1 && !strcmp(g->nodes[g->outputs[0]].id, "9"));
    CHECK(g && json_object_get(g->node_errors, "99") != NULL);
    kiln_graph_free(g);
    json_decref(j);
}

static void test_limits(void) {
    json_t *j = load("tests/data/graphs/flux2_klein_t2i_template_api.json"), *errors = NULL;
    kiln_graph_limits lim = kiln_graph_limits_default();
    lim.max_pixels = 512 * 512;
    kiln_graph *g = NULL;
    CHECK_EQ_INT(kiln_graph_parse(j, &lim, models, &g, &errors), KILN_E_INVALID);
    CHECK_EQ_STR(node_error_type(errors, "75:66"), "value_bigger_than_max");
    json_decref(errors);
    lim = kiln_graph_limits_default();
    lim.max_nodes = 5;
    CHECK_EQ_INT(kiln_graph_parse(j, &lim, models, &g, &errors), KILN_E_LIMIT);
    json_decref(errors);
    /* each limit is exact: the template (13 nodes, 1024 x 1024, 4 steps, batch 1) passes at the limit and is
     * refused one under it, on the input that crosses it */
    struct {
        int nodes, side, batch, steps;
        long long pixels;
        kiln_status want;
        const char *node;
    } cases[] = {
        {13, 1024, 1, 4, 1024 * 1024, KILN_OK, NULL},
        {12, 0, 0, 0, 0, KILN_E_LIMIT, NULL},
        {0, 0, 0, 0, 1024 * 1024 - 1, KILN_E_INVALID, "75:66"},
        {0, 1023, 0, 0, 0, KILN_E_INVALID, "75:66"},
        {0, 0, 0, 3, 0, KILN_E_INVALID, "75:62"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lim = kiln_graph_limits_default();
        if (cases[i].nodes) lim.max_nodes = cases[i].nodes;
        if (cases[i].side) lim.max_side = cases[i].side;
        if (cases[i].batch) lim.max_batch = cases[i].batch;
        if (cases[i].steps) lim.max_steps = cases[i].steps;
        if (cases[i].pixels) lim.max_pixels = cases[i].pixels;
        errors = NULL;
        g = NULL;
        CHECK_MSG(kiln_graph_parse(j, &lim, models, &g, &errors) == cases[i].want, "limits case %zu", i);
        if (cases[i].node) CHECK_EQ_STR(node_error_type(errors, cases[i].node), "value_bigger_than_max");
        kiln_graph_free(g);
        json_decref(errors);
    }
    json_decref(j);
}

static void test_object_info(void) {
    json_t *all = kiln_graph_object_info(models, NULL, NULL);
    CHECK(json_object_size(all) >= 15);
    json_t *unet = json_object_get(all, "UNETLoader");
    json_t *names = json_array_get(json_object_get(json_object_get(json_object_get(unet, "input"), "required"),
                                                   "unet_name"), 0);
    CHECK_EQ_STR(json_string_value(json_array_get(names, 0)), "flux-2-klein-4b.safetensors");
    CHECK(json_is_true(json_object_get(json_object_get(all, "SaveImage"), "output_node")));
    json_t *steps = json_object_get(json_object_get(json_object_get(json_object_get(all, "Flux2Scheduler"), "input"),
                                                    "required"), "steps");
    CHECK_EQ_STR(json_string_value(json_array_get(steps, 0)), "INT");
    CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(steps, 1), "min")), 1);
    json_decref(all);
    json_t *one = kiln_graph_object_info(models, NULL, "KSampler");
    CHECK(one && json_object_size(one) == 1);
    json_decref(one);
    CHECK(kiln_graph_object_info(models, NULL, "Nope") == NULL);
}

int main(void) {
    fake_models_make(models, sizeof models, "validate");
    RUN(test_committed_graphs_validate);
    RUN(test_bounds_and_types);
    RUN(test_shape_errors);
    RUN(test_missing_inputs_models_and_cycles);
    RUN(test_good_outputs_survive_bad_ones);
    RUN(test_limits);
    RUN(test_object_info);
    test_rm_rf(models);
    return test_summary();
}

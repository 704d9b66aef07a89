/* test_bench_workflow.c - benchmark graphs: the three shipped graphs load with seed 000's knobs, digests match
 * Python's, instantiation patches prompt/seed/prefix and nothing else, the plain KSampler wiring is read, and
 * malformed graphs are refused with the node named. */
#include <jansson.h>
#include <stdbool.h>

#include "bench/workflow.h"
#include "test.h"

static void test_shipped_graphs(void) {
    static const struct {
        const char *file, *digest;
        int steps;
        bool pixel;
    } g[] = {
        {"tests/data/bench/graphs/klein-4b-8st.json", "2909f994427042d52d49c9275df757d8e86ae3d665946b133b97150ec342279e", 8, false},
        {"tests/data/bench/graphs/klein-4b-32st.json", "e4b407898563372927ec75c3e188092fdd3dfe3ded84588cc7090945fd638e17", 32, false},
        {"tests/data/bench/graphs/klein-4b-8st-pixel4.json", "0aae3632b7a47d2e9534cbf37c1eeff19514d7a7f60f424fcdbfc0c4180e3edd", 8, true},
    };
    for (size_t i = 0; i < 3; i++) {
        kiln_workflow w;
        kiln_err err = {0};
        CHECK_EQ_INT(kiln_workflow_load(test_src_path(g[i].file), &w, &err), KILN_OK);
        /* digests computed with Python: sha256(json.dumps(g, sort_keys=True, separators=(",", ":"), ensure_ascii=False)) */
        CHECK_EQ_STR(w.graph_digest, g[i].digest);
        CHECK_EQ_INT(strlen(w.file_digest), 64);
        CHECK_EQ_INT(json_integer_value(json_object_get(w.knobs, "steps")), g[i].steps);
        CHECK_NEAR(json_real_value(json_object_get(w.knobs, "cfg")), 1.0, 0);
        CHECK_EQ_STR(json_string_value(json_object_get(w.knobs, "sampler")), "euler");
        CHECK_EQ_INT(json_integer_value(json_object_get(w.knobs, "width")), 512);
        CHECK_EQ_INT(json_integer_value(json_object_get(w.knobs, "batch_size")), 3);
        CHECK_EQ_STR(json_string_value(json_object_get(w.knobs, "unet")), "flux-2-klein-4b.safetensors");
        CHECK_EQ_STR(json_string_value(json_object_get(w.knobs, "clip")), "qwen_3_4b.safetensors");
        CHECK_EQ_STR(json_string_value(json_object_get(w.knobs, "vae")), "flux2-vae.safetensors");
        CHECK_EQ_INT(json_object_get(w.knobs, "pixelize") != NULL, g[i].pixel);
        CHECK_EQ_INT(w.batch_size, 3);
        kiln_workflow_free(&w);
    }
}

static void test_instantiate(void) {
    kiln_workflow w;
    kiln_err err = {0};
    CHECK_EQ_INT(kiln_workflow_load(test_src_path("tests/data/bench/graphs/klein-4b-8st.json"), &w, &err), KILN_OK);
    json_t *g = kiln_workflow_instantiate(&w, "a lighthouse", 911001, "kiln-bench/x-0");
    CHECK(g != NULL);
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(json_object_get(g, "4"), "inputs"), "text")), "a lighthouse");
    CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(json_object_get(g, "7"), "inputs"), "noise_seed")), 911001);
    CHECK_EQ_STR(json_string_value(json_object_get(json_object_get(json_object_get(g, "14"), "inputs"), "filename_prefix")),
                 "kiln-bench/x-0");
    /* Only those three inputs changed; the file's graph itself is untouched. */
    json_object_set_new(json_object_get(json_object_get(g, "4"), "inputs"), "text", json_string(""));
    json_object_set_new(json_object_get(json_object_get(g, "7"), "inputs"), "noise_seed", json_integer(0));
    json_object_set_new(json_object_get(json_object_get(g, "14"), "inputs"), "filename_prefix", json_string("kiln-bench"));
    CHECK(json_equal(g, w.graph));
    json_decref(g);
    kiln_workflow_free(&w);
}

static kiln_status from_text(const char *text, kiln_workflow *w, kiln_err *err) {
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    CHECK_MSG(j != NULL, "%s", je.text);
    kiln_status st = kiln_workflow_from_json(j, "t", w, err);
    json_decref(j);
    return st;
}

static void test_ksampler_wiring_and_bad_graphs(void) {
    kiln_workflow w;
    kiln_err err = {0};
    const char *ks =
        "{\"1\":{\"class_type\":\"UNETLoader\",\"inputs\":{\"unet_name\":\"u\"}},"
        "\"2\":{\"class_type\":\"CLIPLoader\",\"inputs\":{\"clip_name\":\"c\"}},"
        "\"3\":{\"class_type\":\"VAELoader\",\"inputs\":{\"vae_name\":\"v\"}},"
        "\"5\":{\"class_type\":\"EmptyLatentImage\",\"inputs\":{\"width\":256,\"height\":128,\"batch_size\":2}},"
        "\"6\":{\"class_type\":\"KSampler\",\"inputs\":{\"seed\":1,\"steps\":4,\"cfg\":3,\"sampler_name\":\"euler\"}},"
        "\"9\":{\"class_type\":\"SaveImage\",\"inputs\":{\"images\":[\"8\",0]}}}";
    CHECK_EQ_INT(from_text(ks, &w, &err), KILN_OK);
    CHECK_EQ_INT(json_integer_value(json_object_get(w.knobs, "steps")), 4);
    CHECK_NEAR(json_real_value(json_object_get(w.knobs, "cfg")), 3.0, 0); /* an integer cfg reads as a real */
    CHECK_EQ_INT(w.batch_size, 2);
    json_t *g = kiln_workflow_instantiate(&w, "p", 77, "x");
    CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(json_object_get(g, "6"), "inputs"), "seed")), 77);
    json_decref(g);
    kiln_workflow_free(&w);
    CHECK_EQ_INT(from_text("[]", &w, &err), KILN_E_FORMAT);
    CHECK_EQ_INT(from_text("{\"1\":{\"class_type\":\"SaveImage\"}}", &w, &err), KILN_E_FORMAT);
    CHECK_ERR_CONTAINS(&err, "node \"1\"");
    CHECK_EQ_INT(from_text("{\"1\":{\"class_type\":\"UNETLoader\",\"inputs\":{}}}", &w, &err), KILN_E_FORMAT);
    CHECK_ERR_CONTAINS(&err, "no SaveImage");
    /* A linked knob is not a benchmark knob; a missing one is named. */
    CHECK_EQ_INT(from_text("{\"6\":{\"class_type\":\"KSampler\",\"inputs\":{\"steps\":[\"1\",0]}},"
                           "\"9\":{\"class_type\":\"SaveImage\",\"inputs\":{}}}", &w, &err), KILN_E_FORMAT);
    CHECK_ERR_CONTAINS(&err, "KSampler.steps is not a literal");
    CHECK_EQ_INT(from_text("{\"9\":{\"class_type\":\"SaveImage\",\"inputs\":{}}}", &w, &err), KILN_E_FORMAT);
    CHECK_ERR_CONTAINS(&err, "sets no steps");
    kiln_workflow_free(&w);
    CHECK_EQ_INT(kiln_workflow_load("/nonexistent/kiln/g.json", &w, &err), KILN_E_NOT_FOUND);
}

static void test_receipts_link_derived_graphs(void) {
    kiln_workflow w8, w32, px;
    kiln_err err = {0};
    CHECK_EQ_INT(kiln_workflow_load(test_src_path("tests/data/bench/graphs/klein-4b-8st.json"), &w8, &err), KILN_OK);
    CHECK_EQ_INT(kiln_workflow_load(test_src_path("tests/data/bench/graphs/klein-4b-32st.json"), &w32, &err), KILN_OK);
    CHECK_EQ_INT(kiln_workflow_load(test_src_path("tests/data/bench/graphs/klein-4b-8st-pixel4.json"), &px, &err), KILN_OK);
    const kiln_workflow *all[] = {&w8, &w32, &px};
    json_t *r32 = json_object(), *r8 = json_object(), *rpx = json_object();
    kiln_workflow_receipts(&w32, all, 3, r32);
    kiln_workflow_receipts(&w8, all, 3, r8);
    kiln_workflow_receipts(&px, all, 3, rpx);
    /* 32st is 8st at 32 steps (as in seed 000's receipt); pixel4 differs by a node, so it links to nothing. */
    CHECK_EQ_STR(json_string_value(json_object_get(r32, "graph-at-8-steps")), w8.graph_digest);
    CHECK_EQ_STR(json_string_value(json_object_get(r8, "graph-at-32-steps")), w32.graph_digest);
    CHECK_EQ_INT(json_object_size(r32), 1);
    CHECK_EQ_INT(json_object_size(rpx), 0);
    json_decref(r32);
    json_decref(r8);
    json_decref(rpx);
    kiln_workflow_free(&w8);
    kiln_workflow_free(&w32);
    kiln_workflow_free(&px);
}

int main(void) {
    RUN(test_shipped_graphs);
    RUN(test_instantiate);
    RUN(test_ksampler_wiring_and_bad_graphs);
    RUN(test_receipts_link_derived_graphs);
    return test_summary();
}

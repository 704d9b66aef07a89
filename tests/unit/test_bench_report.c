/* test_bench_report.c - the report reader on the three seed reports (copies in tests/data/bench/seeds/) and on
 * hand-made corruptions of them: each consistency rule must fire on the mutation it exists for. */
#include <jansson.h>

#include "bench/report.h"
#include "test.h"

#define SEED000 "tests/data/bench/seeds/000_b6f3f2a8c34741b3.txt"
#define SEED001 "tests/data/bench/seeds/001_6e4e75fc4d9c4806.txt"
#define SEED002 "tests/data/bench/seeds/002_7dcbefd532d7145f.txt"

static json_t *load_json(const char *rel) {
    json_error_t je;
    json_t *j = json_load_file(test_src_path(rel), 0, &je);
    CHECK_MSG(j != NULL, "%s: %s", rel, je.text);
    return j;
}

/* Runs the reader over a mutated document; true when some problem contains needle. */
static bool problem_with(json_t *doc, const char *needle) {
    kiln_report *r;
    kiln_err err = {0};
    if (kiln_report_from_json(doc, "mutant", &r, &err) != KILN_OK) return false;
    bool found = false;
    for (size_t i = 0; i < r->problems.n; i++)
        if (strstr(r->problems.items[i], needle)) found = true;
    if (!found)
        for (size_t i = 0; i < r->problems.n; i++) fprintf(stderr, "    (problem: %s)\n", r->problems.items[i]);
    kiln_report_free(r);
    return found;
}

static void test_three_seeds_parse_and_pass(void) {
    kiln_err err = {0};
    kiln_report *r;
    CHECK_EQ_INT(kiln_report_load(test_src_path(SEED000), &r, &err), KILN_OK);
    CHECK_EQ_INT(r->kind, KILN_REPORT_SECONDS_PER_IMAGE);
    CHECK_EQ_INT(r->problems.n, 0);
    CHECK_EQ_INT(r->unknown.n, 0);
    CHECK(r->typed_ok);
    kiln_report_free(r);

    CHECK_EQ_INT(kiln_report_load(test_src_path(SEED001), &r, &err), KILN_OK);
    CHECK_EQ_INT(r->kind, KILN_REPORT_ABBA);
    CHECK_EQ_INT(r->problems.n, 0);
    /* Seed 001's project-specific notes are kept and listed, not understood. */
    CHECK_EQ_INT(r->unknown.n, 4);
    if (r->unknown.n == 4) {
        CHECK_EQ_STR(r->unknown.items[0], "/final_commit");
        CHECK_EQ_STR(r->unknown.items[3], "/high_bcg");
    }
    CHECK(json_is_string(json_object_get(r->root, "high_bcg"))); /* preserved */
    kiln_report_free(r);

    CHECK_EQ_INT(kiln_report_load(test_src_path(SEED002), &r, &err), KILN_OK);
    CHECK_EQ_INT(r->kind, KILN_REPORT_VARIANTS);
    CHECK_EQ_INT(r->problems.n, 0);
    CHECK_EQ_INT(r->unknown.n, 0);
    kiln_report_free(r);
}

static void test_unreadable_inputs_are_errors_not_crashes(void) {
    kiln_err err = {0};
    kiln_report *r = (kiln_report *)1;
    CHECK_EQ_INT(kiln_report_parse("{", 1, "x", &r, &err), KILN_E_FORMAT);
    CHECK(r == NULL);
    CHECK_EQ_INT(kiln_report_parse("[1,2]", 5, "x", &r, &err), KILN_E_FORMAT);
    CHECK_ERR_CONTAINS(&err, "JSON object");
    CHECK_EQ_INT(kiln_report_parse("{\"hello\":1}", 11, "x", &r, &err), KILN_E_FORMAT);
    CHECK_ERR_CONTAINS(&err, "not a benchmark report");
    const char *dup = "{\"rows\":[],\"rows\":[]}";
    CHECK_EQ_INT(kiln_report_parse(dup, strlen(dup), "x", &r, &err), KILN_E_FORMAT);
    const char *badkind = "{\"kind\":\"poetry\",\"rows\":[]}";
    CHECK_EQ_INT(kiln_report_parse(badkind, strlen(badkind), "x", &r, &err), KILN_E_FORMAT);
    CHECK_EQ_INT(kiln_report_load("/nonexistent/kiln/report.json", &r, &err), KILN_E_NOT_FOUND);
    /* Wrong types load (so show/check can speak) but carry problems and are not typed_ok. */
    const char *typed = "{\"rows\":\"many\",\"scope\":3}";
    CHECK_EQ_INT(kiln_report_parse(typed, strlen(typed), "x", &r, &err), KILN_OK);
    CHECK(!r->typed_ok);
    CHECK(r->problems.n >= 3); /* rows, scope, summary missing */
    kiln_report_free(r);
}

static json_t *batch000(json_t *doc, const char *graph) {
    return json_object_get(
        json_object_get(json_object_get(json_object_get(json_object_get(json_object_get(doc, "graphs"), graph),
                                                        "cards"),
                                        "0"),
                        "batches"),
        "3");
}

static void test_seconds_per_image_rules(void) {
    json_t *doc;
    /* reduced.submits must count the timed submits */
    doc = load_json(SEED000);
    json_object_set_new(json_object_get(batch000(doc, "klein-4b-8st"), "reduced"), "submits", json_integer(3));
    CHECK(problem_with(doc, "reduced/submits: 3, but 2 timed submits"));
    json_decref(doc);
    /* a median that is not the submits' median */
    doc = load_json(SEED000);
    json_object_set_new(json_object_get(json_object_get(batch000(doc, "klein-4b-32st"), "reduced"),
                                        "exec_seconds_per_submit"),
                        "median", json_real(18.5));
    CHECK(problem_with(doc, "exec_seconds_per_submit/median: 18.5, but the submits give 18.2585"));
    json_decref(doc);
    /* n = 0 with a number: an unsupported field is null, never 0 */
    doc = load_json(SEED000);
    json_object_set_new(json_object_get(json_object_get(batch000(doc, "klein-4b-8st"), "trace"), "fan.speed"),
                        "min", json_real(0));
    CHECK(problem_with(doc, "n = 0 but statistics are not null"));
    json_decref(doc);
    /* throttle fraction outside [0, 1] */
    doc = load_json(SEED000);
    json_object_set_new(json_object_get(json_object_get(batch000(doc, "klein-4b-8st"), "trace"), "throttle"),
                        "sw_power_cap", json_real(1.5));
    CHECK(problem_with(doc, "not a fraction"));
    json_decref(doc);
    /* images per minute that does not follow from images and wall time */
    doc = load_json(SEED000);
    json_object_set_new(json_object_get(batch000(doc, "klein-4b-8st-pixel4"), "reduced"), "images_per_minute_wall",
                        json_real(40.0));
    CHECK(problem_with(doc, "images_per_minute_wall: 40"));
    json_decref(doc);
    /* a cap read from a field that is not a cap */
    doc = load_json(SEED000);
    json_object_set_new(json_object_get(json_object_get(doc, "preflight"), "cap"), "field", json_string("power.draw"));
    CHECK(problem_with(doc, "cap/field"));
    json_decref(doc);
    /* a gate that "passed" over the threshold, and a failed gate without a refusal */
    doc = load_json(SEED000);
    json_t *gate = json_object_get(json_object_get(json_object_get(doc, "preflight"), "card_available"),
                                   "contention_gate");
    json_t *util = json_object_get(json_array_get(json_object_get(gate, "attempts"), 0), "utilization_pct");
    json_object_set_new(util, "mean", json_real(7.0));
    json_object_set_new(util, "max", json_real(9.0));
    CHECK(problem_with(doc, "mean utilization 7% is over 5%"));
    json_object_set_new(gate, "passed", json_false());
    CHECK(problem_with(doc, "no refusal is recorded"));
    json_decref(doc);
    /* a reference matched across caps */
    doc = load_json(SEED000);
    json_t *ratio = json_pack("{s:f,s:f,s:f,s:s,s:i}", "ratio", 2.5, "reference_median", 0.63, "cap_w", 250.0,
                              "graph_digest", "79df5a8bb3f46ecebe70ffbf3e53690315e35215ac363a9140a7ccaa7516aaaf",
                              "batch_size", 3);
    json_object_set_new(json_object_get(batch000(doc, "klein-4b-8st"), "ratio_vs_references"), "3090", ratio);
    CHECK(problem_with(doc, "matched across caps"));
    json_decref(doc);
    /* a submit whose cell is not one of the graph's cells, and a bad digest */
    doc = load_json(SEED000);
    json_object_set_new(json_array_get(json_object_get(batch000(doc, "klein-4b-8st"), "timed"), 1), "cell",
                        json_string("nowhere__vista"));
    json_object_set_new(json_object_get(json_object_get(doc, "graphs"), "klein-4b-8st"), "graph_digest",
                        json_string("79DF"));
    CHECK(problem_with(doc, "\"nowhere__vista\" is not one of the graph's prompt_cells"));
    CHECK(problem_with(doc, "graph_digest: not a sha256"));
    json_decref(doc);
}

static void test_abba_and_variants_rules(void) {
    json_t *doc = load_json(SEED001);
    /* swap two rows' sides: breaks A/B/B/A */
    json_object_set_new(json_array_get(json_object_get(doc, "rows"), 1), "side", json_string("a"));
    CHECK(problem_with(doc, "breaks the A/B/B/A order"));
    json_decref(doc);
    doc = load_json(SEED001);
    json_object_set_new(json_object_get(json_object_get(doc, "summary"), "engine_e2e_s"), "reduction_percent",
                        json_real(5.0));
    CHECK(problem_with(doc, "reduction_percent: 5"));
    json_decref(doc);
    doc = load_json(SEED001);
    json_object_set_new(doc, "identical_outputs", json_string("no")); /* all eight digests are equal */
    CHECK(problem_with(doc, "the output digests say yes"));
    json_decref(doc);
    doc = load_json(SEED002);
    json_object_set_new(json_array_get(json_object_get(doc, "results"), 1), "vae_median_s", json_real(0.3));
    CHECK(problem_with(doc, "vae_median_s: 0.3"));
    json_decref(doc);
}

int main(void) {
    RUN(test_three_seeds_parse_and_pass);
    RUN(test_unreadable_inputs_are_errors_not_crashes);
    RUN(test_seconds_per_image_rules);
    RUN(test_abba_and_variants_rules);
    return test_summary();
}

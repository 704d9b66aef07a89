/* test_bench_manifest.c - the prompt bank (tests/data/bench/prompt-bank.json) and the reference rule: a
 * reference is used only at the same cap, graph digest and batch size, otherwise withheld with the reason. */
#include <jansson.h>
#include <math.h>

#include "bench/manifest.h"
#include "test.h"

#define DIGEST_A "2909f994427042d52d49c9275df757d8e86ae3d665946b133b97150ec342279e"
#define DIGEST_B "e4b407898563372927ec75c3e188092fdd3dfe3ded84588cc7090945fd638e17"

static void test_shipped_prompt_bank(void) {
    kiln_manifest *m;
    kiln_err err = {0};
    CHECK_EQ_INT(kiln_manifest_load(test_src_path("tests/data/bench/prompt-bank.json"), &m, &err), KILN_OK);
    if (!m) return;
    CHECK_EQ_INT(m->n_cells, 12);
    const kiln_cell *c = kiln_manifest_find(m, "ember-harbor-1__dwelling");
    CHECK(c != NULL);
    if (c) {
        CHECK(strstr(c->prompt, "harbour") != NULL);
        CHECK_EQ_INT(c->n_refs, 1);
        CHECK(isnan(c->refs[0].cap_w)); /* seed 000 does not say at which cap its references were taken */
    }
    CHECK(kiln_manifest_find(m, "nowhere") == NULL);
    /* The shipped references carry no cap: always withheld, with the cap reason. */
    const char *cells[] = {"ember-harbor-1__dwelling", "ember-harbor-2__vista"};
    json_t *ratios = json_object(), *withheld = json_object();
    kiln_match_references(m, cells, 2, 95.0, DIGEST_A, 3, 1.64, ratios, withheld);
    CHECK_EQ_INT(json_object_size(ratios), 0);
    const char *why = json_string_value(json_object_get(withheld, "wave1-klein4b-bf16"));
    CHECK(why && strstr(why, "never matched across caps"));
    json_decref(ratios);
    json_decref(withheld);
    kiln_manifest_free(m);
}

static kiln_manifest *from_text(const char *text, kiln_err *err) {
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    CHECK_MSG(j != NULL, "%s", je.text);
    kiln_manifest *m = NULL;
    kiln_manifest_from_json(j, &m, err);
    json_decref(j);
    return m;
}

static void test_reference_rule(void) {
    kiln_err err = {0};
    kiln_manifest *m = from_text(
        "{\"schema\":\"kiln-prompt-bank/1\",\"cells\":["
        "{\"id\":\"a\",\"prompt\":\"p\",\"references\":["
        "  {\"seat\":\"same\",\"seconds\":2.0,\"cap_w\":95,\"graph_digest\":\"" DIGEST_A "\",\"batch_size\":3},"
        "  {\"seat\":\"same\",\"seconds\":9.0,\"cold\":true,\"cap_w\":95,\"graph_digest\":\"" DIGEST_A "\",\"batch_size\":3},"
        "  {\"seat\":\"hot\",\"seconds\":1.0,\"cap_w\":450,\"graph_digest\":\"" DIGEST_A "\",\"batch_size\":3},"
        "  {\"seat\":\"other-graph\",\"seconds\":1.0,\"cap_w\":95,\"graph_digest\":\"" DIGEST_B "\",\"batch_size\":3},"
        "  {\"seat\":\"batch1\",\"seconds\":1.0,\"cap_w\":95,\"graph_digest\":\"" DIGEST_A "\",\"batch_size\":1},"
        "  {\"seat\":\"cold-only\",\"seconds\":5.0,\"cold\":true,\"cap_w\":95,\"graph_digest\":\"" DIGEST_A "\",\"batch_size\":3}]},"
        "{\"id\":\"b\",\"prompt\":\"q\",\"references\":["
        "  {\"seat\":\"same\",\"seconds\":3.0,\"cap_w\":95.2,\"graph_digest\":\"" DIGEST_A "\",\"batch_size\":3}]}]}",
        &err);
    CHECK_MSG(m != NULL, "%s", err.msg);
    if (!m) return;
    const char *cells[] = {"a", "b"};
    json_t *ratios = json_object(), *withheld = json_object();
    kiln_match_references(m, cells, 2, 95.0, DIGEST_A, 3, 1.25, ratios, withheld);
    /* "same": warm references 2.0 and 3.0 (cold 9.0 excluded), median 2.5, ratio 1.25 / 2.5 = 0.5 */
    json_t *same = json_object_get(ratios, "same");
    CHECK(same != NULL);
    CHECK_NEAR(json_real_value(json_object_get(same, "reference_median")), 2.5, 1e-12);
    CHECK_NEAR(json_real_value(json_object_get(same, "ratio")), 0.5, 1e-12);
    CHECK_EQ_INT(json_object_size(ratios), 1);
    CHECK(strstr(json_string_value(json_object_get(withheld, "hot")), "measured at 450 W and never at 95 W"));
    CHECK(strstr(json_string_value(json_object_get(withheld, "other-graph")), "with graph e4b407898563"));
    CHECK(strstr(json_string_value(json_object_get(withheld, "batch1")), "at batch 1, not batch 3"));
    CHECK(strstr(json_string_value(json_object_get(withheld, "cold-only")), "only cold references"));
    json_object_clear(ratios);
    json_object_clear(withheld);
    /* Unknown cap of the run: nothing is matched. */
    kiln_match_references(m, cells, 2, NAN, DIGEST_A, 3, 1.25, ratios, withheld);
    CHECK_EQ_INT(json_object_size(ratios), 0);
    CHECK(strstr(json_string_value(json_object_get(withheld, "same")), "this run's cap is unknown"));
    json_decref(ratios);
    json_decref(withheld);
    kiln_manifest_free(m);
}

static void test_bad_manifests(void) {
    kiln_err err = {0};
    CHECK(from_text("{\"cells\":[]}", &err) == NULL);
    CHECK_ERR_CONTAINS(&err, "schema");
    CHECK(from_text("{\"schema\":\"kiln-prompt-bank/1\",\"cells\":[{\"id\":\"a\",\"prompt\":\"p\"},"
                    "{\"id\":\"a\",\"prompt\":\"q\"}]}", &err) == NULL);
    CHECK_ERR_CONTAINS(&err, "appears twice");
    CHECK(from_text("{\"schema\":\"kiln-prompt-bank/1\",\"cells\":[{\"id\":\"a\",\"prompt\":7}]}", &err) == NULL);
    CHECK_ERR_CONTAINS(&err, "/cells/0/prompt");
    CHECK(from_text("{\"schema\":\"kiln-prompt-bank/1\",\"cells\":[{\"id\":\"a\",\"prompt\":\"p\",\"references\":"
                    "[{\"seat\":\"s\",\"seconds\":-1}]}]}", &err) == NULL);
    CHECK_ERR_CONTAINS(&err, "/cells/0/references/0/seconds");
    kiln_manifest *m;
    CHECK_EQ_INT(kiln_manifest_load("/nonexistent/kiln/bank.json", &m, &err), KILN_E_NOT_FOUND);
}

int main(void) {
    RUN(test_shipped_prompt_bank);
    RUN(test_reference_rule);
    RUN(test_bad_manifests);
    return test_summary();
}

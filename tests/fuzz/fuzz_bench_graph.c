/* fuzz_bench_graph.c - libFuzzer target over the harness's other inputs: any JSON as a benchmark graph (knobs,
 * canonical JSON, digest, instantiation) and as a prompt bank (validation, the reference rule). Seed corpus: the
 * three shipped graphs and the prompt bank. */
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "bench/canon.h"
#include "bench/manifest.h"
#include "bench/workflow.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_error_t je;
    json_t *j = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &je);
    if (!j) return 0;
    char *s;
    size_t n;
    if (kiln_json_canonical(j, &s, &n, NULL) == KILN_OK) kiln_free(s);
    kiln_workflow w;
    if (kiln_workflow_from_json(j, "fuzz", &w, NULL) == KILN_OK) {
        json_t *g = kiln_workflow_instantiate(&w, "prompt", 42, "prefix");
        json_decref(g);
        kiln_workflow_free(&w);
    }
    kiln_manifest *m;
    if (kiln_manifest_from_json(j, &m, NULL) == KILN_OK) {
        const char *ids[2] = {m->cells[0].id, m->cells[m->n_cells - 1].id};
        json_t *r = json_object(), *wh = json_object();
        kiln_match_references(m, ids, 2, 95.0, "x", 3, 1.0, r, wh);
        kiln_match_references(m, ids, 2, NAN, NULL, 1, NAN, r, wh);
        json_decref(r);
        json_decref(wh);
        kiln_manifest_free(m);
    }
    json_decref(j);
    return 0;
}

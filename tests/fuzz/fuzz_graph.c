/* fuzz_graph.c - libFuzzer target: arbitrary bytes as a /prompt body through JSON parsing, graph parsing and
 * validation (links, types, bounds, cycles, limits). Nothing may crash, leak or hang; every rejection must come
 * with an error body of ComfyUI's shape. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "graph/graph.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_t *j = json_loadb((const char *)data, size, 0, NULL);
    if (!j) return 0;
    json_t *prompt = json_object_get(j, "prompt");
    if (!prompt) prompt = j;
    kiln_graph_limits lim = kiln_graph_limits_default();
    kiln_graph *g = NULL;
    json_t *errors = NULL;
    kiln_status s = kiln_graph_parse(prompt, &lim, NULL, &g, &errors);
    if (s == KILN_OK) {
        if (!g || errors || g->n_outputs <= 0) abort();
        for (int i = 0; i < g->n_outputs; i++)
            if (g->outputs[i] < 0 || g->outputs[i] >= g->n_nodes) abort();
    } else {
        if (g || !json_is_object(json_object_get(json_object_get(errors, "error"), "extra_info")) ||
            !json_is_string(json_object_get(json_object_get(errors, "error"), "type")))
            abort();
    }
    char *txt = errors ? json_dumps(errors, JSON_COMPACT) : NULL;
    free(txt);
    json_decref(errors);
    kiln_graph_free(g);
    json_decref(j);
    return 0;
}

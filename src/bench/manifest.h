/* manifest.h - the prompt bank: named prompt cells (e.g. "ember-harbor-1__dwelling") with their text and
 * optional reference timings, and the rule for using a reference.
 *
 * File (docs/bench-report.md, "Prompt bank"):
 *   {"schema": "kiln-prompt-bank/1", "name": "...", "cells": [{"id": "...", "prompt": "...", "workflow": "...",
 *     "references": [{"seat": "...", "seconds": 0.62, "cold": false, "cap_w": 95.0 | null,
 *                     "graph_digest": "<sha256>" | null, "batch_size": 3 | null}]}]}
 *
 * The rule (spec bench-harness.md 6): a reference is compared only at the same cap, the same graph digest and
 * the same batch size; otherwise it is withheld with the reason. Cold references are excluded and listed.
 *
 *     kiln_manifest *m;
 *     kiln_manifest_load("prompt-bank.json", &m, &err);
 *     const kiln_cell *c = kiln_manifest_find(m, "ember-harbor-1__dwelling");
 *     json_t *ratios = json_object(), *withheld = json_object();
 *     kiln_match_references(m, cells, ncells, 95.0, digest, 3, median_s_per_image, ratios, withheld);
 */
#ifndef KILN_BENCH_MANIFEST_H
#define KILN_BENCH_MANIFEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/status.h"

typedef struct kiln_cell_ref {
    const char *seat;         /* who measured it (a card, a build); never NULL */
    double seconds;           /* seconds per image */
    bool cold;
    double cap_w;             /* NaN: no cap recorded */
    const char *graph_digest; /* NULL: not recorded */
    int batch_size;           /* 0: not recorded */
} kiln_cell_ref;

typedef struct kiln_cell {
    const char *id, *prompt, *workflow; /* workflow may be NULL */
    kiln_cell_ref *refs;
    size_t n_refs;
} kiln_cell;

typedef struct kiln_manifest {
    json_t *root; /* owns every string above */
    const char *name;
    kiln_cell *cells;
    size_t n_cells;
} kiln_manifest;

/* Validates everything (ids unique and non-empty, prompts strings, reference fields typed, seconds > 0);
 * KILN_E_FORMAT with the path of the first bad field. */
kiln_status kiln_manifest_from_json(json_t *root, kiln_manifest **out, kiln_err *err);
kiln_status kiln_manifest_load(const char *path, kiln_manifest **out, kiln_err *err);
void kiln_manifest_free(kiln_manifest *m); /* NULL allowed */
const kiln_cell *kiln_manifest_find(const kiln_manifest *m, const char *id);

/* For every seat referenced by the given cells: when all its warm references match (cap within 0.5 W, graph
 * digest, batch size), sets ratios[seat] = {ratio = measured / reference median, reference_median, cap_w,
 * graph_digest, batch_size, source}; otherwise withheld[seat] = the reason. measured_s_per_image NaN: nothing
 * to compare, every seat is withheld with that reason. cap_w NaN means the run's cap is unknown. */
void kiln_match_references(const kiln_manifest *m, const char *const *cell_ids, size_t n_cells, double cap_w,
                           const char *graph_digest, int batch_size, double measured_s_per_image, json_t *ratios,
                           json_t *withheld);

#endif

/* manifest.c - prompt bank loading and the reference rule (see manifest.h). */
#include "bench/manifest.h"

#include <errno.h>
#include <math.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "bench/stats.h"

#define MANIFEST_SCHEMA "kiln-prompt-bank/1"
#define MANIFEST_MAX_CELLS 100000

void kiln_manifest_free(kiln_manifest *m) {
    if (!m) return;
    for (size_t i = 0; i < m->n_cells; i++) kiln_free(m->cells[i].refs);
    kiln_free(m->cells);
    json_decref(m->root);
    kiln_free(m);
}

static kiln_status parse_ref(const json_t *r, const char *where, kiln_cell_ref *out, kiln_err *err) {
    if (!json_is_object(r)) return KILN_FAIL(err, KILN_E_FORMAT, "%s: a reference is an object", where);
    const json_t *seat = json_object_get(r, "seat"), *sec = json_object_get(r, "seconds");
    const json_t *cold = json_object_get(r, "cold"), *cap = json_object_get(r, "cap_w");
    const json_t *gd = json_object_get(r, "graph_digest"), *bs = json_object_get(r, "batch_size");
    if (!json_is_string(seat) || !*json_string_value(seat))
        return KILN_FAIL(err, KILN_E_FORMAT, "%s/seat: a non-empty string is required", where);
    if (!json_is_number(sec) || !(json_number_value(sec) > 0) || !isfinite(json_number_value(sec)))
        return KILN_FAIL(err, KILN_E_FORMAT, "%s/seconds: a positive number is required", where);
    if (cold && !json_is_boolean(cold)) return KILN_FAIL(err, KILN_E_FORMAT, "%s/cold: a boolean", where);
    if (cap && !json_is_null(cap) && !json_is_number(cap))
        return KILN_FAIL(err, KILN_E_FORMAT, "%s/cap_w: a number or null", where);
    if (gd && !json_is_null(gd) && !json_is_string(gd))
        return KILN_FAIL(err, KILN_E_FORMAT, "%s/graph_digest: a string or null", where);
    if (bs && !json_is_null(bs) && (!json_is_integer(bs) || json_integer_value(bs) < 1 ||
                                    json_integer_value(bs) > 4096))
        return KILN_FAIL(err, KILN_E_FORMAT, "%s/batch_size: an integer 1..4096 or null", where);
    out->seat = json_string_value(seat);
    out->seconds = json_number_value(sec);
    out->cold = json_is_true(cold);
    out->cap_w = json_is_number(cap) ? json_number_value(cap) : NAN;
    out->graph_digest = json_string_value(gd);
    out->batch_size = json_is_integer(bs) ? (int)json_integer_value(bs) : 0;
    return KILN_OK;
}

kiln_status kiln_manifest_from_json(json_t *root, kiln_manifest **out, kiln_err *err) {
    *out = NULL;
    if (!json_is_object(root)) return KILN_FAIL(err, KILN_E_FORMAT, "prompt bank: a JSON object is required");
    const char *schema = json_string_value(json_object_get(root, "schema"));
    if (!schema || strcmp(schema, MANIFEST_SCHEMA) != 0)
        return KILN_FAIL(err, KILN_E_FORMAT, "prompt bank: /schema must be \"%s\"", MANIFEST_SCHEMA);
    const json_t *cells = json_object_get(root, "cells");
    if (!json_is_array(cells) || json_array_size(cells) == 0)
        return KILN_FAIL(err, KILN_E_FORMAT, "prompt bank: /cells must be a non-empty array");
    size_t n = json_array_size(cells);
    if (n > MANIFEST_MAX_CELLS)
        return KILN_FAIL(err, KILN_E_LIMIT, "prompt bank: %zu cells over the limit of %d", n, MANIFEST_MAX_CELLS);
    kiln_manifest *m = kiln_calloc(1, sizeof *m);
    if (!m || !(m->cells = kiln_calloc(n, sizeof *m->cells))) {
        kiln_free(m);
        return KILN_FAIL(err, KILN_E_NOMEM, "prompt bank: out of memory");
    }
    m->root = json_incref(root);
    m->name = json_string_value(json_object_get(root, "name"));
    kiln_status st = KILN_OK;
    char where[128];
    for (size_t i = 0; i < n && st == KILN_OK; i++) {
        const json_t *c = json_array_get(cells, i);
        kiln_cell *cell = &m->cells[i];
        m->n_cells = i + 1;
        snprintf(where, sizeof where, "prompt bank: /cells/%zu", i);
        const json_t *id = json_object_get(c, "id"), *pr = json_object_get(c, "prompt");
        const json_t *wf = json_object_get(c, "workflow"), *refs = json_object_get(c, "references");
        if (!json_is_object(c)) st = KILN_FAIL(err, KILN_E_FORMAT, "%s: a cell is an object", where);
        else if (!json_is_string(id) || !*json_string_value(id))
            st = KILN_FAIL(err, KILN_E_FORMAT, "%s/id: a non-empty string is required", where);
        else if (!json_is_string(pr)) st = KILN_FAIL(err, KILN_E_FORMAT, "%s/prompt: a string is required", where);
        else if (wf && !json_is_null(wf) && !json_is_string(wf))
            st = KILN_FAIL(err, KILN_E_FORMAT, "%s/workflow: a string or null", where);
        else if (refs && !json_is_array(refs))
            st = KILN_FAIL(err, KILN_E_FORMAT, "%s/references: an array", where);
        if (st != KILN_OK) break;
        cell->id = json_string_value(id);
        cell->prompt = json_string_value(pr);
        cell->workflow = json_string_value(wf);
        for (size_t k = 0; k < i; k++)
            if (!strcmp(m->cells[k].id, cell->id)) {
                st = KILN_FAIL(err, KILN_E_FORMAT, "%s/id: \"%s\" appears twice", where, cell->id);
                break;
            }
        size_t nr = json_array_size(refs);
        if (st == KILN_OK && nr) {
            cell->refs = kiln_calloc(nr, sizeof *cell->refs);
            if (!cell->refs) st = KILN_FAIL(err, KILN_E_NOMEM, "prompt bank: out of memory");
            for (size_t r = 0; r < nr && st == KILN_OK; r++) {
                char rw[160];
                snprintf(rw, sizeof rw, "%s/references/%zu", where, r);
                st = parse_ref(json_array_get(refs, r), rw, &cell->refs[r], err);
                cell->n_refs = r + 1;
            }
        }
    }
    if (st != KILN_OK) {
        kiln_manifest_free(m);
        return st;
    }
    *out = m;
    return KILN_OK;
}

kiln_status kiln_manifest_load(const char *path, kiln_manifest **out, kiln_err *err) {
    *out = NULL;
    if (access(path, R_OK) != 0)
        return KILN_FAIL(err, errno == ENOENT ? KILN_E_NOT_FOUND : KILN_E_IO, "%s: %s", path, strerror(errno));
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!root) return KILN_FAIL(err, KILN_E_FORMAT, "%s:%d: %s", path, je.line, je.text);
    kiln_status st = kiln_manifest_from_json(root, out, err);
    json_decref(root);
    if (st != KILN_OK) kiln_err_prefix(err, "%s", path);
    return st;
}

const kiln_cell *kiln_manifest_find(const kiln_manifest *m, const char *id) {
    for (size_t i = 0; m && id && i < m->n_cells; i++)
        if (!strcmp(m->cells[i].id, id)) return &m->cells[i];
    return NULL;
}

/* Why one reference cannot be compared with this run, or NULL when it can. */
static const char *mismatch(const kiln_cell_ref *r, double cap_w, const char *digest, int batch, char *buf,
                            size_t cap) {
    if (isnan(cap_w)) snprintf(buf, cap, "this run's cap is unknown - a reference is never matched across caps");
    else if (isnan(r->cap_w))
        snprintf(buf, cap, "%s was measured at no recorded cap, not at %.0f W - a reference is never matched across "
                 "caps", r->seat, cap_w);
    else if (fabs(r->cap_w - cap_w) > 0.5)
        snprintf(buf, cap, "%s was measured at %.0f W and never at %.0f W - a reference is never matched across caps",
                 r->seat, r->cap_w, cap_w);
    else if (!r->graph_digest || !digest || strcmp(r->graph_digest, digest) != 0)
        snprintf(buf, cap, "%s was measured with graph %.12s, not this graph %.12s", r->seat,
                 r->graph_digest ? r->graph_digest : "(unrecorded)", digest ? digest : "(none)");
    else if (r->batch_size != batch)
        snprintf(buf, cap, "%s was measured at batch %d, not batch %d", r->seat, r->batch_size, batch);
    else return NULL;
    return buf;
}

void kiln_match_references(const kiln_manifest *m, const char *const *cell_ids, size_t n_cells, double cap_w,
                           const char *graph_digest, int batch_size, double measured_s_per_image, json_t *ratios,
                           json_t *withheld) {
    /* Seats in order of first appearance; each seat judged over all its references in these cells. */
    for (size_t i = 0; i < n_cells; i++) {
        const kiln_cell *c = kiln_manifest_find(m, cell_ids[i]);
        for (size_t r = 0; c && r < c->n_refs; r++) {
            const char *seat = c->refs[r].seat;
            if (json_object_get(ratios, seat) || json_object_get(withheld, seat)) continue;
            /* Gather this seat's warm references over the cells; the first mismatch decides. */
            double *vals = kiln_calloc(n_cells * 16 + 1, sizeof *vals);
            size_t nv = 0;
            char why[512];
            const char *reason = NULL;
            size_t cold = 0;
            for (size_t j = 0; j < n_cells && !reason; j++) {
                const kiln_cell *cj = kiln_manifest_find(m, cell_ids[j]);
                for (size_t k = 0; cj && k < cj->n_refs && !reason; k++) {
                    const kiln_cell_ref *ref = &cj->refs[k];
                    if (strcmp(ref->seat, seat) != 0) continue;
                    if (ref->cold) {
                        cold++;
                        continue;
                    }
                    reason = mismatch(ref, cap_w, graph_digest, batch_size, why, sizeof why);
                    if (!reason && vals && nv < n_cells * 16) vals[nv++] = ref->seconds;
                }
            }
            if (!reason && nv == 0) {
                snprintf(why, sizeof why, "%s has only cold references (%zu) for these cells", seat, cold);
                reason = why;
            }
            if (!reason && isnan(measured_s_per_image)) {
                snprintf(why, sizeof why, "this run has no timed images to compare with %s", seat);
                reason = why;
            }
            if (reason) {
                json_object_set_new(withheld, seat, json_string(reason));
            } else {
                double med = kiln_median(vals, nv);
                json_object_set_new(ratios, seat,
                                    json_pack("{s:f,s:f,s:f,s:s,s:i,s:s}", "ratio", measured_s_per_image / med,
                                              "reference_median", med, "cap_w", cap_w, "graph_digest", graph_digest,
                                              "batch_size", batch_size, "source", "prompt bank"));
            }
            kiln_free(vals);
        }
    }
}

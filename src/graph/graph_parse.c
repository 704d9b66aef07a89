/* graph_parse.c - API-format graph parsing and validation with ComfyUI's error shapes (see graph.h).
 *
 * Order of checks: the shape of the whole prompt (an object of node objects with a known class_type) fails the
 * whole prompt (invalid_prompt); then each output node is validated depth-first through its links, each node
 * once; an error in a node marks every output that depends on it. A link back to a node still on the DFS stack
 * is a cycle. */
#include "graph/graph.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

kiln_graph_limits kiln_graph_limits_default(void) {
    return (kiln_graph_limits){.max_nodes = 256, .max_side = 2048, .max_pixels = 2048 * 2048, .max_batch = 16,
                               .max_steps = 200};
}

static json_t *err_obj(const char *type, const char *message, const char *details, json_t *extra) {
    return json_pack("{s:s, s:s, s:s, s:o}", "type", type, "message", message, "details", details ? details : "",
                     "extra_info", extra ? extra : json_object());
}

static json_t *prompt_error(const char *type, const char *message, const char *details, json_t *node_errors) {
    return json_pack("{s:o, s:o}", "error", err_obj(type, message, details, NULL), "node_errors",
                     node_errors ? node_errors : json_object());
}

void kiln_graph_free(kiln_graph *g) {
    if (!g) return;
    json_decref(g->root);
    json_decref(g->node_errors);
    kiln_free(g->nodes);
    kiln_free(g->outputs);
    kiln_free(g);
}

int kiln_graph_find(const kiln_graph *g, const char *id) {
    for (int i = 0; i < g->n_nodes; i++)
        if (!strcmp(g->nodes[i].id, id)) return i;
    return -1;
}

/* ---- per-node validation -------------------------------------------------------------------------------- */

typedef struct vstate {
    kiln_graph *g;
    const kiln_graph_limits *lim;
    const char *models_root;
    json_t *model_lists[KILN_MODELS_KIND_COUNT];
    signed char *color;  /* 0 unvisited, 1 on stack, 2 done */
    bool *bad;           /* node (or something it depends on) failed */
    json_t *node_errors; /* {id: {errors, dependent_outputs, class_type}} */
} vstate;

static void add_node_error(vstate *vs, int node, json_t *e) {
    const char *id = vs->g->nodes[node].id;
    json_t *ne = json_object_get(vs->node_errors, id);
    if (!ne) {
        ne = json_pack("{s:[], s:[], s:s}", "errors", "dependent_outputs", "class_type",
                       vs->g->nodes[node].cls ? vs->g->nodes[node].cls->name : "");
        json_object_set_new(vs->node_errors, id, ne);
    }
    json_array_append_new(json_object_get(ne, "errors"), e);
}

static void input_error(vstate *vs, int node, const char *type, const char *message, const char *details,
                        const char *input_name, json_t *extra_more) {
    json_t *extra = json_pack("{s:s}", "input_name", input_name);
    if (extra_more) {
        json_object_update(extra, extra_more);
        json_decref(extra_more);
    }
    add_node_error(vs, node, err_obj(type, message, details, extra));
}

/* The effective upper bound of a numeric input: the table's, tightened by the server limits. */
static double input_max(const vstate *vs, const kiln_node_class *c, const kiln_node_input *in) {
    double mx = in->max;
    if (!strcmp(in->name, "width") || !strcmp(in->name, "height")) {
        if (vs->lim->max_side > 0 && vs->lim->max_side < mx) mx = vs->lim->max_side;
    } else if (!strcmp(in->name, "batch_size")) {
        if (vs->lim->max_batch > 0 && vs->lim->max_batch < mx) mx = vs->lim->max_batch;
    } else if (!strcmp(in->name, "steps")) {
        if (vs->lim->max_steps > 0 && vs->lim->max_steps < mx) mx = vs->lim->max_steps;
    }
    (void)c;
    return mx;
}

static bool combo_contains(const char *const *opts, json_t *list, const char *s) {
    if (opts) {
        for (size_t i = 0; opts[i]; i++)
            if (!strcmp(opts[i], s)) return true;
        return false;
    }
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v) if (!strcmp(json_string_value(v), s)) return true;
    return false;
}

static json_t *combo_list_json(const char *const *opts, json_t *list) {
    if (!opts) return json_copy(list);
    json_t *a = json_array();
    for (size_t i = 0; opts[i]; i++) json_array_append_new(a, json_string(opts[i]));
    return a;
}

/* Checks one literal against its declared widget type and bounds. */
static void validate_literal(vstate *vs, int node, const kiln_node_class *c, const kiln_node_input *in,
                             json_t *v) {
    char details[600];
    const char *t = in->type;
    if (!strcmp(t, "INT") || !strcmp(t, "FLOAT")) {
        bool is_int = !strcmp(t, "INT");
        long double x;
        int64_t bits;
        double d;
        bool conv = is_int ? kiln_coerce_int(v, &bits, &x) : kiln_coerce_float(v, &d);
        if (!is_int) x = d;
        if (!conv) {
            char *txt = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
            snprintf(details, sizeof details, "%s, %.200s", in->name, txt ? txt : "?");
            free(txt);
            char msg[64];
            snprintf(msg, sizeof msg, "Failed to convert an input value to a %s value", t);
            input_error(vs, node, "invalid_input_type", msg, details, in->name, NULL);
            return;
        }
        double mx = input_max(vs, c, in);
        if (x < (long double)in->min) {
            char msg[128];
            snprintf(msg, sizeof msg, "Value %Lg smaller than min of %g", x, in->min);
            snprintf(details, sizeof details, "%s", in->name);
            input_error(vs, node, "value_smaller_than_min", msg, details, in->name,
                        json_pack("{s:f, s:f}", "received_value", (double)x, "min", in->min));
        } else if (x > (long double)mx) {
            char msg[128];
            snprintf(msg, sizeof msg, "Value %Lg bigger than max of %g", x, mx);
            snprintf(details, sizeof details, "%s", in->name);
            input_error(vs, node, "value_bigger_than_max", msg, details, in->name,
                        json_pack("{s:f, s:f}", "received_value", (double)x, "max", mx));
        }
        return;
    }
    if (!strcmp(t, "STRING")) {
        char *str = kiln_coerce_string(v);
        if (!str) {
            snprintf(details, sizeof details, "%s", in->name);
            input_error(vs, node, "invalid_input_type", "Failed to convert an input value to a STRING value",
                        details, in->name, NULL);
        }
        kiln_free(str);
        return;
    }
    if (!strcmp(t, "BOOLEAN")) {
        bool b;
        if (!kiln_coerce_bool(v, &b)) {
            snprintf(details, sizeof details, "%s", in->name);
            input_error(vs, node, "invalid_input_type", "Failed to convert an input value to a BOOLEAN value",
                        details, in->name, NULL);
        }
        return;
    }
    if (!strcmp(t, "COMBO") && in->model_kind == KILN_INPUT_IMAGES) { /* LoadImage: the file is read at run time */
        const char *s = json_string_value(v);
        if (!s || !kiln_model_name_ok(s)) {
            snprintf(details, sizeof details, "%s: a plain file name of the input folder", in->name);
            input_error(vs, node, "custom_validation_failed", "Invalid image file", details, in->name, NULL);
        }
        return;
    }
    if (!strcmp(t, "COMBO")) {
        /* only_ext: the kind's files ending in it (UnetLoaderGGUF: the .gguf files), a new array */
        json_t *list = in->options ? NULL : kiln_models_with_ext(vs->model_lists[in->model_kind], in->only_ext);
        const char *s = json_string_value(v);
        if (!s || !combo_contains(in->options, list, s)) {
            char *txt = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
            snprintf(details, sizeof details, "%s: %.300s not in list%s%s", in->name, txt ? txt : "?",
                     in->only_ext ? " of the model folder's *" : "", in->only_ext ? in->only_ext : "");
            free(txt);
            input_error(vs, node, "value_not_in_list", "Value not in list", details, in->name,
                        json_pack("{s:o, s:O}", "input_config", combo_list_json(in->options, list),
                                  "received_value", v));
        }
        json_decref(list);
        return;
    }
    /* a link type given a literal */
    snprintf(details, sizeof details, "%s: expected a link [node_id, output_index] to a %s output", in->name, t);
    input_error(vs, node, "invalid_input_type", "Input must be a link to another node's output", details,
                in->name, NULL);
}

/* Cross-input limits that no single input's bounds express. */
static void validate_node_limits(vstate *vs, int node) {
    const kiln_graph_node *n = &vs->g->nodes[node];
    if (strcmp(n->cls->name, "EmptyFlux2LatentImage") != 0 || vs->lim->max_pixels <= 0) return;
    json_t *w = json_object_get(n->inputs, "width"), *h = json_object_get(n->inputs, "height");
    int64_t wi, hi;
    long double wx, hx;
    if (!kiln_coerce_int(w, &wi, &wx) || !kiln_coerce_int(h, &hi, &hx) || wx > 1e6L || hx > 1e6L) return;
    int64_t px = wi * hi;
    if (px > vs->lim->max_pixels) {
        char msg[160];
        snprintf(msg, sizeof msg, "Image of %lld pixels is bigger than the server's limit of %lld pixels",
                 (long long)px, (long long)vs->lim->max_pixels);
        input_error(vs, node, "value_bigger_than_max", msg, "width*height", "width",
                    json_pack("{s:I, s:I}", "received_value", (json_int_t)px, "max", (json_int_t)vs->lim->max_pixels));
    }
}

static bool validate_node(vstate *vs, int node);

static bool validate_inputs(vstate *vs, int node) {
    kiln_graph_node *n = &vs->g->nodes[node];
    const kiln_node_class *c = n->cls;
    bool ok = true;
    char details[600];
    for (size_t i = 0; i < KILN_NODE_MAX_INPUTS && c->inputs[i].name; i++) {
        const kiln_node_input *in = &c->inputs[i];
        json_t *v = json_object_get(n->inputs, in->name);
        if (!v) {
            if (!in->optional) {
                input_error(vs, node, "required_input_missing", "Required input is missing", in->name, in->name,
                            NULL);
                ok = false;
            }
            continue;
        }
        if (!json_is_array(v)) {
            size_t before = json_array_size(json_object_get(json_object_get(vs->node_errors, n->id), "errors"));
            validate_literal(vs, node, c, in, v);
            if (json_array_size(json_object_get(json_object_get(vs->node_errors, n->id), "errors")) != before)
                ok = false;
            continue;
        }
        /* a link */
        json_t *src = json_array_get(v, 0), *idx = json_array_get(v, 1);
        if (json_array_size(v) != 2 || !json_is_string(src) || !json_is_integer(idx)) {
            snprintf(details, sizeof details, "%s", in->name);
            input_error(vs, node, "bad_linked_input", "Bad linked input, must be a length-2 list of [string, int]",
                        details, in->name, NULL);
            ok = false;
            continue;
        }
        int s = kiln_graph_find(vs->g, json_string_value(src));
        if (s < 0) {
            snprintf(details, sizeof details, "%s: node '%.100s' does not exist", in->name,
                     json_string_value(src));
            input_error(vs, node, "bad_linked_input", "Linked node does not exist", details, in->name, NULL);
            ok = false;
            continue;
        }
        json_int_t oi = json_integer_value(idx);
        const kiln_node_class *sc = vs->g->nodes[s].cls;
        if (oi < 0 || (size_t)oi >= kiln_node_class_n_outputs(sc)) {
            snprintf(details, sizeof details, "%s: node '%.100s' (%s) has no output %lld", in->name,
                     vs->g->nodes[s].id, sc->name, (long long)oi);
            input_error(vs, node, "bad_linked_input", "Linked output does not exist", details, in->name, NULL);
            ok = false;
            continue;
        }
        const char *got = sc->outputs[oi];
        const char *want = !strcmp(in->type, "COMBO") ? "COMBO" : in->type;
        if (strcmp(got, want) != 0) {
            snprintf(details, sizeof details, "%s, received_type(%s) mismatch input_type(%s)", in->name, got,
                     want);
            input_error(vs, node, "return_type_mismatch", "Return type mismatch between linked nodes", details,
                        in->name, json_pack("{s:s, s:s}", "received_type", got, "input_type", want));
            ok = false;
            continue;
        }
        n->link_node[i] = s;
        n->link_output[i] = (int)oi;
        if (vs->color[s] == 1) {
            snprintf(details, sizeof details, "%s: links back to node '%.100s', which depends on this node",
                     in->name, vs->g->nodes[s].id);
            input_error(vs, node, "dependency_cycle", "Dependency cycle detected", details, in->name, NULL);
            ok = false;
            continue;
        }
        if (!validate_node(vs, s)) ok = false;
    }
    if (ok) {
        size_t before = json_array_size(json_object_get(json_object_get(vs->node_errors, n->id), "errors"));
        validate_node_limits(vs, node);
        if (json_array_size(json_object_get(json_object_get(vs->node_errors, n->id), "errors")) != before)
            ok = false;
    }
    return ok;
}

/* DFS: true when the node and everything it depends on is valid. */
static bool validate_node(vstate *vs, int node) {
    if (vs->color[node] == 2) return !vs->bad[node];
    vs->color[node] = 1;
    bool ok = validate_inputs(vs, node);
    vs->color[node] = 2;
    vs->bad[node] = !ok;
    return ok;
}

/* Marks output `out` as dependent on every failing node reachable from it. */
static void mark_dependents(vstate *vs, int node, const char *out_id, signed char *seen) {
    if (seen[node]) return;
    seen[node] = 1;
    json_t *ne = json_object_get(vs->node_errors, vs->g->nodes[node].id);
    if (ne) json_array_append_new(json_object_get(ne, "dependent_outputs"), json_string(out_id));
    const kiln_graph_node *n = &vs->g->nodes[node];
    for (int i = 0; i < KILN_NODE_MAX_INPUTS; i++)
        if (n->link_node[i] >= 0) mark_dependents(vs, n->link_node[i], out_id, seen);
}

static int cmp_ids(const kiln_graph *g, int a, int b) {
    const char *x = g->nodes[a].id, *y = g->nodes[b].id;
    /* numeric ids in numeric order, like ComfyUI's usual ordering of "9" before "10" */
    char *ex, *ey;
    long nx = strtol(x, &ex, 10), ny = strtol(y, &ey, 10);
    if (!*ex && !*ey && *x && *y) return nx < ny ? -1 : nx > ny;
    return strcmp(x, y);
}

kiln_status kiln_graph_parse(json_t *prompt, const kiln_graph_limits *limits, const char *models_root,
                             kiln_graph **out, json_t **errors) {
    *out = NULL;
    json_t *dummy = NULL;
    if (!errors) errors = &dummy;
    *errors = NULL;
    kiln_graph_limits lim = limits ? *limits : kiln_graph_limits_default();
    kiln_graph_limits def = kiln_graph_limits_default();
    if (lim.max_nodes <= 0) lim.max_nodes = def.max_nodes;
    char details[256];

    if (!json_is_object(prompt)) {
        *errors = prompt_error("invalid_prompt", "Invalid prompt: the prompt must be a JSON object of nodes", "",
                               NULL);
        json_decref(dummy);
        return KILN_E_INVALID;
    }
    size_t n = json_object_size(prompt);
    if (n > (size_t)lim.max_nodes) {
        snprintf(details, sizeof details, "%zu nodes, limit %d", n, lim.max_nodes);
        *errors = prompt_error("invalid_prompt", "Invalid prompt: too many nodes", details, NULL);
        json_decref(dummy);
        return KILN_E_LIMIT;
    }
    kiln_graph *g = kiln_calloc(1, sizeof *g);
    if (!g || !(g->nodes = kiln_calloc(n ? n : 1, sizeof *g->nodes)) ||
        !(g->outputs = kiln_calloc(n ? n : 1, sizeof *g->outputs))) {
        kiln_graph_free(g);
        *errors = prompt_error("invalid_prompt", "Out of memory", "", NULL);
        json_decref(dummy);
        return KILN_E_NOMEM;
    }
    g->root = json_incref(prompt);
    const char *id;
    json_t *node;
    json_object_foreach(prompt, id, node) {
        kiln_graph_node *gn = &g->nodes[g->n_nodes];
        gn->id = id;
        for (int i = 0; i < KILN_NODE_MAX_INPUTS; i++) gn->link_node[i] = -1;
        json_t *ct = json_is_object(node) ? json_object_get(node, "class_type") : NULL;
        if (!json_is_string(ct)) {
            snprintf(details, sizeof details, "Node ID '#%.100s'", id);
            *errors = prompt_error("invalid_prompt",
                                   "Cannot execute because a node is missing the class_type property.", details,
                                   NULL);
            kiln_graph_free(g);
            json_decref(dummy);
            return KILN_E_INVALID;
        }
        gn->cls = kiln_node_class_find(json_string_value(ct));
        if (!gn->cls) {
            char msg[200];
            snprintf(msg, sizeof msg, "Cannot execute because node %.100s does not exist.", json_string_value(ct));
            snprintf(details, sizeof details, "Node ID '#%.100s'", id);
            *errors = prompt_error("invalid_prompt", msg, details, NULL);
            kiln_graph_free(g);
            json_decref(dummy);
            return KILN_E_INVALID;
        }
        json_t *inputs = json_object_get(node, "inputs");
        if (inputs && !json_is_object(inputs)) {
            snprintf(details, sizeof details, "Node ID '#%.100s': inputs must be an object", id);
            *errors = prompt_error("invalid_prompt", "Invalid prompt: node inputs are not an object", details,
                                   NULL);
            kiln_graph_free(g);
            json_decref(dummy);
            return KILN_E_INVALID;
        }
        gn->inputs = inputs; /* NULL when absent: every required input is then missing */
        g->n_nodes++;
    }

    /* candidate outputs, sorted by id so the run order is stable */
    int n_cand = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].cls->output_node) g->outputs[n_cand++] = i;
    if (n_cand == 0) {
        *errors = prompt_error("prompt_no_outputs", "Prompt has no outputs", "", NULL);
        kiln_graph_free(g);
        json_decref(dummy);
        return KILN_E_INVALID;
    }
    for (int i = 1; i < n_cand; i++) /* insertion sort: a handful of outputs */
        for (int j = i; j > 0 && cmp_ids(g, g->outputs[j - 1], g->outputs[j]) > 0; j--) {
            int t = g->outputs[j];
            g->outputs[j] = g->outputs[j - 1];
            g->outputs[j - 1] = t;
        }

    vstate vs = {.g = g, .lim = &lim, .models_root = models_root, .node_errors = json_object()};
    vs.color = kiln_calloc((size_t)g->n_nodes, 1);
    vs.bad = kiln_calloc((size_t)g->n_nodes, sizeof(bool));
    signed char *seen = kiln_calloc((size_t)g->n_nodes, 1);
    for (int k = 0; k < KILN_MODELS_KIND_COUNT; k++) vs.model_lists[k] = kiln_models_list(models_root, k);
    kiln_status st = KILN_OK;
    if (!vs.color || !vs.bad || !seen || !vs.node_errors) {
        st = KILN_E_NOMEM;
        *errors = prompt_error("invalid_prompt", "Out of memory", "", NULL);
        goto done;
    }
    int good = 0;
    for (int k = 0; k < n_cand; k++) {
        int o = g->outputs[k];
        if (validate_node(&vs, o)) {
            g->outputs[good++] = o;
        } else {
            memset(seen, 0, (size_t)g->n_nodes);
            mark_dependents(&vs, o, g->nodes[o].id, seen);
        }
    }
    g->n_outputs = good;
    if (good == 0) {
        /* ComfyUI's summary: one line per failing output */
        char summary[256] = "";
        size_t used = 0;
        const char *nid;
        json_t *ne;
        json_object_foreach(vs.node_errors, nid, ne) {
            json_t *e0 = json_array_get(json_object_get(ne, "errors"), 0);
            int w = snprintf(summary + used, sizeof summary - used, "%s%s: %s", used ? "; " : "", nid,
                             json_string_value(json_object_get(e0, "message")));
            if (w < 0 || (size_t)w >= sizeof summary - used) break;
            used += (size_t)w;
        }
        *errors = prompt_error("prompt_outputs_failed_validation", "Prompt outputs failed validation", summary,
                               json_incref(vs.node_errors));
        st = KILN_E_INVALID;
    }
done:
    for (int k = 0; k < KILN_MODELS_KIND_COUNT; k++) json_decref(vs.model_lists[k]);
    kiln_free(vs.color);
    kiln_free(vs.bad);
    kiln_free(seen);
    if (st != KILN_OK) {
        json_decref(vs.node_errors);
        kiln_graph_free(g);
        json_decref(dummy);
        return st;
    }
    g->node_errors = vs.node_errors;
    *out = g;
    json_decref(dummy);
    return KILN_OK;
}

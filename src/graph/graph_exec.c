/* graph_exec.c - the general executor: dependency order from the output nodes, each node run once with its
 * outputs cached for all consumers, literals converted by the table's declared types (see graph.h). */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "graph/exec.h"

/* Post-order DFS from the outputs: every node after the nodes it links to. Validation already refused cycles,
 * the state array guards anyway. */
static void order_visit(const kiln_graph *g, int n, signed char *state, int *order, int *count) {
    if (state[n]) return;
    state[n] = 1;
    for (int i = 0; i < KILN_NODE_MAX_INPUTS; i++)
        if (g->nodes[n].link_node[i] >= 0) order_visit(g, g->nodes[n].link_node[i], state, order, count);
    order[(*count)++] = n;
}

/* A literal (or the declared default when absent) as a value. */
static kiln_status literal_value(const kiln_node_input *in, json_t *v, kiln_value *out, kiln_err *err) {
    memset(out, 0, sizeof *out);
    const char *t = in->type;
    bool ok = true;
    if (!strcmp(t, "INT")) {
        out->kind = KILN_V_INT;
        long double x;
        if (!v) out->i = (int64_t)in->def;
        else ok = kiln_coerce_int(v, &out->i, &x);
    } else if (!strcmp(t, "FLOAT")) {
        out->kind = KILN_V_FLOAT;
        if (!v) out->f = in->def;
        else ok = kiln_coerce_float(v, &out->f);
    } else if (!strcmp(t, "BOOLEAN")) {
        out->kind = KILN_V_BOOL;
        bool b = in->def != 0;
        if (v) ok = kiln_coerce_bool(v, &b);
        out->i = b;
    } else if (!strcmp(t, "STRING") || !strcmp(t, "COMBO")) {
        out->kind = KILN_V_STRING;
        out->str = v ? kiln_coerce_string(v) : kiln_strdup(in->def_str ? in->def_str : "");
        if (!out->str) return KILN_FAIL(err, KILN_E_NOMEM, "input %s: out of memory or not a string", in->name);
    } else if (in->optional && !v) {
        return KILN_OK; /* an optional link left out: KILN_V_NONE */
    } else {
        return KILN_FAIL(err, KILN_E_INTERNAL, "input %s of type %s has no link", in->name, t);
    }
    if (!ok) return KILN_FAIL(err, KILN_E_INVALID, "input %s: not a %s value", in->name, t);
    return KILN_OK;
}

/* A widget input fed by a link (a Primitive node): validation could not see the value, so its bounds are
 * checked here, before the node runs. */
static kiln_status check_linked(const char *node, const kiln_node_input *in, const kiln_value *v, kiln_err *err) {
    long double x;
    if (!strcmp(in->type, "INT") && v->kind == KILN_V_INT) x = (long double)v->i;
    else if (!strcmp(in->type, "FLOAT") && (v->kind == KILN_V_FLOAT || v->kind == KILN_V_INT)) x = v->kind == KILN_V_INT ? (long double)v->i : v->f;
    else return KILN_OK;
    if (x < (long double)in->min || x > (long double)in->max)
        return KILN_FAIL(err, KILN_E_INVALID, "node %s input %s: linked value %Lg outside [%g, %g]", node, in->name, x,
                         in->min, in->max);
    return KILN_OK;
}

kiln_status kiln_graph_execute(const kiln_graph *g, const kiln_exec_env *env, const kiln_exec_hooks *hooks,
                               json_t **outputs, char *failed_node, kiln_err *err) {
    if (failed_node) failed_node[0] = 0;
    *outputs = json_object();
    int n = g->n_nodes;
    signed char *state = kiln_calloc((size_t)n + 1, 1);
    int *order = kiln_calloc((size_t)n + 1, sizeof(int));
    kiln_value *vals = kiln_calloc(((size_t)n + 1) * KILN_NODE_MAX_OUTPUTS, sizeof(kiln_value));
    if (!state || !order || !vals || !*outputs) {
        kiln_free(state);
        kiln_free(order);
        kiln_free(vals);
        return KILN_FAIL(err, KILN_E_NOMEM, "executor: out of memory");
    }
    int count = 0;
    for (int k = 0; k < g->n_outputs; k++) order_visit(g, g->outputs[k], state, order, &count);

    kiln_exec ex = {.g = g, .env = env, .hooks = hooks, .outputs = *outputs, .err = err};
    kiln_status s = KILN_OK;
    for (int k = 0; k < count && s == KILN_OK; k++) {
        const kiln_graph_node *node = &g->nodes[order[k]];
        if (hooks && hooks->should_stop && hooks->should_stop(hooks->ctx)) {
            s = KILN_FAIL(err, KILN_E_CANCELLED, "interrupted");
            break;
        }
        if (hooks && hooks->executing) hooks->executing(hooks->ctx, node->id);
        kiln_value literals[KILN_NODE_MAX_INPUTS];
        kiln_value *in[KILN_NODE_MAX_INPUTS] = {0};
        memset(literals, 0, sizeof literals);
        size_t ni = kiln_node_class_n_inputs(node->cls);
        for (size_t i = 0; i < ni && s == KILN_OK; i++) {
            if (node->link_node[i] >= 0) {
                in[i] = &vals[(size_t)node->link_node[i] * KILN_NODE_MAX_OUTPUTS + (size_t)node->link_output[i]];
                s = check_linked(node->id, &node->cls->inputs[i], in[i], err);
            } else {
                s = literal_value(&node->cls->inputs[i], json_object_get(node->inputs, node->cls->inputs[i].name),
                                  &literals[i], err);
                in[i] = &literals[i];
            }
        }
        if (s == KILN_OK) s = (kiln_status)node->cls->eval(&ex, node->id, in, &vals[(size_t)order[k] * KILN_NODE_MAX_OUTPUTS]);
        for (size_t i = 0; i < ni; i++) kiln_value_clear(&literals[i]);
        if (s != KILN_OK && failed_node) snprintf(failed_node, 64, "%s", node->id);
    }
    for (size_t i = 0; i < ((size_t)n + 1) * KILN_NODE_MAX_OUTPUTS; i++) kiln_value_clear(&vals[i]);
    kiln_free(vals);
    kiln_free(state);
    kiln_free(order);
    return s;
}

/* ---- /object_info ------------------------------------------------------------------------------------------ */

static json_t *input_spec(const kiln_node_input *in, const char *models_root, const char *input_dir) {
    json_t *opts = json_object();
    if (in->tooltip) json_object_set_new(opts, "tooltip", json_string(in->tooltip));
    if (!strcmp(in->type, "COMBO")) {
        json_t *list;
        if (in->options) {
            list = json_array();
            for (size_t i = 0; in->options[i]; i++) json_array_append_new(list, json_string(in->options[i]));
        } else if (in->model_kind == KILN_INPUT_IMAGES) {
            list = kiln_input_images_list(input_dir);
            json_object_set_new(opts, "image_upload", json_true()); /* the frontend's upload widget */
        } else {
            json_t *all = kiln_models_list(models_root, (kiln_model_kind)in->model_kind);
            list = kiln_models_with_ext(all, in->only_ext);
            json_decref(all);
        }
        if (in->def_str) json_object_set_new(opts, "default", json_string(in->def_str));
        return json_pack("[o, o]", list, opts);
    }
    if (!strcmp(in->type, "INT")) {
        json_object_set_new(opts, "default", json_integer((json_int_t)in->def));
        json_object_set_new(opts, "min", json_integer((json_int_t)in->min));
        /* 2^64-1 (seeds) does not fit a JSON int64: written as a number all the same */
        json_object_set_new(opts, "max", in->max > 9.2e18 ? json_real(in->max) : json_integer((json_int_t)in->max));
        json_object_set_new(opts, "step", json_integer((json_int_t)in->step));
    } else if (!strcmp(in->type, "FLOAT")) {
        json_object_set_new(opts, "default", json_real(in->def));
        json_object_set_new(opts, "min", json_real(in->min));
        json_object_set_new(opts, "max", json_real(in->max));
        json_object_set_new(opts, "step", json_real(in->step));
    } else if (!strcmp(in->type, "STRING")) {
        json_object_set_new(opts, "default", json_string(in->def_str ? in->def_str : ""));
        if (in->multiline) json_object_set_new(opts, "multiline", json_true());
    } else if (!strcmp(in->type, "BOOLEAN")) {
        json_object_set_new(opts, "default", json_boolean(in->def != 0));
    }
    return json_pack("[s, o]", in->type, opts);
}

static json_t *class_info(const kiln_node_class *c, const char *models_root, const char *input_dir) {
    json_t *required = json_object(), *optional = json_object(), *order_req = json_array(),
           *order_opt = json_array();
    for (size_t i = 0; i < KILN_NODE_MAX_INPUTS && c->inputs[i].name; i++) {
        const kiln_node_input *in = &c->inputs[i];
        json_object_set_new(in->optional ? optional : required, in->name, input_spec(in, models_root, input_dir));
        json_array_append_new(in->optional ? order_opt : order_req, json_string(in->name));
    }
    json_t *outs = json_array(), *names = json_array(), *is_list = json_array();
    for (size_t i = 0; i < kiln_node_class_n_outputs(c); i++) {
        json_array_append_new(outs, json_string(c->outputs[i]));
        json_array_append_new(names, json_string(c->output_names[i] ? c->output_names[i] : c->outputs[i]));
        json_array_append_new(is_list, json_false());
    }
    return json_pack("{s:{s:o, s:o, s:{}}, s:{s:o, s:o}, s:o, s:o, s:o, s:s, s:s, s:s, s:s, s:s, s:b}", "input",
                     "required", required, "optional", optional, "hidden", "input_order", "required", order_req,
                     "optional", order_opt, "output", outs, "output_is_list", is_list, "output_name", names,
                     "name", c->name, "display_name", c->display_name, "description", c->description,
                     "python_module", "kiln", "category", c->category, "output_node", c->output_node);
}

json_t *kiln_graph_object_info(const char *models_root, const char *input_dir, const char *class_name) {
    if (class_name) {
        const kiln_node_class *c = kiln_node_class_find(class_name);
        return c ? json_pack("{s:o}", c->name, class_info(c, models_root, input_dir)) : NULL;
    }
    json_t *all = json_object();
    for (size_t i = 0; i < kiln_node_class_count(); i++) {
        const kiln_node_class *c = kiln_node_class_at(i);
        json_object_set_new(all, c->name, class_info(c, models_root, input_dir));
    }
    return all;
}

/* node_table.h - the node classes kiln runs, declared in one table (inputs with types, bounds, defaults;
 * outputs; whether the node is an output). Validation, /object_info and the executor all read this table, so
 * what the server advertises is what it checks and what it runs.
 *
 * Input types are ComfyUI's: widget types INT, FLOAT, STRING, BOOLEAN, COMBO (a fixed list or the files of a
 * model folder) take literals; every other type (MODEL, CLIP, VAE, CONDITIONING, LATENT, NOISE, SAMPLER,
 * SIGMAS, GUIDER, IMAGE) must be a link [node_id, output_index] to an output of that type.
 */
#ifndef KILN_GRAPH_NODE_TABLE_H
#define KILN_GRAPH_NODE_TABLE_H

#include <stdbool.h>
#include <stddef.h>

#include "graph/model_dirs.h"

#define KILN_NODE_MAX_INPUTS 12
#define KILN_NODE_MAX_OUTPUTS 3

typedef struct kiln_node_input {
    const char *name;
    const char *type;        /* "INT", "FLOAT", "STRING", "BOOLEAN", "COMBO", or a link type ("MODEL", ...) */
    bool optional;
    double min, max, step;   /* INT, FLOAT */
    double def;              /* INT, FLOAT, BOOLEAN default */
    const char *def_str;     /* STRING / COMBO default */
    bool multiline;          /* STRING */
    const char *const *options; /* COMBO: NULL-terminated fixed list ... */
    int model_kind;          /* ... or, when options is NULL, the files of this kiln_model_kind (KILN_INPUT_IMAGES:
                              * the input folder's images) */
    const char *only_ext;    /* model COMBO: only the files whose name ends in this (".gguf", ComfyUI-GGUF's
                              * unet_gguf list); NULL: every model file of the kind */
    const char *tooltip;
} kiln_node_input;

struct kiln_exec;
struct kiln_value;
/* Evaluates one node: in[i] is the value of input i of the class (a literal converted to a value or the linked
 * output); fills out[0..n_outputs). Returns a status with a message in err. */
typedef int (*kiln_node_eval_fn)(struct kiln_exec *ex, const char *node_id, struct kiln_value *const *in,
                                 struct kiln_value *out);

typedef struct kiln_node_class {
    const char *name, *display_name, *category, *description;
    kiln_node_input inputs[KILN_NODE_MAX_INPUTS]; /* ends at the first entry with name NULL */
    const char *outputs[KILN_NODE_MAX_OUTPUTS];   /* types; ends at NULL */
    const char *output_names[KILN_NODE_MAX_OUTPUTS];
    bool output_node;
    kiln_node_eval_fn eval;
} kiln_node_class;

/* The class named name, or NULL. */
const kiln_node_class *kiln_node_class_find(const char *name);
/* Iteration: i in [0, kiln_node_class_count()). */
size_t kiln_node_class_count(void);
const kiln_node_class *kiln_node_class_at(size_t i);
size_t kiln_node_class_n_inputs(const kiln_node_class *c);
size_t kiln_node_class_n_outputs(const kiln_node_class *c);
/* Index of input `name`, or -1. */
int kiln_node_class_input_index(const kiln_node_class *c, const char *name);
/* true for the widget types that take literals. */
bool kiln_node_type_is_widget(const char *type);

#define KILN_NO_MODEL_KIND (-1)

#endif

/* graph.h - ComfyUI API-format graphs: parse, validate (with ComfyUI's error shapes), execute.
 *
 *     json_t *errors = NULL;               // the 400 body ComfyUI would send, when not OK
 *     kiln_graph *g;
 *     if (kiln_graph_parse(prompt_json, &limits, models_root, &g, &errors) != KILN_OK) { reply 400 errors }
 *     // g->outputs: the output node ids that will run; g->node_errors: errors of outputs that will not
 *     kiln_graph_execute(g, &env, &hooks, &outputs, &err);   // on the worker thread
 *     kiln_graph_free(g);
 *
 * A graph is a JSON object node_id -> {class_type, inputs:{name: literal | [node_id, output_index]}, _meta?}.
 * Parsing validates everything that can be known before running (node classes, links and their types, literal
 * types and bounds, model names, cycles, the server's size limits); only nodes that an output node (SaveImage)
 * depends on are validated and run. Outputs whose nodes fail validation are dropped and reported in
 * node_errors; when no output survives, parsing fails with the body
 *     {"error": {"type", "message", "details", "extra_info"}, "node_errors": {...}}
 * where error.type is invalid_prompt (bad shape, unknown class), prompt_no_outputs or
 * prompt_outputs_failed_validation, and each node error is {type, message, details, extra_info} with type
 * required_input_missing, bad_linked_input, return_type_mismatch, invalid_input_type, value_smaller_than_min,
 * value_bigger_than_max, value_not_in_list or dependency_cycle.
 *
 * Ownership: the graph keeps a reference to the JSON it was parsed from; kiln_graph_free releases it.
 */
#ifndef KILN_GRAPH_GRAPH_H
#define KILN_GRAPH_GRAPH_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "graph/engine.h"
#include "graph/node_table.h"

/* Limits applied at validation on top of the node table's own bounds. 0 = the table's bound. */
typedef struct kiln_graph_limits {
    int max_nodes;       /* default 256 */
    int max_side;        /* width/height, default 2048 */
    int64_t max_pixels;  /* width*height of one image, default 2048*2048 */
    int max_batch;       /* default 16 */
    int max_steps;       /* default 200 */
} kiln_graph_limits;

kiln_graph_limits kiln_graph_limits_default(void);

typedef struct kiln_graph_node {
    const char *id;                   /* borrowed from the JSON */
    const kiln_node_class *cls;
    json_t *inputs;                   /* borrowed: the node's inputs object */
    int link_node[KILN_NODE_MAX_INPUTS]; /* per class input: index of the linked node, or -1 (literal/absent) */
    int link_output[KILN_NODE_MAX_INPUTS];
} kiln_graph_node;

typedef struct kiln_graph {
    json_t *root;
    int n_nodes;
    kiln_graph_node *nodes;
    int n_outputs;
    int *outputs;       /* indices of the output nodes that passed validation, sorted by id */
    json_t *node_errors; /* {} when every output is good */
} kiln_graph;

/* Parses and validates. On failure *errors (when errors is not NULL) gets the 400 body; the caller decrefs.
 * models_root: the models folder (NULL: every model name is "not in list"). */
kiln_status kiln_graph_parse(json_t *prompt, const kiln_graph_limits *limits, const char *models_root,
                             kiln_graph **out, json_t **errors);
void kiln_graph_free(kiln_graph *g);

/* Index of node id, or -1. */
int kiln_graph_find(const kiln_graph *g, const char *id);

/* ---- execution ------------------------------------------------------------------------------------------- */

typedef struct kiln_exec_hooks {
    void *ctx;
    void (*executing)(void *ctx, const char *node_id);           /* before each node runs */
    void (*progress)(void *ctx, const char *node_id, int value, int max);
    void (*executed)(void *ctx, const char *node_id, json_t *ui); /* ui: {"images":[...]} (borrowed) */
    bool (*should_stop)(void *ctx);                               /* polled between nodes and steps */
    void (*warning)(void *ctx, const char *node_id, const char *text); /* optional: the engine's warnings */
    /* SaveImageWebsocket: one encoded image (PNG) for the prompt's client, sent while node_id is executing */
    void (*image_frame)(void *ctx, const char *node_id, const uint8_t *png, size_t len);
    /* Optional live preview: after each denoising step, image 0's latent tokens [h16*w16, 128] (engine.h);
     * NULL: the engine downloads no latent. */
    void (*latent_preview)(void *ctx, const char *node_id, const float *latent, int h16, int w16);
} kiln_exec_hooks;

typedef struct kiln_exec_env {
    const char *models_root;
    const char *output_dir;  /* SaveImage writes under it */
    const char *temp_dir;    /* PreviewImage writes under it (type "temp"); NULL = no previews saved */
    const char *input_dir;   /* LoadImage reads from it (what POST /upload/image writes); NULL = none */
    kiln_gen_engine *engine;
    const char *prompt_id;
    /* The graph is the OpenAI route's (server/openai_graph.c): its engine calls keep kiln generate's rules (the
     * noise of seed + i, diffusers' text encoding) instead of ComfyUI's. */
    bool openai_rules;
    json_t *extra_pnginfo;   /* borrowed, may be NULL: written as PNG text chunks beside the prompt */
    /* filled by the run when not NULL: engine time summed over calls, peak memory the engine reported */
    double *engine_ms;
    size_t *peak_memory_bytes;
} kiln_exec_env;

/* Runs the validated outputs in dependency order; each node runs at most once (its outputs are cached for
 * every consumer). *outputs receives {node_id: {"images":[{filename, subfolder, type}]}} for the output nodes
 * that ran (also on failure: what was saved before the error). failed_node (cap 64) receives the id of the
 * node that failed, "" otherwise. KILN_E_CANCELLED when should_stop asked to stop. */
kiln_status kiln_graph_execute(const kiln_graph *g, const kiln_exec_env *env, const kiln_exec_hooks *hooks,
                               json_t **outputs, char *failed_node, kiln_err *err);

/* ---- literal coercion (coerce.c): ComfyUI's int()/float()/str()/bool() of a widget value ---------------- */

/* INT: *bits the value (beyond INT64_MAX: its uint64 bits), *value the same as a long double for range checks. */
bool kiln_coerce_int(json_t *v, int64_t *bits, long double *value);
bool kiln_coerce_float(json_t *v, double *out);
char *kiln_coerce_string(json_t *v); /* kiln_malloc'd; NULL when v has no string form */
bool kiln_coerce_bool(json_t *v, bool *out);
/* A copy of a JSON text whose integer literals beyond int64 are quoted (jansson cannot hold them; the INT
 * coercion reads them back); NULL when there is none (or out of memory: then parse the original). */
char *kiln_graph_quote_big_ints(const char *body, size_t len, size_t *out_len);

/* ---- /object_info ------------------------------------------------------------------------------------------ */

/* {class: info} for every class (class NULL) or just one (NULL if unknown). COMBO lists of model files are read
 * from models_root, LoadImage's from input_dir (either may be NULL: empty lists). */
json_t *kiln_graph_object_info(const char *models_root, const char *input_dir, const char *class_name);

#endif

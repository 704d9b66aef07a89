/* workflow.c - benchmark graphs: load, digest, knobs, instantiate (see workflow.h). */
#include "bench/workflow.h"

#include <string.h>

#include "bench/digest.h"

/* The first node of a class (lowest id in document order is fine: benchmark graphs have one of each). */
static json_t *node_of(const json_t *g, const char *cls) {
    const char *id;
    json_t *n;
    json_object_foreach((json_t *)g, id, n) {
        const char *c = json_string_value(json_object_get(n, "class_type"));
        if (c && !strcmp(c, cls)) return n;
    }
    return NULL;
}

static json_t *input_of(const json_t *g, const char *cls, const char *input) {
    return json_object_get(json_object_get(node_of(g, cls), "inputs"), input);
}

/* knobs[key] = the first literal found among (class, input) pairs; error when none. */
static kiln_status knob(json_t *knobs, const json_t *g, const char *key, const char *const *pairs, json_type want,
                        const char *name, kiln_err *err) {
    for (const char *const *p = pairs; p[0]; p += 2) {
        json_t *v = input_of(g, p[0], p[1]);
        if (!v) continue;
        bool ok = want == JSON_REAL ? json_is_number(v) : json_typeof(v) == want;
        if (!ok)
            return KILN_FAIL(err, KILN_E_FORMAT, "%s: %s.%s is not a literal %s (links are not benchmark knobs)", name,
                             p[0], p[1], want == JSON_STRING ? "string" : "number");
        json_object_set_new(knobs, key, want == JSON_REAL ? json_real(json_number_value(v)) : json_deep_copy(v));
        return KILN_OK;
    }
    return KILN_FAIL(err, KILN_E_FORMAT, "%s: the graph sets no %s (looked at %s.%s...)", name, key, pairs[0], pairs[1]);
}

kiln_status kiln_workflow_from_json(json_t *graph, const char *name, kiln_workflow *w, kiln_err *err) {
    memset(w, 0, sizeof *w);
    snprintf(w->name, sizeof w->name, "%s", name);
    if (!json_is_object(graph) || json_object_size(graph) == 0)
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: a graph is a non-empty object of nodes", name);
    const char *id;
    json_t *n;
    bool save = false;
    json_object_foreach(graph, id, n) {
        if (!json_is_object(n) || !json_is_string(json_object_get(n, "class_type")) ||
            !json_is_object(json_object_get(n, "inputs")))
            return KILN_FAIL(err, KILN_E_FORMAT, "%s: node \"%s\" needs a class_type string and an inputs object",
                             name, id);
        save = save || !strcmp(json_string_value(json_object_get(n, "class_type")), "SaveImage");
    }
    if (!save) return KILN_FAIL(err, KILN_E_FORMAT, "%s: no SaveImage node (nothing would be output)", name);
    KILN_TRY(kiln_graph_digest(graph, w->graph_digest, err));
    json_t *k = json_object();
    if (!k) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory");
    static const char *const steps[] = {"Flux2Scheduler", "steps", "KSampler", "steps", "BasicScheduler", "steps", 0, 0};
    /* FLUX.1 graphs: FluxGuidance is the guidance (their KSampler cfg is 1), EmptySD3LatentImage the size, the
     * DualCLIPLoader's first file the clip knob */
    static const char *const cfg[] = {"CFGGuider", "cfg", "FluxGuidance", "guidance", "KSampler", "cfg", 0, 0};
    static const char *const sampler[] = {"KSamplerSelect", "sampler_name", "KSampler", "sampler_name", 0, 0};
    static const char *const width[] = {"EmptyFlux2LatentImage", "width", "EmptySD3LatentImage", "width",
                                        "EmptyLatentImage", "width", 0, 0};
    static const char *const height[] = {"EmptyFlux2LatentImage", "height", "EmptySD3LatentImage", "height",
                                         "EmptyLatentImage", "height", 0, 0};
    static const char *const batch[] = {"EmptyFlux2LatentImage", "batch_size", "EmptySD3LatentImage", "batch_size",
                                        "EmptyLatentImage", "batch_size", 0, 0};
    static const char *const unet[] = {"UNETLoader", "unet_name", 0, 0};
    static const char *const clip[] = {"CLIPLoader", "clip_name", "DualCLIPLoader", "clip_name1", 0, 0};
    static const char *const vae[] = {"VAELoader", "vae_name", 0, 0};
    kiln_status st = KILN_OK;
    if (st == KILN_OK) st = knob(k, graph, "steps", steps, JSON_INTEGER, name, err);
    if (st == KILN_OK) st = knob(k, graph, "cfg", cfg, JSON_REAL, name, err);
    if (st == KILN_OK) st = knob(k, graph, "sampler", sampler, JSON_STRING, name, err);
    if (st == KILN_OK) st = knob(k, graph, "width", width, JSON_INTEGER, name, err);
    if (st == KILN_OK) st = knob(k, graph, "height", height, JSON_INTEGER, name, err);
    if (st == KILN_OK) st = knob(k, graph, "batch_size", batch, JSON_INTEGER, name, err);
    if (st == KILN_OK) st = knob(k, graph, "unet", unet, JSON_STRING, name, err);
    if (st == KILN_OK) st = knob(k, graph, "clip", clip, JSON_STRING, name, err);
    if (st == KILN_OK) st = knob(k, graph, "vae", vae, JSON_STRING, name, err);
    json_t *px = input_of(graph, "ImagePixelize", "factor");
    if (st == KILN_OK && px) {
        if (!json_is_integer(px)) st = KILN_FAIL(err, KILN_E_FORMAT, "%s: ImagePixelize.factor is not an integer", name);
        else json_object_set_new(k, "pixelize", json_integer(json_integer_value(px)));
    }
    json_int_t b = json_integer_value(json_object_get(k, "batch_size"));
    if (st == KILN_OK && (b < 1 || b > 4096)) st = KILN_FAIL(err, KILN_E_FORMAT, "%s: batch_size %lld", name, (long long)b);
    if (st != KILN_OK) {
        json_decref(k);
        return st;
    }
    w->knobs = k;
    w->batch_size = (int)b;
    w->graph = json_incref(graph);
    return KILN_OK;
}

kiln_status kiln_workflow_load(const char *path, kiln_workflow *w, kiln_err *err) {
    memset(w, 0, sizeof *w);
    char fd[65];
    KILN_TRY(kiln_sha256_file(path, fd, err));
    json_error_t je;
    json_t *g = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!g) return KILN_FAIL(err, KILN_E_FORMAT, "%s:%d: %s", path, je.line, je.text);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char name[128];
    snprintf(name, sizeof name, "%s", base);
    char *dot = strrchr(name, '.');
    if (dot && !strcmp(dot, ".json")) *dot = 0;
    kiln_status st = kiln_workflow_from_json(g, name, w, err);
    json_decref(g);
    if (st != KILN_OK) return st;
    memcpy(w->file_digest, fd, sizeof fd);
    snprintf(w->path, sizeof w->path, "%s", path);
    return KILN_OK;
}

void kiln_workflow_free(kiln_workflow *w) {
    json_decref(w->graph);
    json_decref(w->knobs);
    memset(w, 0, sizeof *w);
}

json_t *kiln_workflow_instantiate(const kiln_workflow *w, const char *prompt, long long seed, const char *prefix) {
    json_t *g = json_deep_copy(w->graph);
    if (!g) return NULL;
    const char *id;
    json_t *n;
    json_object_foreach(g, id, n) {
        const char *c = json_string_value(json_object_get(n, "class_type"));
        json_t *in = json_object_get(n, "inputs");
        if (!strcmp(c, "CLIPTextEncode") && json_is_string(json_object_get(in, "text")))
            json_object_set_new(in, "text", json_string(prompt));
        else if (!strcmp(c, "CLIPTextEncodeFlux")) { /* FLUX.1: the same text to CLIP-L and T5 */
            json_object_set_new(in, "clip_l", json_string(prompt));
            json_object_set_new(in, "t5xxl", json_string(prompt));
        } else if (!strcmp(c, "RandomNoise")) json_object_set_new(in, "noise_seed", json_integer(seed));
        else if (!strcmp(c, "KSampler")) json_object_set_new(in, "seed", json_integer(seed));
        else if (!strcmp(c, "SaveImage")) json_object_set_new(in, "filename_prefix", json_string(prefix));
    }
    return g;
}

void kiln_workflow_set_knobs(json_t *graph, int width, int height, long long steps) {
    const char *id;
    json_t *n;
    json_object_foreach(graph, id, n) {
        json_t *in = json_object_get(n, "inputs");
        if (steps > 0 && json_is_integer(json_object_get(in, "steps")))
            json_object_set_new(in, "steps", json_integer(steps));
        if (width > 0 && json_is_integer(json_object_get(in, "width")) && json_is_integer(json_object_get(in, "height"))) {
            json_object_set_new(in, "width", json_integer(width));
            json_object_set_new(in, "height", json_integer(height));
        }
    }
}

/* A copy of w's graph with every steps input set to steps. */
static json_t *with_steps(const json_t *graph, json_int_t steps) {
    json_t *g = json_deep_copy(graph);
    if (g) kiln_workflow_set_knobs(g, 0, 0, steps);
    return g;
}

void kiln_workflow_receipts(const kiln_workflow *a, const kiln_workflow *const *others, size_t n, json_t *receipt) {
    json_int_t sa = json_integer_value(json_object_get(a->knobs, "steps"));
    for (size_t i = 0; i < n; i++) {
        const kiln_workflow *b = others[i];
        json_int_t sb = json_integer_value(json_object_get(b->knobs, "steps"));
        if (b == a || sb == sa) continue;
        json_t *g = with_steps(a->graph, sb);
        char hex[65];
        if (g && kiln_graph_digest(g, hex, NULL) == KILN_OK && !strcmp(hex, b->graph_digest)) {
            char key[64];
            snprintf(key, sizeof key, "graph-at-%lld-steps", (long long)sb);
            json_object_set_new(receipt, key, json_string(b->graph_digest));
        }
        json_decref(g);
    }
}

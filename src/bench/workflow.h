/* workflow.h - a benchmark graph (ComfyUI API format) as the harness sees it: its identity (file and graph
 * digests), its knobs (steps, cfg, sampler, size, batch, model files, pixelize factor) and a copy of it with one
 * cell's prompt, a seed and an output prefix filled in. kiln_bench does not execute graphs (src/graph does);
 * it only reads and patches them, for any ComfyUI-API server.
 *
 * Recognised wiring: the FLUX.2 [klein] template (UNETLoader, CLIPLoader, VAELoader, CLIPTextEncode,
 * EmptyFlux2LatentImage, RandomNoise, KSamplerSelect, Flux2Scheduler, CFGGuider, SamplerCustomAdvanced,
 * VAEDecode, SaveImage, optional ImagePixelize) and the plain KSampler wiring (seed/steps/cfg/sampler_name on
 * the KSampler node, EmptyLatentImage or EmptyFlux2LatentImage).
 */
#ifndef KILN_BENCH_WORKFLOW_H
#define KILN_BENCH_WORKFLOW_H

#include <jansson.h>

#include "base/status.h"

typedef struct kiln_workflow {
    char name[128];          /* file name without directory and .json */
    char path[1024];
    char graph_digest[65], file_digest[65];
    json_t *graph;           /* owned */
    json_t *knobs;           /* owned: the report's knobs object */
    int batch_size;
} kiln_workflow;

/* Loads and validates a graph file (an object of nodes, each with a class_type and an inputs object; the
 * knobs present). KILN_E_FORMAT with the node named on a bad graph. */
kiln_status kiln_workflow_load(const char *path, kiln_workflow *w, kiln_err *err);
kiln_status kiln_workflow_from_json(json_t *graph, const char *name, kiln_workflow *w, kiln_err *err);
void kiln_workflow_free(kiln_workflow *w);

/* A deep copy of the graph with the prompt in every CLIPTextEncode text that is a literal, the seed in
 * RandomNoise.noise_seed / KSampler.seed, and filename_prefix on every SaveImage. NULL when out of memory. */
json_t *kiln_workflow_instantiate(const kiln_workflow *w, const char *prompt, long long seed, const char *prefix);

/* Sets, in place, every integer "steps" input to steps (when steps > 0) and every integer width/height pair
 * (EmptyFlux2LatentImage, EmptyLatentImage, Flux2Scheduler, ...) to width x height (when width > 0). */
void kiln_workflow_set_knobs(json_t *graph, int width, int height, long long steps);

/* Receipts (seed 000): when graph b is graph a with only its step count changed, a's receipt names b:
 * "graph-at-<b's steps>-steps" -> b's graph digest (so a 32-step graph points at the 8-step graph it was derived
 * from, and back). Compares canonical digests, so formatting never matters. Adds to receipt (an object). */
void kiln_workflow_receipts(const kiln_workflow *a, const kiln_workflow *const *others, size_t n, json_t *receipt);

#endif

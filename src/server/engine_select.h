/* engine_select.h - the image engine the server runs jobs on: kiln's own (include/kiln.h) behind the graph
 * executor's seam (graph/engine.h). It opens the three model files a job names, keeps them open for the next
 * job with the same files, and reopens when a job names others. */
#ifndef KILN_SERVER_ENGINE_SELECT_H
#define KILN_SERVER_ENGINE_SELECT_H

#include <stddef.h>

#include "graph/engine.h"

/* A new engine adapter (nothing is loaded until the first job). device: "cpu" (default when NULL), "cuda" or
 * "cuda:N". NULL when out of memory or the device name is not one of those. */
kiln_gen_engine *kiln_server_engine_new(const char *device);
void kiln_server_engine_free(kiln_gen_engine *e); /* NULL allowed */
/* Tensor-parallel degree of the engines it opens (kiln_engine_config.tp; 0 or 1: none), before the first job. */
void kiln_server_engine_set_tp(kiln_gen_engine *e, int tp);
/* f32 matmuls (kiln_engine_config.exact) in the engines it opens, before the first job. */
void kiln_server_engine_set_exact(kiln_gen_engine *e, bool exact);
/* Bytes a request may use in the engines it opens (kiln_engine_config.memory_limit; 0: the memory available),
 * before the first job. */
void kiln_server_engine_set_memory_limit(kiln_gen_engine *e, size_t bytes);

#endif

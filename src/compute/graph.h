/* graph.h - what the pipeline and the models may ask of a backend beyond the ops table: running a piece of work
 * as a replayable graph, and the shape key that names it. Backend-neutral (a model never includes a backend
 * header); on the CPU the body is simply called, on CUDA it is captured and replayed (cuda_backend.c).
 *
 *     static kiln_status step(kiln_backend *be, void *ctx, kiln_err *err) { ... ops on be ... }
 *     uint64_t key = kiln_graph_key(kiln_graph_key(0, n_img_tokens), n_txt_tokens);
 *     KILN_TRY(kiln_backend_graph_run(be, key, step, &state, err));
 *
 * On CUDA the first run of a key is eager (it warms the GEMM algorithm cache and grows scratch buffers), the
 * second is captured into a CUDA graph and launched, later runs replay the graph. The body must therefore be
 * replayable: the same kernels on the same device addresses every time - it must allocate only from the arena
 * (no growth), never upload/download/sync (that fails the capture, and the body then runs eagerly for good),
 * and read per-step values (e.g. the timestep) from device memory that the caller updates with an upload
 * BEFORE calling this, not from host scalars baked into the launch. KILN_CUDA_GRAPHS=0 turns capture off.
 */
#ifndef KILN_COMPUTE_GRAPH_H
#define KILN_COMPUTE_GRAPH_H

#include <stdint.h>

#include "base/status.h"
#include "compute/ops.h"

typedef kiln_status (*kiln_graph_body)(kiln_backend *be, void *ctx, kiln_err *err);

/* Runs body(be, ctx, err) - eagerly, captured, or as a replayed graph (see above). Returns body's status. */
kiln_status kiln_backend_graph_run(kiln_backend *be, uint64_t key, kiln_graph_body body, void *ctx, kiln_err *err);

/* Mixes values into a shape key (FNV-1a over their bytes): key = kiln_graph_key(0, n_img); key = ...(key, n_txt).
 * Everything a captured run bakes in belongs in it: shapes, scalars, and every buffer address the body touches. */
uint64_t kiln_graph_key(uint64_t key, int64_t value);

#endif

/* backend.c - backend-independent entry points: closing any backend, graph keys (graph.h), and the CUDA opener's stand-in when kiln
 * was built without CUDA (the real one lives in src/compute/cuda/). */
#include "compute/graph.h"
#include "compute/ops.h"

void kiln_backend_close(kiln_backend *be) {
    if (be && be->ops && be->ops->close) be->ops->close(be);
}

uint64_t kiln_graph_key(uint64_t key, int64_t value) {
    uint64_t h = key ? key : 1469598103934665603ull;
    for (int i = 0; i < 8; i++) h = (h ^ (uint64_t)((value >> (8 * i)) & 0xff)) * 1099511628211ull;
    return h;
}

#ifndef KILN_HAVE_CUDA
int kiln_backend_cuda_cc(const kiln_backend *be) {
    (void)be;
    return 0;
}

kiln_status kiln_backend_open_cuda(int device, kiln_backend **out, kiln_err *err) {
    if (out) *out = NULL;
    return KILN_FAIL(err, KILN_E_DEVICE,
                     "CUDA backend requested (device %d) but this kiln was built without CUDA "
                     "(configure with -DKILN_CUDA=ON); use the CPU backend",
                     device);
}
#endif

/* backend.c - backend-independent entry points: closing any backend, and the CUDA opener's stand-in when kiln
 * was built without CUDA (the real one lives in src/compute/cuda/). */
#include "compute/ops.h"

void kiln_backend_close(kiln_backend *be) {
    if (be && be->ops && be->ops->close) be->ops->close(be);
}

#ifndef KILN_HAVE_CUDA
kiln_status kiln_backend_open_cuda(int device, kiln_backend **out, kiln_err *err) {
    if (out) *out = NULL;
    return KILN_FAIL(err, KILN_E_DEVICE,
                     "CUDA backend requested (device %d) but this kiln was built without CUDA "
                     "(configure with -DKILN_CUDA=ON); use the CPU backend",
                     device);
}
#endif

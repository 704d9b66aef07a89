/* cuda_device_open.c - opening the backend a `--device` spec names (see cuda_device.h). Its own file so that a
 * program (or test) that only parses device specs does not link every backend. */
#include "compute/cuda/cuda_device.h"

kiln_status kiln_backend_open_device(const char *spec, int n_threads, kiln_backend **out, kiln_err *err) {
    kiln_backend_kind kind;
    int index;
    if (out) *out = NULL;
    KILN_TRY(kiln_device_parse(spec, &kind, &index, err));
    if (kind == KILN_BACKEND_CUDA) return kiln_backend_open_cuda(index, out, err);
    return kiln_backend_open_cpu(n_threads, out, err);
}

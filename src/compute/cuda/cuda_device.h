/* cuda_device.h - the `--device` flag: "cpu", "cuda" (= cuda:0) or "cuda:N", and opening the backend it names.
 *
 *     kiln_backend *be;
 *     KILN_TRY(kiln_backend_open_device("cuda:1", 0, &be, err));   // KILN_E_DEVICE without a GPU 1
 *
 * Pure host logic (tests/unit/test_compute_cuda_device.c). Lives beside the CUDA backend because "cuda:N" is its
 * syntax; the CLI and the server call it.
 */
#ifndef KILN_COMPUTE_CUDA_DEVICE_H
#define KILN_COMPUTE_CUDA_DEVICE_H

#include "base/status.h"
#include "compute/ops.h"

#define KILN_MAX_CUDA_DEVICE 63

/* Parses spec into a backend kind and device index. NULL or "" means "cpu". KILN_E_INVALID with a message that
 * quotes the accepted forms on anything else ("cuda:", "cuda:-1", "cuda:1x", "gpu", "cuda:64"). */
kiln_status kiln_device_parse(const char *spec, kiln_backend_kind *kind, int *index, kiln_err *err);
/* Parses spec and opens that backend (n_threads is for the CPU). */
kiln_status kiln_backend_open_device(const char *spec, int n_threads, kiln_backend **out, kiln_err *err);

#endif

/* cuda_device.c - `--device cpu|cuda|cuda:N` (see cuda_device.h). */
#include "compute/cuda/cuda_device.h"

#include <string.h>

kiln_status kiln_device_parse(const char *spec, kiln_backend_kind *kind, int *index, kiln_err *err) {
    *kind = KILN_BACKEND_CPU;
    *index = 0;
    if (!spec || !*spec || strcmp(spec, "cpu") == 0) return KILN_OK;
    if (strncmp(spec, "cuda", 4) == 0) {
        const char *p = spec + 4;
        if (*p == 0) {
            *kind = KILN_BACKEND_CUDA;
            return KILN_OK;
        }
        if (*p == ':' && p[1]) {
            int n = 0;
            for (p++; *p; p++) {
                if (*p < '0' || *p > '9' || n > KILN_MAX_CUDA_DEVICE) break;
                n = n * 10 + (*p - '0');
            }
            if (!*p && n <= KILN_MAX_CUDA_DEVICE) {
                *kind = KILN_BACKEND_CUDA;
                *index = n;
                return KILN_OK;
            }
        }
    }
    return KILN_FAIL(err, KILN_E_INVALID, "--device %s: expected cpu, cuda or cuda:N (N = 0..%d)", spec,
                     KILN_MAX_CUDA_DEVICE);
}

/* cuda_backend.h - the CUDA backend's graph runs are declared backend-neutrally in compute/graph.h; this header
 * remains for the CUDA tests that include it. */
#ifndef KILN_COMPUTE_CUDA_BACKEND_H
#define KILN_COMPUTE_CUDA_BACKEND_H

#include "compute/graph.h"

#endif

/* cuda_ops.h - the CUDA backend's entry points cuda_matmul ... cuda_upsample2x, one per kiln_ops field, with the
 * same names (cuda_ for cpu_), argument order and tensor structs as the CPU backend's (one list for both:
 * ops_declare.h). Each checks its arguments with cuda_check.h and enqueues its kernels on the backend's stream.
 * Only defined when built with KILN_HAVE_CUDA. */
#ifndef KILN_COMPUTE_CUDA_OPS_H
#define KILN_COMPUTE_CUDA_OPS_H

#include "compute/ops.h"
#include "compute/ops_declare.h"

KILN_DECLARE_OPS(cuda);

#endif

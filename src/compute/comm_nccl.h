/* comm_nccl.h - the NCCL communicator (comm.h) and its host-side logic.
 *
 *     kiln_comm *mpi, *c;                               // MPI first: it bootstraps NCCL
 *     KILN_TRY(kiln_comm_open_mpi(&mpi, &err));
 *     KILN_TRY(kiln_comm_open_nccl(mpi, cuda_backend, &c, &err));   // c owns mpi from now on
 *
 * One rank per GPU: the backend is this rank's CUDA device (engine.c picks device_index + the local rank,
 * kiln_nccl_local_device). Rank 0 makes an ncclUniqueId and broadcasts it over MPI; every rank then joins with
 * ncclCommInitRank. Collectives run on the backend's stream on device buffers, in NCCL's order; this rank then
 * polls the stream and ncclCommGetAsyncError against the time-out (comm.h): a rank that hangs or dies makes the
 * others log "rank R of P: COLLECTIVE timed out" (or NCCL's remote error), ncclCommAbort and MPI_Abort, so every
 * rank exits. Inside a CUDA-graph capture the collective is only enqueued (NCCL supports capture; the wait happens
 * at the graph's launch). broadcast of host memory (be NULL), barrier and split go through the MPI communicator.
 *
 * The logic below needs neither NCCL nor a GPU (test_compute_comm_nccl); the enum values are NCCL's, checked
 * against nccl.h at compile time where it is built.
 */
#ifndef KILN_COMPUTE_COMM_NCCL_H
#define KILN_COMPUTE_COMM_NCCL_H

#include <stddef.h>

#include "compute/comm.h"
#include "tensor/tensor.h"

/* ncclDataType_t values (nccl.h) */
enum { KILN_NCCL_INT8 = 0, KILN_NCCL_UINT8 = 1, KILN_NCCL_INT32 = 2, KILN_NCCL_FLOAT16 = 6, KILN_NCCL_FLOAT32 = 7,
       KILN_NCCL_BFLOAT16 = 9 };
/* ncclResult_t values (nccl.h) */
enum { KILN_NCCL_SUCCESS = 0, KILN_NCCL_CUDA_ERROR = 1, KILN_NCCL_SYSTEM_ERROR = 2, KILN_NCCL_INTERNAL_ERROR = 3,
       KILN_NCCL_INVALID_ARGUMENT = 4, KILN_NCCL_INVALID_USAGE = 5, KILN_NCCL_REMOTE_ERROR = 6,
       KILN_NCCL_IN_PROGRESS = 7 };

/* The NCCL type of a kiln dtype; KILN_E_UNSUPPORTED (naming it) for the quantised and 64-bit ones. */
kiln_status kiln_nccl_dtype(kiln_dtype dt, int *out, kiln_err *err);
/* An ncclResult_t as a kiln status: OK for success, else the failure with `what` (the collective), NCCL's own
 * text (NULL: none) and what it means for the job (a remote error: another rank failed). */
kiln_status kiln_nccl_status(int result, const char *what, const char *detail, kiln_err *err);
/* The GPU of this rank: base (the --device cuda:N index) + local_rank (OMPI_COMM_WORLD_LOCAL_RANK; NULL or empty:
 * 0). KILN_E_DEVICE when it is past the n_devices the machine has (more ranks on the host than GPUs: NCCL needs
 * one GPU per rank), KILN_E_INVALID for a local rank that is not a number >= 0. */
kiln_status kiln_nccl_local_device(int base, const char *local_rank, int n_devices, int *out, kiln_err *err);
/* A collective's element counts: n per rank block times size ranks, each elem bytes, must not overflow size_t,
 * and the total must fit the buffers' bytes (have = 0: not checked). KILN_E_LIMIT / KILN_E_INVALID with the figures. */
kiln_status kiln_nccl_check_count(const char *what, size_t n, int size, size_t elem, size_t have, kiln_err *err);

/* GPUs the CUDA runtime sees, for kiln_nccl_local_device; -1 when kiln has no NCCL (the backend's open then
 * names a missing device itself). */
int kiln_nccl_gpu_count(void);

/* Over the MPI communicator mpi (its ranks; it is closed with the result, or on failure) on be's GPU. Without
 * NCCL in the build: KILN_E_UNSUPPORTED, mpi left open. */
kiln_status kiln_comm_open_nccl(kiln_comm *mpi, kiln_backend *be, kiln_comm **out, kiln_err *err);

#endif

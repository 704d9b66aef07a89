/* comm.h - the communicator: collectives between the ranks that run one request together, beside the ops table.
 *
 *     kiln_comm *c;
 *     KILN_TRY(kiln_comm_open(&c, &err));        // MPI when started by mpirun with > 1 rank, else one rank
 *     if (c->size > 1) KILN_TRY(c->ops->all_gather(c, be, mine, all, n, &err));
 *     kiln_comm_close(c);
 *
 * Buffers are f32 in the given backend's memory (the CPU's host memory, or CUDA device memory: the MPI
 * implementation stages device buffers through the host, NCCL uses them directly). Counts are floats. Every
 * rank must make the same calls in the same order (MPI/NCCL collective semantics).
 *
 * Implementations: "single" (one rank: copies, no messages - the path of every request that is not run under
 * mpirun, so one rank costs nothing over the code without a communicator), "mpi" (Open MPI, CPU ranks on one
 * or many machines; built when CMake finds MPI: KILN_HAVE_MPI), "nccl" (one rank per GPU, bootstrapped over
 * MPI: comm_nccl.c, built with CUDA and MPI).
 *
 * Failure: a collective that does not complete within timeout_s (KILN_COMM_TIMEOUT seconds, default 300) means
 * a rank died or hung; the rank that notices logs "rank R: COLLECTIVE timed out after T s" and aborts the whole
 * job (MPI_Abort: every rank exits, status 6), so nothing waits forever. A rank that crashes is seen by mpirun,
 * which ends the others.
 */
#ifndef KILN_COMPUTE_COMM_H
#define KILN_COMPUTE_COMM_H

#include <stddef.h>

#include "compute/ops.h"

typedef struct kiln_comm kiln_comm;

typedef struct kiln_comm_ops {
    const char *name; /* "single", "mpi", "nccl" */
    /* send [size * n]: block r goes to rank r; recv [size * n]: block r came from rank r. */
    kiln_status (*all_to_all)(kiln_comm *c, kiln_backend *be, const float *send, float *recv, size_t n,
                              kiln_err *err);
    /* send [n] -> recv [size * n], rank order. */
    kiln_status (*all_gather)(kiln_comm *c, kiln_backend *be, const float *send, float *recv, size_t n,
                              kiln_err *err);
    /* send [size * n], summed over ranks; recv [n] = this rank's block of the sum. */
    kiln_status (*reduce_scatter)(kiln_comm *c, kiln_backend *be, const float *send, float *recv, size_t n,
                                  kiln_err *err);
    /* buf [n] = the sum over ranks, in place. */
    kiln_status (*all_reduce)(kiln_comm *c, kiln_backend *be, float *buf, size_t n, kiln_err *err);
    /* buf [bytes] of rank root, to every rank (host memory when be is NULL). */
    kiln_status (*broadcast)(kiln_comm *c, kiln_backend *be, void *buf, size_t bytes, int root, kiln_err *err);
    kiln_status (*barrier)(kiln_comm *c, kiln_err *err);
    /* A new communicator of the ranks that pass the same color, ranked by key (MPI_Comm_split; a collective of
     * c). Closed by kiln_comm_close, before c. */
    kiln_status (*split)(kiln_comm *c, int color, int key, kiln_comm **out, kiln_err *err);
    void (*close)(kiln_comm *c);
} kiln_comm_ops;

struct kiln_comm {
    const kiln_comm_ops *ops;
    int rank, size;
    double timeout_s;
};

/* MPI when this process was started by mpirun/mpiexec with more than one rank (and kiln has MPI), else one rank.
 * KILN_E_UNSUPPORTED when started with several ranks by a kiln built without MPI. */
kiln_status kiln_comm_open(kiln_comm **out, kiln_err *err);
/* The one-rank communicator (never fails but for memory). */
kiln_status kiln_comm_open_single(kiln_comm **out, kiln_err *err);
/* Ranks the launcher says this job has (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_SIZE...; 1 when none). */
int kiln_comm_launcher_size(void);
/* This process's rank as the launcher says (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK; 0 when none), known before
 * MPI starts: `kiln serve` forks its frontend probe on rank 0 only, before MPI_Init. */
int kiln_comm_launcher_rank(void);
/* KILN_COMM_TIMEOUT (seconds, > 0) or 300. */
double kiln_comm_timeout_from_env(void);
void kiln_comm_close(kiln_comm *c); /* NULL allowed */

/* The 2-D grid of a job of sp x tp ranks (docs/parallel.md): rank = s * tp + t; *tp_group holds the tp
 * consecutive ranks of one s (tensor parallelism: all-reduces every block), *sp_group the sp ranks of one t
 * (sequence parallelism). KILN_E_INVALID unless tp >= 1 divides the rank count. Both are closed by the caller. */
kiln_status kiln_comm_grid(kiln_comm *world, int tp, kiln_comm **sp_group, kiln_comm **tp_group, kiln_err *err);

/* Host bytes from every rank to every rank: all[r * bytes ..] = rank r's `mine` (bytes each, the same on every
 * rank), for small host-side agreements (the memory limit every rank plans with: pipeline/mem_agree.h). Made of
 * c->size host broadcasts (root r, be NULL), so it needs nothing of an implementation but its host broadcast and
 * works alike over single, mpi and nccl (whose host broadcasts go over MPI); P tiny messages, not for bulk data.
 * A collective of c. KILN_E_LIMIT when size * bytes overflows; the broadcast's errors (a time-out aborts). */
kiln_status kiln_comm_host_all_gather(kiln_comm *c, const void *mine, void *all, size_t bytes, kiln_err *err);

/* The MPI implementation (comm_mpi.c); KILN_E_UNSUPPORTED without MPI. */
kiln_status kiln_comm_open_mpi(kiln_comm **out, kiln_err *err);

#endif

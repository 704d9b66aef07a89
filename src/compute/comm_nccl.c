/* comm_nccl.c - the communicator over NCCL, one rank per GPU, bootstrapped over MPI (see comm_nccl.h). Built with
 * KILN_HAVE_NCCL (the CUDA build, when CMake finds nccl.h and libnccl beside the toolkit, and MPI). */
#include "compute/comm_nccl.h"

#ifdef KILN_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <mpi.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes" /* nccl.h declares f() for f(void) */
#include <nccl.h>
#pragma GCC diagnostic pop
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "compute/cuda/cuda_internal.h"

/* comm_nccl.h's copies of NCCL's enums are what nccl.h says */
#define SAME(a, b) ((int)(a) == (int)(b))
_Static_assert(SAME(KILN_NCCL_FLOAT32, ncclFloat32) && SAME(KILN_NCCL_BFLOAT16, ncclBfloat16) &&
                   SAME(KILN_NCCL_FLOAT16, ncclFloat16) && SAME(KILN_NCCL_UINT8, ncclUint8) &&
                   SAME(KILN_NCCL_INT32, ncclInt32) && SAME(KILN_NCCL_INT8, ncclInt8), "ncclDataType_t");
_Static_assert(SAME(KILN_NCCL_SUCCESS, ncclSuccess) && SAME(KILN_NCCL_CUDA_ERROR, ncclUnhandledCudaError) &&
                   SAME(KILN_NCCL_SYSTEM_ERROR, ncclSystemError) && SAME(KILN_NCCL_INTERNAL_ERROR, ncclInternalError) &&
                   SAME(KILN_NCCL_INVALID_ARGUMENT, ncclInvalidArgument) &&
                   SAME(KILN_NCCL_INVALID_USAGE, ncclInvalidUsage) && SAME(KILN_NCCL_REMOTE_ERROR, ncclRemoteError) &&
                   SAME(KILN_NCCL_IN_PROGRESS, ncclInProgress), "ncclResult_t");

typedef struct comm_nccl {
    kiln_comm c;
    kiln_comm *mpi;      /* the same ranks over MPI: bootstrap, host broadcasts, barrier, split */
    kiln_backend *be;    /* this rank's GPU */
    ncclComm_t nc;
} comm_nccl;

/* A collective that failed or did not finish: say so, abort NCCL and the whole job (the others would wait). */
static kiln_status fatal(comm_nccl *m, kiln_err *err) {
    log_error("rank %d of %d: %s; aborting every rank", m->c.rank, m->c.size, err->msg);
    fflush(NULL);
    ncclCommAbort(m->nc);
    MPI_Abort(MPI_COMM_WORLD, 6);
    return err->code; /* not reached */
}

static kiln_status check(comm_nccl *m, ncclResult_t r, const char *what, kiln_err *err) {
    if (r == ncclSuccess) return KILN_OK;
    kiln_nccl_status(r, what, ncclGetLastError(m->nc), err);
    return fatal(m, err);
}

/* Waits for the enqueued collective: the stream drained, polled with NCCL's async error against the deadline. */
static kiln_status wait_done(comm_nccl *m, const char *what, kiln_err *err) {
    kiln_cuda_backend *cb = cuda_be(m->be);
    if (cb->capturing) return KILN_OK; /* a graph capture only records the collective */
    double t0 = kiln_clock_s();
    long ns = 1000;
    for (;;) {
        cudaError_t q = cudaStreamQuery((cudaStream_t)cb->stream);
        if (q == cudaSuccess) return KILN_OK;
        if (q != cudaErrorNotReady) {
            KILN_FAIL(err, KILN_E_DEVICE, "NCCL %s: %s", what, cudaGetErrorString(q));
            return fatal(m, err);
        }
        ncclResult_t ae = ncclSuccess;
        ncclCommGetAsyncError(m->nc, &ae);
        if (ae != ncclSuccess && ae != ncclInProgress) return check(m, ae, what, err);
        double el = kiln_clock_s() - t0;
        if (el > m->c.timeout_s) {
            KILN_FAIL(err, KILN_E_DEVICE, "%s timed out after %.0f s (a rank died or hung; KILN_COMM_TIMEOUT)", what, el);
            return fatal(m, err);
        }
        struct timespec ts = {0, ns};
        nanosleep(&ts, NULL);
        if (ns < 1000000) ns *= 2;
    }
}

static cudaStream_t stream_of(comm_nccl *m) { return (cudaStream_t)cuda_be(m->be)->stream; }

static kiln_status n_a2a(kiln_comm *c, kiln_backend *be, const float *send, float *recv, size_t n, kiln_err *err) {
    comm_nccl *m = (comm_nccl *)c;
    (void)be;
    KILN_TRY(kiln_nccl_check_count("all-to-all", n, c->size, sizeof(float), 0, err));
    /* grouped point-to-point: ncclAlltoAll is only in recent NCCL */
    KILN_TRY(check(m, ncclGroupStart(), "all-to-all", err));
    for (int p = 0; p < c->size; p++) {
        KILN_TRY(check(m, ncclSend(send + (size_t)p * n, n, ncclFloat32, p, m->nc, stream_of(m)), "all-to-all", err));
        KILN_TRY(check(m, ncclRecv(recv + (size_t)p * n, n, ncclFloat32, p, m->nc, stream_of(m)), "all-to-all", err));
    }
    KILN_TRY(check(m, ncclGroupEnd(), "all-to-all", err));
    return wait_done(m, "all-to-all", err);
}

static kiln_status n_gather(kiln_comm *c, kiln_backend *be, const float *send, float *recv, size_t n, kiln_err *err) {
    comm_nccl *m = (comm_nccl *)c;
    (void)be;
    KILN_TRY(kiln_nccl_check_count("all-gather", n, c->size, sizeof(float), 0, err));
    KILN_TRY(check(m, ncclAllGather(send, recv, n, ncclFloat32, m->nc, stream_of(m)), "all-gather", err));
    return wait_done(m, "all-gather", err);
}

static kiln_status n_rs(kiln_comm *c, kiln_backend *be, const float *send, float *recv, size_t n, kiln_err *err) {
    comm_nccl *m = (comm_nccl *)c;
    (void)be;
    KILN_TRY(kiln_nccl_check_count("reduce-scatter", n, c->size, sizeof(float), 0, err));
    KILN_TRY(check(m, ncclReduceScatter(send, recv, n, ncclFloat32, ncclSum, m->nc, stream_of(m)), "reduce-scatter", err));
    return wait_done(m, "reduce-scatter", err);
}

static kiln_status n_ar(kiln_comm *c, kiln_backend *be, float *buf, size_t n, kiln_err *err) {
    comm_nccl *m = (comm_nccl *)c;
    (void)be;
    KILN_TRY(kiln_nccl_check_count("all-reduce", n, 1, sizeof(float), 0, err));
    KILN_TRY(check(m, ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, m->nc, stream_of(m)), "all-reduce", err));
    return wait_done(m, "all-reduce", err);
}

static kiln_status n_bcast(kiln_comm *c, kiln_backend *be, void *buf, size_t bytes, int root, kiln_err *err) {
    comm_nccl *m = (comm_nccl *)c;
    if (!be || be->kind != KILN_BACKEND_CUDA) return m->mpi->ops->broadcast(m->mpi, be, buf, bytes, root, err);
    if (root < 0 || root >= c->size) return KILN_FAIL(err, KILN_E_INVALID, "broadcast from rank %d of %d", root, c->size);
    KILN_TRY(check(m, ncclBroadcast(buf, buf, bytes, ncclUint8, root, m->nc, stream_of(m)), "broadcast", err));
    return wait_done(m, "broadcast", err);
}

static kiln_status n_barrier(kiln_comm *c, kiln_err *err) {
    comm_nccl *m = (comm_nccl *)c;
    return m->mpi->ops->barrier(m->mpi, err);
}

static kiln_status n_split(kiln_comm *c, int color, int key, kiln_comm **out, kiln_err *err) {
    comm_nccl *m = (comm_nccl *)c;
    kiln_comm *sub;
    KILN_TRY(m->mpi->ops->split(m->mpi, color, key, &sub, err));
    return kiln_comm_open_nccl(sub, m->be, out, err);
}

static void n_close(kiln_comm *c) {
    comm_nccl *m = (comm_nccl *)c;
    if (m->nc) ncclCommDestroy(m->nc);
    kiln_comm_close(m->mpi);
    kiln_free(m);
}

int kiln_nccl_gpu_count(void) {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

static const kiln_comm_ops nccl_ops = {"nccl", n_a2a, n_gather, n_rs, n_ar, n_bcast, n_barrier, n_split, n_close};

kiln_status kiln_comm_open_nccl(kiln_comm *mpi, kiln_backend *be, kiln_comm **out, kiln_err *err) {
    *out = NULL;
    if (!be || be->kind != KILN_BACKEND_CUDA) {
        kiln_comm_close(mpi);
        return KILN_FAIL(err, KILN_E_INVALID, "NCCL communicator: needs a CUDA backend (one rank per GPU)");
    }
    comm_nccl *m = kiln_calloc(1, sizeof *m);
    if (!m) {
        kiln_comm_close(mpi);
        return KILN_FAIL(err, KILN_E_NOMEM, "communicator: out of memory");
    }
    m->mpi = mpi;
    m->be = be;
    m->c = (kiln_comm){&nccl_ops, mpi->rank, mpi->size, mpi->timeout_s};
    ncclUniqueId id;
    kiln_status s = KILN_OK;
    if (mpi->rank == 0) s = kiln_nccl_status(ncclGetUniqueId(&id), "ncclGetUniqueId", NULL, err);
    /* every rank joins the broadcast even when rank 0 failed, with a zero id: ncclCommInitRank then fails on all */
    if (s != KILN_OK) memset(&id, 0, sizeof id);
    kiln_status b = mpi->ops->broadcast(mpi, NULL, &id, sizeof id, 0, err);
    if (s == KILN_OK) s = b;
    if (s == KILN_OK) s = kcu_use(cuda_be(be), err);
    if (s == KILN_OK)
        s = kiln_nccl_status(ncclCommInitRank(&m->nc, mpi->size, id, mpi->rank), "ncclCommInitRank", NULL, err);
    if (s != KILN_OK) {
        m->nc = NULL;
        n_close(&m->c);
        return s;
    }
    log_info("rank %d of %d: NCCL %d.%d on GPU %d", mpi->rank, mpi->size, NCCL_MAJOR, NCCL_MINOR, be->device);
    *out = &m->c;
    return KILN_OK;
}

#else

int kiln_nccl_gpu_count(void) { return -1; }

kiln_status kiln_comm_open_nccl(kiln_comm *mpi, kiln_backend *be, kiln_comm **out, kiln_err *err) {
    (void)mpi, (void)be;
    *out = NULL;
    return KILN_FAIL(err, KILN_E_UNSUPPORTED, "this kiln was built without NCCL (the CUDA build finds it beside the "
                     "toolkit: nccl.h, libnccl)");
}

#endif

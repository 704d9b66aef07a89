/* comm_mpi.c - the communicator over MPI (Open MPI from Debian), see comm.h.
 *
 * Every collective is the non-blocking MPI-3 call (MPI_Ialltoall, ...) completed by MPI_Test polling against a
 * deadline, so that a rank that died or hung turns into a clear error and MPI_Abort - every rank of the job then
 * exits - instead of a hang. Device buffers (a CUDA backend) are staged through host scratch; CPU buffers are
 * handed to MPI as they are. */
#include "compute/comm.h"

#ifdef KILN_HAVE_MPI
#include <limits.h>
#include <stdio.h>
#include <mpi.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"

typedef struct comm_mpi {
    kiln_comm c;
    float *host;       /* staging for device buffers */
    size_t host_bytes;
    bool we_init;      /* MPI_Init was ours (so MPI_Finalize is) */
    MPI_Comm comm;     /* MPI_COMM_WORLD, or a group of it (split) */
} comm_mpi;

/* A failed or timed-out collective: say so and end the whole job (the other ranks would wait forever). */
static kiln_status fatal(comm_mpi *m, const char *what, const char *why, kiln_err *err) {
    log_error("rank %d of %d: %s %s; aborting every rank", m->c.rank, m->c.size, what, why);
    fflush(NULL);
    MPI_Abort(MPI_COMM_WORLD, 6);
    return KILN_FAIL(err, KILN_E_DEVICE, "rank %d: %s %s", m->c.rank, what, why); /* not reached */
}

static kiln_status wait_req(comm_mpi *m, MPI_Request *rq, const char *what, kiln_err *err) {
    double t0 = kiln_clock_s();
    long ns = 1000;
    for (;;) {
        int done = 0, rc = MPI_Test(rq, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            char msg[MPI_MAX_ERROR_STRING];
            int len = 0;
            MPI_Error_string(rc, msg, &len);
            return fatal(m, what, msg, err);
        }
        if (done) return KILN_OK;
        double el = kiln_clock_s() - t0;
        if (el > m->c.timeout_s) {
            char why[128];
            snprintf(why, sizeof why, "timed out after %.0f s (a rank died or hung; KILN_COMM_TIMEOUT)", el);
            return fatal(m, what, why, err);
        }
        struct timespec ts = {0, ns};
        nanosleep(&ts, NULL);
        if (ns < 1000000) ns *= 2; /* back off to 1 ms: latency matters little next to a DiT block */
    }
}

static kiln_status started(comm_mpi *m, int rc, const char *what, kiln_err *err) {
    if (rc == MPI_SUCCESS) return KILN_OK;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return fatal(m, what, msg, err);
}

/* Host views of send/recv: the buffers themselves on the CPU, else staging (send first, then recv). */
static kiln_status stage(comm_mpi *m, kiln_backend *be, const float *send, size_t ns, float *recv, size_t nr,
                         const float **hs, float **hr, kiln_err *err) {
    if (!be || be->kind == KILN_BACKEND_CPU) {
        *hs = send;
        *hr = recv;
        return KILN_OK;
    }
    size_t need = (ns + nr) * sizeof(float);
    if (need > m->host_bytes) {
        float *p = kiln_realloc(m->host, need);
        if (!p) return KILN_FAIL(err, KILN_E_NOMEM, "communicator: out of memory for %zu staging bytes", need);
        m->host = p;
        m->host_bytes = need;
    }
    if (send && ns) KILN_TRY(be->ops->download(be, m->host, send, ns * sizeof(float), err));
    *hs = m->host;
    *hr = m->host + ns;
    return KILN_OK;
}
static kiln_status unstage(kiln_backend *be, float *recv, const float *hr, size_t nr, kiln_err *err) {
    if (!be || be->kind == KILN_BACKEND_CPU || !nr) return KILN_OK;
    return be->ops->upload(be, recv, hr, nr * sizeof(float), err);
}

static kiln_status count_ok(size_t n, int size, kiln_err *err) {
    if (n * (size_t)size > INT_MAX) return KILN_FAIL(err, KILN_E_LIMIT, "collective of %zu floats x %d ranks", n, size);
    return KILN_OK;
}

static kiln_status m_a2a(kiln_comm *c, kiln_backend *be, const float *send, float *recv, size_t n, kiln_err *err) {
    comm_mpi *m = (comm_mpi *)c;
    size_t tot = n * c->size;
    const float *hs;
    float *hr;
    MPI_Request rq;
    KILN_TRY(count_ok(n, c->size, err));
    KILN_TRY(stage(m, be, send, tot, recv, tot, &hs, &hr, err));
    KILN_TRY(started(m, MPI_Ialltoall(hs, (int)n, MPI_FLOAT, hr, (int)n, MPI_FLOAT, m->comm, &rq), "all-to-all", err));
    KILN_TRY(wait_req(m, &rq, "all-to-all", err));
    return unstage(be, recv, hr, tot, err);
}

static kiln_status m_gather(kiln_comm *c, kiln_backend *be, const float *send, float *recv, size_t n, kiln_err *err) {
    comm_mpi *m = (comm_mpi *)c;
    const float *hs;
    float *hr;
    MPI_Request rq;
    KILN_TRY(count_ok(n, c->size, err));
    KILN_TRY(stage(m, be, send, n, recv, n * c->size, &hs, &hr, err));
    KILN_TRY(started(m, MPI_Iallgather(hs, (int)n, MPI_FLOAT, hr, (int)n, MPI_FLOAT, m->comm, &rq), "all-gather", err));
    KILN_TRY(wait_req(m, &rq, "all-gather", err));
    return unstage(be, recv, hr, n * c->size, err);
}

static kiln_status m_rs(kiln_comm *c, kiln_backend *be, const float *send, float *recv, size_t n, kiln_err *err) {
    comm_mpi *m = (comm_mpi *)c;
    const float *hs;
    float *hr;
    MPI_Request rq;
    KILN_TRY(count_ok(n, c->size, err));
    KILN_TRY(stage(m, be, send, n * c->size, recv, n, &hs, &hr, err));
    KILN_TRY(started(m, MPI_Ireduce_scatter_block(hs, hr, (int)n, MPI_FLOAT, MPI_SUM, m->comm, &rq),
                     "reduce-scatter", err));
    KILN_TRY(wait_req(m, &rq, "reduce-scatter", err));
    return unstage(be, recv, hr, n, err);
}

static kiln_status m_ar(kiln_comm *c, kiln_backend *be, float *buf, size_t n, kiln_err *err) {
    comm_mpi *m = (comm_mpi *)c;
    const float *hs;
    float *hr;
    MPI_Request rq;
    KILN_TRY(count_ok(n, 1, err));
    KILN_TRY(stage(m, be, buf, n, buf, 0, &hs, &hr, err));
    float *io = (float *)hs; /* in place: CPU buf itself, or the staged copy */
    KILN_TRY(started(m, MPI_Iallreduce(MPI_IN_PLACE, io, (int)n, MPI_FLOAT, MPI_SUM, m->comm, &rq),
                     "all-reduce", err));
    KILN_TRY(wait_req(m, &rq, "all-reduce", err));
    return unstage(be, buf, io, n, err);
}

static kiln_status m_bcast(kiln_comm *c, kiln_backend *be, void *buf, size_t bytes, int root, kiln_err *err) {
    comm_mpi *m = (comm_mpi *)c;
    if (root < 0 || root >= c->size) return KILN_FAIL(err, KILN_E_INVALID, "broadcast from rank %d of %d", root, c->size);
    if (bytes > INT_MAX) return KILN_FAIL(err, KILN_E_LIMIT, "broadcast of %zu bytes", bytes);
    size_t nf = (bytes + 3) / 4;
    const float *hs;
    float *hr;
    MPI_Request rq;
    KILN_TRY(stage(m, be, buf, c->rank == root ? nf : 0, NULL, 0, &hs, &hr, err));
    void *io = (be && be->kind != KILN_BACKEND_CPU) ? (void *)m->host : buf;
    KILN_TRY(started(m, MPI_Ibcast(io, (int)bytes, MPI_BYTE, root, m->comm, &rq), "broadcast", err));
    KILN_TRY(wait_req(m, &rq, "broadcast", err));
    if (be && be->kind != KILN_BACKEND_CPU) return be->ops->upload(be, buf, io, bytes, err);
    return KILN_OK;
}

static kiln_status m_barrier(kiln_comm *c, kiln_err *err) {
    comm_mpi *m = (comm_mpi *)c;
    MPI_Request rq;
    KILN_TRY(started(m, MPI_Ibarrier(m->comm, &rq), "barrier", err));
    return wait_req(m, &rq, "barrier", err);
}

static kiln_status m_split(kiln_comm *c, int color, int key, kiln_comm **out, kiln_err *err) {
    comm_mpi *m = (comm_mpi *)c, *g = kiln_calloc(1, sizeof *g);
    if (!g) return KILN_FAIL(err, KILN_E_NOMEM, "communicator: out of memory");
    /* MPI_Comm_split is itself a blocking collective of the parent: a barrier first turns a dead rank into the
     * time-out of every other collective instead of a hang here */
    kiln_status s = m_barrier(c, err);
    if (s == KILN_OK && MPI_Comm_split(m->comm, color, key, &g->comm) != MPI_SUCCESS)
        s = fatal(m, "split", "failed", err);
    if (s != KILN_OK) {
        kiln_free(g);
        return s;
    }
    MPI_Comm_set_errhandler(g->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(g->comm, &g->c.rank);
    MPI_Comm_size(g->comm, &g->c.size);
    g->c.ops = c->ops;
    g->c.timeout_s = c->timeout_s;
    *out = &g->c;
    return KILN_OK;
}

static void m_close(kiln_comm *c) {
    comm_mpi *m = (comm_mpi *)c;
    int fin = 0;
    if (m->comm != MPI_COMM_WORLD && MPI_Finalized(&fin) == MPI_SUCCESS && !fin) MPI_Comm_free(&m->comm);
    if (m->we_init && MPI_Finalized(&fin) == MPI_SUCCESS && !fin) MPI_Finalize();
    kiln_free(m->host);
    kiln_free(m);
}

static const kiln_comm_ops mpi_ops = {"mpi", m_a2a, m_gather, m_rs, m_ar, m_bcast, m_barrier, m_split, m_close};

kiln_status kiln_comm_open_mpi(kiln_comm **out, kiln_err *err) {
    comm_mpi *m = kiln_calloc(1, sizeof *m);
    if (!m) return KILN_FAIL(err, KILN_E_NOMEM, "communicator: out of memory");
    int inited = 0, provided = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        /* SERIALIZED, not FUNNELED: `kiln serve` initialises MPI on its main thread and calls it from the worker
         * (and an HTTP thread's unload), one at a time under a lock (server/engine_ranks.h) */
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
            kiln_free(m);
            return KILN_FAIL(err, KILN_E_DEVICE, "MPI_Init_thread failed");
        }
        m->we_init = true;
        if (provided < MPI_THREAD_SERIALIZED)
            log_info("MPI gives thread level %d, below MPI_THREAD_SERIALIZED: kiln serve's ranks still call it from "
                     "one thread at a time", provided);
    }
    m->comm = MPI_COMM_WORLD;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &m->c.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m->c.size);
    m->c.ops = &mpi_ops;
    m->c.timeout_s = kiln_comm_timeout_from_env();
    *out = &m->c;
    return KILN_OK;
}

#else

kiln_status kiln_comm_open_mpi(kiln_comm **out, kiln_err *err) {
    *out = NULL;
    return KILN_FAIL(err, KILN_E_UNSUPPORTED, "started with %d ranks, but this kiln was built without MPI "
                     "(install libopenmpi-dev and rebuild)", kiln_comm_launcher_size());
}

#endif

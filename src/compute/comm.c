/* comm.c - opening a communicator, and the one-rank implementation (see comm.h). */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "compute/comm.h"

int kiln_comm_launcher_size(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE", "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        if (v && atoi(v) > 0) return atoi(v);
    }
    return 1;
}

int kiln_comm_launcher_rank(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        if (v && atoi(v) >= 0) return atoi(v);
    }
    return 0;
}

double kiln_comm_timeout_from_env(void) {
    const char *v = getenv("KILN_COMM_TIMEOUT");
    double t = v ? strtod(v, NULL) : 0;
    return t > 0 ? t : 300.0;
}

/* One rank: a collective is at most a copy (all_to_all, all_gather, reduce_scatter with distinct buffers). */
static kiln_status copy_n(kiln_backend *be, float *dst, const float *src, size_t n, kiln_err *err) {
    if (dst == src || !n) return KILN_OK;
    kiln_tensor d = kiln_tensor_make(dst, KILN_DT_F32, 1, (int64_t[]){(int64_t)n});
    kiln_tensor s = kiln_tensor_make((void *)src, KILN_DT_F32, 1, (int64_t[]){(int64_t)n});
    return be->ops->copy(be, &d, &s, err);
}
static kiln_status s_a2a(kiln_comm *c, kiln_backend *be, const float *s, float *r, size_t n, kiln_err *err) {
    (void)c;
    return copy_n(be, r, s, n, err);
}
static kiln_status s_red(kiln_comm *c, kiln_backend *be, float *b, size_t n, kiln_err *err) {
    (void)c, (void)be, (void)b, (void)n, (void)err;
    return KILN_OK;
}
static kiln_status s_bcast(kiln_comm *c, kiln_backend *be, void *b, size_t bytes, int root, kiln_err *err) {
    (void)c, (void)be, (void)b, (void)bytes;
    return root == 0 ? KILN_OK : KILN_FAIL(err, KILN_E_INVALID, "broadcast from rank %d of 1", root);
}
static kiln_status s_barrier(kiln_comm *c, kiln_err *err) {
    (void)c, (void)err;
    return KILN_OK;
}
static kiln_status s_split(kiln_comm *c, int color, int key, kiln_comm **out, kiln_err *err) {
    (void)c, (void)color, (void)key;
    return kiln_comm_open_single(out, err);
}
static void s_close(kiln_comm *c) { kiln_free(c); }

static const kiln_comm_ops single_ops = {"single", s_a2a, s_a2a, s_a2a, s_red, s_bcast, s_barrier, s_split, s_close};

kiln_status kiln_comm_open_single(kiln_comm **out, kiln_err *err) {
    kiln_comm *c = kiln_calloc(1, sizeof *c);
    if (!c) return KILN_FAIL(err, KILN_E_NOMEM, "communicator: out of memory");
    c->ops = &single_ops;
    c->rank = 0;
    c->size = 1;
    c->timeout_s = kiln_comm_timeout_from_env();
    *out = c;
    return KILN_OK;
}

kiln_status kiln_comm_open(kiln_comm **out, kiln_err *err) {
    if (kiln_comm_launcher_size() > 1) return kiln_comm_open_mpi(out, err);
    return kiln_comm_open_single(out, err);
}

void kiln_comm_close(kiln_comm *c) {
    if (c) c->ops->close(c);
}

kiln_status kiln_comm_grid(kiln_comm *world, int tp, kiln_comm **sp_group, kiln_comm **tp_group, kiln_err *err) {
    *sp_group = *tp_group = NULL;
    if (tp < 1 || world->size % tp)
        return KILN_FAIL(err, KILN_E_INVALID, "tensor parallelism of degree %d: the %d ranks are not a multiple of it",
                         tp, world->size);
    const int s = world->rank / tp, t = world->rank % tp;
    KILN_TRY(world->ops->split(world, s, t, tp_group, err));
    kiln_status st = world->ops->split(world, t, s, sp_group, err);
    if (st != KILN_OK) {
        kiln_comm_close(*tp_group);
        *tp_group = NULL;
    }
    return st;
}

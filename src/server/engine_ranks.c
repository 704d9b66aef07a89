/* engine_ranks.c - rank 0 broadcasts each engine call, the other ranks follow it (see engine_ranks.h). */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "server/engine_ranks.h"
#include "server/ranks_wire.h"

typedef struct lead {
    kiln_gen_engine iface;
    pthread_mutex_t mu; /* one MPI user at a time: worker, HTTP (unload), main (stop) */
    kiln_comm *world;
    kiln_gen_engine *inner;
    bool stopped;
} lead;

/* rank 0: the header, then the payload (if any), to every rank */
static kiln_status send_msg(lead *l, int kind, uint8_t *payload, size_t len, kiln_err *err) {
    kiln_ranks_header h = kiln_ranks_header_make(kind, len);
    KILN_TRY(l->world->ops->broadcast(l->world, NULL, &h, sizeof h, 0, err));
    if (len) KILN_TRY(l->world->ops->broadcast(l->world, NULL, payload, len, 0, err));
    return KILN_OK;
}

/* After every denoising step rank 0 decides (the caller's progress: a ComfyUI interrupt) and tells the others, so
 * every rank stops at the same step or none does. */
typedef struct lead_progress_ctx {
    kiln_comm *world;
    kiln_gen_progress_fn fn;
    void *ctx;
    void (*latent)(void *pctx, const float *latent, int h16, int w16);
} lead_progress_ctx;

static bool lead_progress(void *ctx, int step, int n_steps) {
    lead_progress_ctx *pc = ctx;
    int32_t go = pc->fn ? pc->fn(pc->ctx, step, n_steps) : 1;
    kiln_err err = {0};
    /* a failed broadcast has aborted the job (comm.h); false stops this rank's run in any case */
    if (pc->world->ops->broadcast(pc->world, NULL, &go, sizeof go, 0, &err) != KILN_OK) return false;
    return go != 0;
}

/* The preview callback gets the caller's context back (the engine hands it ours). */
static void lead_latent(void *ctx, const float *latent, int h16, int w16) {
    lead_progress_ctx *pc = ctx;
    pc->latent(pc->ctx, latent, h16, w16);
}

static kiln_status lead_generate_batch(void *self, const kiln_gen_params *ps, int n, kiln_gen_progress_fn progress,
                                       void *pctx, kiln_gen_images *outs, kiln_err *err) {
    lead *l = self;
    if (n < 1 || n > KILN_RANKS_MAX_CALLS)
        return KILN_FAIL(err, KILN_E_LIMIT, "ranks: %d engine calls in one forward (at most %d)", n, KILN_RANKS_MAX_CALLS);
    memset(outs, 0, (size_t)n * sizeof *outs);
    uint8_t *buf = NULL;
    size_t len = 0;
    KILN_TRY(kiln_ranks_encode(ps, n, &buf, &len, err)); /* refused here: no rank has heard of the call */
    kiln_gen_params local[KILN_RANKS_MAX_CALLS];
    lead_progress_ctx pc = {l->world, progress, pctx, ps[0].latent};
    memcpy(local, ps, (size_t)n * sizeof *ps);
    for (int i = 0; i < n; i++) local[i].latent = ps[0].latent ? lead_latent : NULL;
    pthread_mutex_lock(&l->mu);
    kiln_status s = l->stopped ? KILN_FAIL(err, KILN_E_CANCELLED, "ranks: the server is stopping")
                               : send_msg(l, KILN_RANKS_RUN, buf, len, err);
    if (s == KILN_OK) {
        if (l->inner->generate_batch) s = l->inner->generate_batch(l->inner->self, local, n, lead_progress, &pc, outs, err);
        else s = l->inner->generate(l->inner->self, local, lead_progress, &pc, outs, err); /* n == 1: see new() */
    }
    pthread_mutex_unlock(&l->mu);
    kiln_free(buf);
    return s;
}

static kiln_status lead_generate(void *self, const kiln_gen_params *p, kiln_gen_progress_fn progress, void *pctx,
                                 kiln_gen_images *out, kiln_err *err) {
    return lead_generate_batch(self, p, 1, progress, pctx, out, err);
}

static void lead_unload(void *self) {
    lead *l = self;
    kiln_err err = {0};
    pthread_mutex_lock(&l->mu);
    if (!l->stopped && send_msg(l, KILN_RANKS_UNLOAD, NULL, 0, &err) == KILN_OK && l->inner->unload)
        l->inner->unload(l->inner->self);
    pthread_mutex_unlock(&l->mu);
}

kiln_gen_engine *kiln_ranks_lead_new(kiln_comm *world, kiln_gen_engine *inner) {
    lead *l = kiln_calloc(1, sizeof *l);
    if (!l) return NULL;
    pthread_mutex_init(&l->mu, NULL);
    l->world = world;
    l->inner = inner;
    l->iface.self = l;
    l->iface.generate = lead_generate;
    /* batching only when the inner engine batches: the followers call what rank 0 calls */
    l->iface.generate_batch = inner->generate_batch ? lead_generate_batch : NULL;
    /* always: an unload on rank 0 alone would leave the engines out of step (the next open is collective) */
    l->iface.unload = lead_unload;
    return &l->iface;
}

void kiln_ranks_lead_stop(kiln_gen_engine *e) {
    if (!e) return;
    lead *l = e->self;
    kiln_err err = {0};
    pthread_mutex_lock(&l->mu);
    if (!l->stopped) {
        l->stopped = true;
        if (send_msg(l, KILN_RANKS_STOP, NULL, 0, &err) != KILN_OK) log_error("ranks: stop: %s", err.msg);
    }
    pthread_mutex_unlock(&l->mu);
}

void kiln_ranks_lead_free(kiln_gen_engine *e) {
    if (!e) return;
    lead *l = e->self;
    pthread_mutex_destroy(&l->mu);
    kiln_free(l);
}

/* ---- the other ranks ---- */

static bool follow_progress(void *ctx, int step, int n_steps) {
    (void)step, (void)n_steps;
    kiln_comm *world = ctx;
    int32_t go = 0;
    kiln_err err = {0};
    if (world->ops->broadcast(world, NULL, &go, sizeof go, 0, &err) != KILN_OK) return false;
    return go != 0;
}

kiln_status kiln_ranks_follow(kiln_comm *world, kiln_gen_engine *inner, kiln_err *err) {
    for (uint64_t calls = 0;; calls++) {
        kiln_ranks_header h;
        memset(&h, 0, sizeof h);
        /* idle: no deadline (rank 0 may wait for days for a request); a dead rank 0 is seen by mpirun */
        double timeout = world->timeout_s;
        world->timeout_s = INFINITY;
        kiln_status s = world->ops->broadcast(world, NULL, &h, sizeof h, 0, err);
        world->timeout_s = timeout;
        KILN_TRY(s);
        if (kiln_ranks_header_check(&h, err) != KILN_OK) return kiln_err_prefix(err, "rank %d", world->rank);
        if (h.kind == KILN_RANKS_STOP) {
            log_info("rank %d of %d: rank 0 stopped the server after %llu engine calls", world->rank, world->size,
                     (unsigned long long)calls);
            return KILN_OK;
        }
        if (h.kind == KILN_RANKS_UNLOAD) {
            if (inner->unload) inner->unload(inner->self);
            continue;
        }
        uint8_t *buf = kiln_malloc((size_t)h.payload_bytes);
        if (!buf) return KILN_FAIL(err, KILN_E_NOMEM, "rank %d: out of memory for a %llu-byte call", world->rank,
                                   (unsigned long long)h.payload_bytes);
        kiln_ranks_call *call = NULL;
        s = world->ops->broadcast(world, NULL, buf, (size_t)h.payload_bytes, 0, err);
        if (s == KILN_OK) s = kiln_ranks_decode(buf, (size_t)h.payload_bytes, &call, err);
        kiln_free(buf);
        if (s != KILN_OK) return kiln_err_prefix(err, "rank %d", world->rank);
        kiln_gen_images outs[KILN_RANKS_MAX_CALLS];
        kiln_err why = {0};
        if (inner->generate_batch) s = inner->generate_batch(inner->self, call->ps, call->n, follow_progress, world, outs, &why);
        else s = inner->generate(inner->self, call->ps, follow_progress, world, outs, &why);
        /* rank 0 reports a failure to the client; the same call fails the same way here (same files, same
         * checks), so it is only logged */
        if (s != KILN_OK) log_info("rank %d: engine call %llu: %s", world->rank, (unsigned long long)calls, why.msg);
        else
            for (int i = 0; i < call->n; i++) kiln_free(outs[i].pixels);
        kiln_ranks_call_free(call);
    }
}

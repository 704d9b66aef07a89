/* mem_agree.h - the memory limit a request plans with when several ranks run it together: the tightest rank's.
 *
 *     kiln_mem_limit lim;
 *     KILN_TRY(kiln_engine_memory_limit(e, &lim, err));   // a collective of e->comm when it has > 1 rank
 *     ... plan with lim.bytes (0: no limit known) ...
 *     if (too_big) fail("... %.2f GB is available%s ...", lim.bytes / 1e9, kiln_mem_limit_where(&lim, buf, n));
 *
 * Why: every rank makes its own plan (the text encoder's release, the automatic VAE tile, accept or refuse) from
 * its memory. Ranks of unequal memory would make different plans and then meet in different collectives (a
 * refusing rank leaves the others in the DiT's all-to-all until KILN_COMM_TIMEOUT aborts the job; an untiled
 * rank 0 never joins the tiled ranks' distributed decode). Planning every rank with the MIN over the ranks of
 * (cfg.memory_limit, else kiln_mem_usable()) gives every rank the same plan: all accept, or all refuse with the
 * same error, which names the tightest rank. */
#ifndef KILN_PIPELINE_MEM_AGREE_H
#define KILN_PIPELINE_MEM_AGREE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/status.h"
#include "compute/comm.h"

typedef struct kiln_mem_limit {
    size_t bytes; /* the limit to plan with; 0: no rank knows its memory (no check, as on one rank) */
    int rank;     /* the tightest rank (the lowest one on a tie); 0 with one rank */
    int ranks;    /* the ranks that agreed (1: this process alone) */
    bool fixed;   /* every rank's limit was configured (cfg.memory_limit), so the agreement holds for good */
} kiln_mem_limit;

/* Agrees over c (a collective of every rank of c; none when c is NULL or has one rank): mine is this rank's
 * limit (0: unknown, which bounds nothing), fixed whether it is configured rather than measured. Every rank gets
 * the same *out. Errors: the communicator's (comm.h: a time-out aborts the job). */
kiln_status kiln_mem_limit_agree(kiln_comm *c, size_t mine, bool fixed, kiln_mem_limit *out, kiln_err *err);

/* " (rank R of P, the tightest)" when several ranks agreed, else "" - for the "... GB is available" messages.
 * Returns buf. */
const char *kiln_mem_limit_where(const kiln_mem_limit *l, char *buf, size_t cap);

struct kiln_engine;
/* The limit a request of engine e plans with: this rank's (cfg.memory_limit, else kiln_mem_usable()) on one
 * rank, the agreed one over e->comm on several. Called once per request, at the same point on every rank (the
 * start of validation, before any check can fail). Cached in the engine once every rank's limit is configured;
 * a measured limit (kiln_mem_usable: the page cache and other processes move it) is agreed again per request,
 * which costs P host broadcasts of 16 bytes next to seconds of work. */
kiln_status kiln_engine_memory_limit(struct kiln_engine *e, kiln_mem_limit *out, kiln_err *err);

/* This rank's limit alone, without any collective (kiln_estimate_memory: a query one rank may make alone). */
size_t kiln_engine_local_memory_limit(const struct kiln_engine *e);

#endif

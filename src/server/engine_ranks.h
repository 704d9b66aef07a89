/* engine_ranks.h - `kiln serve` over several MPI ranks (docs/parallel.md "A multi-rank server").
 *
 * Rank 0 runs the server; its engine is the lead wrapper, which broadcasts every engine call (ranks_wire.h) and
 * then runs it on the inner engine, which all ranks run together (the SP/TP engine, include/kiln.h). Every other
 * rank runs no server: kiln_ranks_follow receives each call and runs it on its own inner engine, until rank 0
 * broadcasts STOP.
 *
 *     kiln_comm *world;  kiln_comm_open(&world, &err);
 *     kiln_gen_engine *inner = kiln_server_engine_new(device);
 *     if (world->rank == 0) {
 *         kiln_gen_engine *lead = kiln_ranks_lead_new(world, inner);   // cfg.engine = lead; serve...
 *         kiln_ranks_lead_stop(lead);                                   // after kiln_server_stop: STOP to all
 *         kiln_ranks_lead_free(lead);
 *     } else kiln_ranks_follow(world, inner, &err);                     // returns on STOP
 *
 * Lockstep: the ranks make the same engine calls in the same order, so every collective inside them matches.
 * Cancellation (ComfyUI /interrupt) stays collective: after every denoising step rank 0 broadcasts whether to go
 * on, and every rank stops at the same step. The wait for the next call has no deadline (a server may idle for
 * days); inside a call the communicator's time-outs hold (KILN_COMM_TIMEOUT: a hung rank aborts the job).
 * Threads: rank 0's calls come from the worker thread, an unload from an HTTP thread and STOP from the main
 * thread; one lock serialises them (MPI is initialised MPI_THREAD_SERIALIZED).
 */
#ifndef KILN_SERVER_ENGINE_RANKS_H
#define KILN_SERVER_ENGINE_RANKS_H

#include "base/status.h"
#include "compute/comm.h"
#include "graph/engine.h"

/* The lead wrapper around inner (neither owned). NULL when out of memory. */
kiln_gen_engine *kiln_ranks_lead_new(kiln_comm *world, kiln_gen_engine *inner);
/* Broadcasts STOP (once; later calls and engine calls after it do nothing but fail). */
void kiln_ranks_lead_stop(kiln_gen_engine *lead);
void kiln_ranks_lead_free(kiln_gen_engine *lead); /* NULL allowed; does not stop */

/* Ranks > 0: follows rank 0's calls until STOP (KILN_OK). A message that fails its checks returns
 * KILN_E_FORMAT: the caller exits non-zero, which makes mpirun end the job (rank 0 cannot be told otherwise). */
kiln_status kiln_ranks_follow(kiln_comm *world, kiln_gen_engine *inner, kiln_err *err);

#endif

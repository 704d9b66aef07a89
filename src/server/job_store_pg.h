/* job_store_pg.h - the PostgreSQL job store behind job_store.h (kiln serve --queue postgresql://...), for many
 * kiln serve processes on many machines sharing one queue. Internal to job_store.c, which dispatches to it.
 *
 * What differs from SQLite, and why:
 *   - claims are `SELECT ... FOR UPDATE SKIP LOCKED` inside an UPDATE: two nodes never claim one job and never
 *     wait for each other's locks;
 *   - a claimed job carries owner (this process's node id) and lease_until_ms; a heartbeat thread renews the
 *     leases of this node's RUNNING jobs every lease/3 and requeues any RUNNING job whose lease has expired
 *     (a node that died: kill -9, power, network) - the RUNNING -> QUEUED recovery edge, taken by whichever
 *     node sees it first. Opening never requeues running jobs: other nodes may be running them;
 *   - finish is `... WHERE id AND state = running AND owner = me`: a node whose lease expired while it ran
 *     (and whose job another node now runs) cannot commit; the job completes exactly once;
 *   - closing (graceful stop) hands this node's RUNNING jobs back to the queue at once;
 *   - events: job adds NOTIFY kiln_jobs (idle workers wake), and the server's websocket events go through
 *     NOTIFY kiln_events, so a client on any node sees the events of a job run on any node;
 *   - the schema is versioned (table kiln_schema: one row per applied migration, applied under an advisory
 *     lock, so nodes starting together migrate once).
 * Threads: calls are serialised by one mutex on the main connection; the heartbeat and the listener each have
 * their own connection and thread. */
#ifndef KILN_SERVER_JOB_STORE_PG_H
#define KILN_SERVER_JOB_STORE_PG_H

#include "server/job_store.h"

typedef struct kiln_pg kiln_pg;

kiln_status kiln_pg_open(const char *conninfo, kiln_pg **out, kiln_err *err);
void kiln_pg_close(kiln_pg *pg);
kiln_status kiln_pg_add(kiln_pg *pg, const char *id, const char *kind, const char *client_id, const char *request,
                        bool front, int max_pending, int64_t *number, kiln_err *err);
kiln_status kiln_pg_claim(kiln_pg *pg, const char *id, kiln_job *out, kiln_err *err); /* id NULL: next */
kiln_status kiln_pg_transition(kiln_pg *pg, const char *id, kiln_job_state from, kiln_job_state to,
                               const char *result, const char *messages, const char *error,
                               const char *const *events, kiln_err *err); /* events: NULL-terminated, or NULL */
kiln_status kiln_pg_cancel_all(kiln_pg *pg, int *n, kiln_err *err);
kiln_status kiln_pg_get(kiln_pg *pg, const char *id, kiln_job *out, kiln_err *err);
kiln_status kiln_pg_list(kiln_pg *pg, unsigned state_mask, bool newest_first, int max, kiln_store_visit_fn fn,
                         void *ctx, kiln_err *err);
int kiln_pg_count(kiln_pg *pg, kiln_job_state s);
kiln_status kiln_pg_delete(kiln_pg *pg, const char *id, bool all_finished, kiln_err *err);
bool kiln_pg_publish(kiln_pg *pg, const char *channel, const char *payload);
void kiln_pg_on_event(kiln_pg *pg, kiln_store_event_fn fn, void *ctx);
void kiln_pg_set_lease(kiln_pg *pg, double lease_s);
const char *kiln_pg_node(const kiln_pg *pg);

#endif

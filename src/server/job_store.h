/* job_store.h - the durable job queue: one SQLite database (WAL) that holds every accepted job.
 *
 * An accepted job is never lost: kiln_store_add returns only after the row is committed, so a kill -9 at any
 * later moment leaves it on disk. On open, jobs found RUNNING (the process died under them) go back to QUEUED
 * and run again; finished jobs stay and are served as history until deleted.
 *
 * The job state machine (the only legal transitions; kiln_job_transition_ok checks them and every UPDATE is
 * guarded by the expected old state, so a transition that lost a race changes nothing and is reported):
 *
 *            add                claim                finish(ok)
 *     (none) ----> QUEUED ---------------> RUNNING -----------> SUCCEEDED
 *                    |  ^                   |  |  finish(error)
 *             cancel |  | recover (open     |  +--------------> FAILED
 *                    v  |  after a crash)   |     finish(stop)
 *                CANCELLED +----------------+  +--------------> INTERRUPTED
 *
 *   QUEUED    -> RUNNING      a worker claimed it (kiln_store_claim_next, or kiln_store_claim for a batch)
 *   QUEUED    -> CANCELLED    deleted from the queue before it started (POST /queue {delete}, {clear})
 *   RUNNING   -> SUCCEEDED    the executor finished and the outputs are saved
 *   RUNNING   -> FAILED       the executor reported an error (validation at run time, engine, disk)
 *   RUNNING   -> INTERRUPTED  POST /interrupt (or a cancel of the running job) stopped it
 *   RUNNING   -> QUEUED       only during kiln_store_open: the previous process died while it ran
 *                             (PostgreSQL: when the claim's lease expired, or its node closed the store)
 * SUCCEEDED, FAILED, CANCELLED and INTERRUPTED are final. Final jobs may be deleted (history delete/clear).
 *
 * Threads: a store may be used from any thread; calls are serialised by the store's own mutex.
 * Strings handed out in kiln_job belong to the job (kiln_job_clear frees them).
 */
#ifndef KILN_SERVER_JOB_STORE_H
#define KILN_SERVER_JOB_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"

typedef enum kiln_job_state {
    KILN_JOB_QUEUED = 0,
    KILN_JOB_RUNNING = 1,
    KILN_JOB_SUCCEEDED = 2,
    KILN_JOB_FAILED = 3,
    KILN_JOB_CANCELLED = 4,
    KILN_JOB_INTERRUPTED = 5,
    KILN_JOB_STATE_COUNT
} kiln_job_state;

/* "queued", "running", ... Never NULL. */
const char *kiln_job_state_name(kiln_job_state s);
/* true for a legal edge of the state machine above. */
bool kiln_job_transition_ok(kiln_job_state from, kiln_job_state to);
bool kiln_job_state_final(kiln_job_state s);

typedef struct kiln_job {
    int64_t number;      /* queue counter (ComfyUI's "number"); also the FIFO order */
    char id[64];         /* prompt_id: a lowercase UUID */
    char kind[16];       /* "comfy" | "openai" */
    kiln_job_state state;
    int front;           /* 1 = submitted with front:true (runs before the others) */
    int attempts;        /* how many times a worker claimed it (> 1 after a crash-restart) */
    char *client_id;     /* may be NULL */
    char *request;       /* JSON text as submitted (graph + extra data); never NULL for a loaded job */
    char *result;        /* JSON text of the outputs; NULL until finished */
    char *messages;      /* JSON array text of [event, data] pairs; NULL until finished */
    char *error;         /* JSON text of the error; NULL unless failed */
    int64_t created_ms, started_ms, finished_ms; /* Unix milliseconds; 0 when not yet */
} kiln_job;

void kiln_job_clear(kiln_job *job); /* frees the strings; the struct itself is the caller's */

typedef struct kiln_store kiln_store;

/* Opens (creating if needed) the database at path; ":memory:" works for tests; a "postgresql://" or
 * "postgres://" URI opens the shared PostgreSQL store (job_store_pg.h). Recovers crashed jobs (SQLite):
 * *recovered (may be NULL) receives how many RUNNING jobs went back to QUEUED. */
kiln_status kiln_store_open(const char *path, kiln_store **out, int *recovered, kiln_err *err);
void kiln_store_close(kiln_store *st); /* NULL allowed */

/* Adds a QUEUED job; commits before returning. id must be unique (KILN_E_INVALID if taken). When max_pending
 * > 0 and that many jobs are already QUEUED, refuses with KILN_E_LIMIT. *number receives the queue counter. */
kiln_status kiln_store_add(kiln_store *st, const char *id, const char *kind, const char *client_id,
                           const char *request_json, bool front, int max_pending, int64_t *number,
                           kiln_err *err);

/* Claims the next QUEUED job (front first, then by number) and marks it RUNNING. KILN_E_NOT_FOUND when the
 * queue is empty. */
kiln_status kiln_store_claim_next(kiln_store *st, kiln_job *out, kiln_err *err);
/* Claims job id (QUEUED -> RUNNING), for a worker batching it with the job it runs. KILN_E_NOT_FOUND when the
 * job is not queued (cancelled or claimed meanwhile). */
kiln_status kiln_store_claim(kiln_store *st, const char *id, kiln_job *out, kiln_err *err);

/* RUNNING -> final state, storing result/messages/error JSON (each may be NULL). KILN_E_INVALID when the
 * transition is not legal, KILN_E_NOT_FOUND when the job is not RUNNING (e.g. already finished). events
 * (NULL-terminated "kiln_events" payloads, or NULL): on a shared store they are published in the transaction
 * of the change, so they reach every node if and only if it commits; a store that is not shared ignores them
 * (the caller delivers its events locally). */
kiln_status kiln_store_finish(kiln_store *st, const char *id, kiln_job_state final_state, const char *result,
                              const char *messages, const char *error, const char *const *events, kiln_err *err);

/* QUEUED -> CANCELLED. KILN_E_NOT_FOUND when the job is not queued (running, finished or unknown). */
kiln_status kiln_store_cancel(kiln_store *st, const char *id, kiln_err *err);
/* Cancels every QUEUED job; *n (may be NULL) receives how many. */
kiln_status kiln_store_cancel_all(kiln_store *st, int *n, kiln_err *err);

/* Loads one job. KILN_E_NOT_FOUND when unknown. */
kiln_status kiln_store_get(kiln_store *st, const char *id, kiln_job *out, kiln_err *err);

/* Visits jobs whose state bit (1 << state) is in state_mask, in queue order (newest first when newest_first),
 * at most max (0 = all). The job passed to fn is valid only during the call. fn returns false to stop. */
typedef bool (*kiln_store_visit_fn)(void *ctx, const kiln_job *job);
kiln_status kiln_store_list(kiln_store *st, unsigned state_mask, bool newest_first, int max,
                            kiln_store_visit_fn fn, void *ctx, kiln_err *err);

/* Jobs in a state. */
int kiln_store_count(kiln_store *st, kiln_job_state s);

/* Deletes a final job (history delete). KILN_E_NOT_FOUND when unknown or not final. */
kiln_status kiln_store_delete(kiln_store *st, const char *id, kiln_err *err);
/* Deletes every final job (history clear). */
kiln_status kiln_store_delete_finished(kiln_store *st, kiln_err *err);

/* ---- many nodes (PostgreSQL: job_store_pg.h) -------------------------------------------------------------- */

/* true when the store is shared by several processes (PostgreSQL): the server then sends its websocket events
 * through kiln_store_publish so every node's clients get them. */
bool kiln_store_shared(const kiln_store *st);
/* Sends payload on channel ("kiln_events" | "kiln_jobs") to every node's listener, this one included. false
 * when the store is not shared or the payload is too long (NOTIFY's 8000 bytes): deliver it locally then. */
bool kiln_store_publish(kiln_store *st, const char *channel, const char *payload);
#define KILN_STORE_NOTICE_MAX 7900 /* the longest payload kiln_store_publish sends (PostgreSQL: 8000 bytes) */
/* Called from the store's listener thread for each notification (shared stores only). */
typedef void (*kiln_store_event_fn)(void *ctx, const char *channel, const char *payload);
void kiln_store_on_event(kiln_store *st, kiln_store_event_fn fn, void *ctx);
/* How long a claim holds without a heartbeat (default 30 s; shared stores only). */
void kiln_store_set_lease(kiln_store *st, double lease_s);

#define KILN_JOB_MASK(s) (1u << (s))
#define KILN_JOB_MASK_FINAL                                                                                   \
    (KILN_JOB_MASK(KILN_JOB_SUCCEEDED) | KILN_JOB_MASK(KILN_JOB_FAILED) | KILN_JOB_MASK(KILN_JOB_CANCELLED) | \
     KILN_JOB_MASK(KILN_JOB_INTERRUPTED))

#endif

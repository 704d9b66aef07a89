/* job_store.c - the SQLite job table and its state machine (see job_store.h). */
#include "server/job_store.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"
#include "server/job_store_pg.h"

struct kiln_store {
    sqlite3 *db;
    pthread_mutex_t mu;
    kiln_pg *pg; /* set: every call goes to the PostgreSQL store instead (job_store_pg.c) */
    int owner_fd; /* the SQLite file's owner lock (take_owner), held until close; -1: none (":memory:", PostgreSQL) */
};

static bool is_pg_uri(const char *path) {
    return !strncmp(path, "postgresql://", 13) || !strncmp(path, "postgres://", 11);
}

bool kiln_store_shared(const kiln_store *st) { return st && st->pg; }
bool kiln_store_publish(kiln_store *st, const char *channel, const char *payload) {
    return st && st->pg && kiln_pg_publish(st->pg, channel, payload);
}
void kiln_store_on_event(kiln_store *st, kiln_store_event_fn fn, void *ctx) {
    if (st && st->pg) kiln_pg_on_event(st->pg, fn, ctx);
}
void kiln_store_set_lease(kiln_store *st, double lease_s) {
    if (st && st->pg) kiln_pg_set_lease(st->pg, lease_s);
}

static const char *const state_names[KILN_JOB_STATE_COUNT] = {
    "queued", "running", "succeeded", "failed", "cancelled", "interrupted",
};

const char *kiln_job_state_name(kiln_job_state s) {
    return (unsigned)s < KILN_JOB_STATE_COUNT ? state_names[s] : "unknown";
}

bool kiln_job_state_final(kiln_job_state s) {
    return s == KILN_JOB_SUCCEEDED || s == KILN_JOB_FAILED || s == KILN_JOB_CANCELLED ||
           s == KILN_JOB_INTERRUPTED;
}

bool kiln_job_transition_ok(kiln_job_state from, kiln_job_state to) {
    switch (from) {
    case KILN_JOB_QUEUED: return to == KILN_JOB_RUNNING || to == KILN_JOB_CANCELLED;
    case KILN_JOB_RUNNING:
        return to == KILN_JOB_SUCCEEDED || to == KILN_JOB_FAILED || to == KILN_JOB_INTERRUPTED ||
               to == KILN_JOB_QUEUED; /* recovery only */
    default: return false;
    }
}

void kiln_job_clear(kiln_job *job) {
    if (!job) return;
    kiln_free(job->client_id);
    kiln_free(job->request);
    kiln_free(job->result);
    kiln_free(job->messages);
    kiln_free(job->error);
    memset(job, 0, sizeof *job);
}

static int64_t now_ms(void) { return (int64_t)(kiln_clock_wall_s() * 1000.0); }

static kiln_status db_fail(kiln_store *st, kiln_err *err, const char *what) {
    return KILN_FAIL(err, KILN_E_IO, "job store: %s: %s", what, sqlite3_errmsg(st->db));
}

static kiln_status exec_sql(kiln_store *st, const char *sql, kiln_err *err) {
    char *msg = NULL;
    if (sqlite3_exec(st->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        kiln_status s = KILN_FAIL(err, KILN_E_IO, "job store: %s: %s", sql, msg ? msg : "?");
        sqlite3_free(msg);
        return s;
    }
    return KILN_OK;
}

static const char *schema =
    "CREATE TABLE IF NOT EXISTS jobs("
    " number INTEGER PRIMARY KEY AUTOINCREMENT,"
    " id TEXT NOT NULL UNIQUE,"
    " kind TEXT NOT NULL,"
    " state INTEGER NOT NULL,"
    " front INTEGER NOT NULL DEFAULT 0,"
    " attempts INTEGER NOT NULL DEFAULT 0,"
    " client_id TEXT,"
    " request TEXT NOT NULL,"
    " result TEXT, messages TEXT, error TEXT,"
    " created_ms INTEGER NOT NULL, started_ms INTEGER NOT NULL DEFAULT 0, finished_ms INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state, front DESC, number);";

/* One process owns a SQLite queue: opening it queues again what was RUNNING (the last owner died), so a second
 * live server on the same file would re-run the first one's job, and run jobs submitted to the first whose
 * outputs then land in its own output folder, where the first one's /view cannot find them. An exclusive flock
 * on "<path>.owner" (released by the kernel when the owner dies, kill -9 included) refuses the second one by
 * name; the file holds the owner's pid for that message. flock, not fcntl: SQLite's own fcntl locks on the
 * database are per process and would be dropped by closing any other descriptor of the same file. */
static kiln_status take_owner(kiln_store *st, const char *path, kiln_err *err) {
    char lock[4200];
    if (snprintf(lock, sizeof lock, "%s.owner", path) >= (int)sizeof lock)
        return KILN_FAIL(err, KILN_E_LIMIT, "job store %s: path too long", path);
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return KILN_FAIL(err, KILN_E_IO, "job store %s: %s", lock, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char pid[32] = "";
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = 0;
        pid[strcspn(pid, "\n")] = 0;
        close(fd);
        if (e != EWOULDBLOCK) return KILN_FAIL(err, KILN_E_IO, "job store %s: lock: %s", lock, strerror(e));
        return KILN_FAIL(err, KILN_E_INVALID,
                         "job store %s is in use by another kiln serve (pid %s): one server per SQLite queue; give "
                         "this one its own --database (or --output/--user-dir), or share a PostgreSQL --queue",
                         path, pid[0] ? pid : "?");
    }
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n)
        log_warn("job store %s: could not record the owner's pid: %s", lock, strerror(errno)); /* the lock holds */
    st->owner_fd = fd;
    return KILN_OK;
}

kiln_status kiln_store_open(const char *path, kiln_store **out, int *recovered, kiln_err *err) {
    *out = NULL;
    if (recovered) *recovered = 0;
    kiln_store *st = kiln_calloc(1, sizeof *st);
    if (!st) return KILN_FAIL(err, KILN_E_NOMEM, "job store: out of memory");
    st->owner_fd = -1;
    pthread_mutex_init(&st->mu, NULL);
    if (is_pg_uri(path)) {
        kiln_status ps = kiln_pg_open(path, &st->pg, err);
        if (ps != KILN_OK) {
            kiln_store_close(st);
            return ps;
        }
        *out = st;
        return KILN_OK;
    }
    if (strcmp(path, ":memory:") != 0) {
        kiln_status ls = take_owner(st, path, err);
        if (ls != KILN_OK) {
            kiln_store_close(st);
            return ls;
        }
    }
    int rc = sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                             NULL);
    if (rc != SQLITE_OK) {
        kiln_status s = KILN_FAIL(err, KILN_E_IO, "job store %s: %s", path,
                                  st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc));
        kiln_store_close(st);
        return s;
    }
    sqlite3_busy_timeout(st->db, 5000);
    /* WAL + synchronous=NORMAL: a commit survives the death of the process (kill -9) because the WAL write
     * has reached the kernel; FULL would also survive power loss at the cost of an fsync per job. */
    kiln_status s = exec_sql(st, "PRAGMA journal_mode=WAL;", err);
    if (s == KILN_OK) s = exec_sql(st, "PRAGMA synchronous=NORMAL;", err);
    if (s == KILN_OK) s = exec_sql(st, schema, err);
    if (s == KILN_OK) {
        /* Recovery: the RUNNING -> QUEUED edge, legal only here. */
        char sql[128];
        snprintf(sql, sizeof sql, "UPDATE jobs SET state=%d WHERE state=%d;", KILN_JOB_QUEUED, KILN_JOB_RUNNING);
        s = exec_sql(st, sql, err);
        if (s == KILN_OK && recovered) *recovered = sqlite3_changes(st->db);
    }
    if (s != KILN_OK) {
        kiln_store_close(st);
        return s;
    }
    *out = st;
    return KILN_OK;
}

void kiln_store_close(kiln_store *st) {
    if (!st) return;
    if (st->db) sqlite3_close(st->db);
    if (st->owner_fd >= 0) close(st->owner_fd); /* the lock goes with it; the file stays (unlinking it would race
                                                  * a server opening it just now) */
    kiln_pg_close(st->pg);
    pthread_mutex_destroy(&st->mu);
    kiln_free(st);
}

static kiln_status prepare(kiln_store *st, const char *sql, sqlite3_stmt **stmt, kiln_err *err) {
    if (sqlite3_prepare_v2(st->db, sql, -1, stmt, NULL) != SQLITE_OK) return db_fail(st, err, "prepare");
    return KILN_OK;
}

static void bind_text(sqlite3_stmt *stmt, int i, const char *s) {
    if (s)
        sqlite3_bind_text(stmt, i, s, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(stmt, i);
}

static int count_locked(kiln_store *st, kiln_job_state s) {
    sqlite3_stmt *stmt;
    if (sqlite3_prepare_v2(st->db, "SELECT COUNT(*) FROM jobs WHERE state=?", -1, &stmt, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_int(stmt, 1, s);
    int n = sqlite3_step(stmt) == SQLITE_ROW ? sqlite3_column_int(stmt, 0) : -1;
    sqlite3_finalize(stmt);
    return n;
}

int kiln_store_count(kiln_store *st, kiln_job_state s) {
    if (st->pg) return kiln_pg_count(st->pg, s);
    pthread_mutex_lock(&st->mu);
    int n = count_locked(st, s);
    pthread_mutex_unlock(&st->mu);
    return n;
}

kiln_status kiln_store_add(kiln_store *st, const char *id, const char *kind, const char *client_id,
                           const char *request_json, bool front, int max_pending, int64_t *number,
                           kiln_err *err) {
    if (!id || !*id || strlen(id) >= sizeof((kiln_job *)0)->id)
        return KILN_FAIL(err, KILN_E_INVALID, "job id must be 1..63 characters");
    if (!kind || strlen(kind) >= sizeof((kiln_job *)0)->kind || !request_json)
        return KILN_FAIL(err, KILN_E_INVALID, "job kind and request are required");
    if (st->pg) return kiln_pg_add(st->pg, id, kind, client_id, request_json, front, max_pending, number, err);
    pthread_mutex_lock(&st->mu);
    kiln_status s = KILN_OK;
    sqlite3_stmt *stmt = NULL;
    if (max_pending > 0) {
        int n = count_locked(st, KILN_JOB_QUEUED);
        if (n < 0) {
            s = db_fail(st, err, "count");
            goto out;
        }
        if (n >= max_pending) {
            s = KILN_FAIL(err, KILN_E_LIMIT, "queue is full (%d pending jobs, limit %d)", n, max_pending);
            goto out;
        }
    }
    if ((s = prepare(st,
                     "INSERT INTO jobs(id, kind, state, front, client_id, request, created_ms) "
                     "VALUES(?,?,?,?,?,?,?)",
                     &stmt, err)) != KILN_OK)
        goto out;
    bind_text(stmt, 1, id);
    bind_text(stmt, 2, kind);
    sqlite3_bind_int(stmt, 3, KILN_JOB_QUEUED);
    sqlite3_bind_int(stmt, 4, front ? 1 : 0);
    bind_text(stmt, 5, client_id);
    bind_text(stmt, 6, request_json);
    sqlite3_bind_int64(stmt, 7, now_ms());
    int rc = sqlite3_step(stmt);
    if (rc == SQLITE_CONSTRAINT) {
        s = KILN_FAIL(err, KILN_E_INVALID, "a job with id %s already exists", id);
        goto out;
    }
    if (rc != SQLITE_DONE) {
        s = db_fail(st, err, "insert");
        goto out;
    }
    if (number) *number = sqlite3_last_insert_rowid(st->db);
out:
    sqlite3_finalize(stmt);
    pthread_mutex_unlock(&st->mu);
    return s;
}

static char *col_dup(sqlite3_stmt *stmt, int i) {
    const unsigned char *t = sqlite3_column_text(stmt, i);
    return t ? kiln_strdup((const char *)t) : NULL;
}

#define JOB_COLUMNS                                                                                           \
    "number, id, kind, state, front, attempts, client_id, request, result, messages, error, created_ms, "     \
    "started_ms, finished_ms"

/* Fills a job from a row selected with JOB_COLUMNS. */
static kiln_status load_row(sqlite3_stmt *stmt, kiln_job *j, kiln_err *err) {
    memset(j, 0, sizeof *j);
    j->number = sqlite3_column_int64(stmt, 0);
    const unsigned char *id = sqlite3_column_text(stmt, 1), *kind = sqlite3_column_text(stmt, 2);
    snprintf(j->id, sizeof j->id, "%s", id ? (const char *)id : "");
    snprintf(j->kind, sizeof j->kind, "%s", kind ? (const char *)kind : "");
    int state = sqlite3_column_int(stmt, 3);
    if (state < 0 || state >= KILN_JOB_STATE_COUNT)
        return KILN_FAIL(err, KILN_E_FORMAT, "job store: job %s has unknown state %d", j->id, state);
    j->state = (kiln_job_state)state;
    j->front = sqlite3_column_int(stmt, 4);
    j->attempts = sqlite3_column_int(stmt, 5);
    j->client_id = col_dup(stmt, 6);
    j->request = col_dup(stmt, 7);
    j->result = col_dup(stmt, 8);
    j->messages = col_dup(stmt, 9);
    j->error = col_dup(stmt, 10);
    j->created_ms = sqlite3_column_int64(stmt, 11);
    j->started_ms = sqlite3_column_int64(stmt, 12);
    j->finished_ms = sqlite3_column_int64(stmt, 13);
    if (!j->request) {
        kiln_job_clear(j);
        return KILN_FAIL(err, KILN_E_NOMEM, "job store: out of memory loading a job");
    }
    return KILN_OK;
}

/* QUEUED -> RUNNING for the next job (id NULL) or for job id, in one transaction. */
static kiln_status claim(kiln_store *st, const char *id, kiln_job *out, kiln_err *err) {
    if (st->pg) return kiln_pg_claim(st->pg, id, out, err);
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&st->mu);
    sqlite3_stmt *stmt = NULL;
    kiln_status s = exec_sql(st, "BEGIN IMMEDIATE;", err);
    if (s != KILN_OK) goto out;
    if ((s = prepare(st, id ? "SELECT " JOB_COLUMNS " FROM jobs WHERE state=? AND id=?"
                            : "SELECT " JOB_COLUMNS " FROM jobs WHERE state=? ORDER BY front DESC, number LIMIT 1",
                     &stmt, err)) != KILN_OK)
        goto rollback;
    sqlite3_bind_int(stmt, 1, KILN_JOB_QUEUED);
    if (id) bind_text(stmt, 2, id);
    int rc = sqlite3_step(stmt);
    if (rc == SQLITE_DONE) {
        s = id ? KILN_FAIL(err, KILN_E_NOT_FOUND, "job %s is not queued", id)
               : KILN_FAIL(err, KILN_E_NOT_FOUND, "queue is empty");
        goto rollback;
    }
    if (rc != SQLITE_ROW) {
        s = db_fail(st, err, "select next");
        goto rollback;
    }
    if ((s = load_row(stmt, out, err)) != KILN_OK) goto rollback;
    sqlite3_finalize(stmt);
    stmt = NULL;
    assert(kiln_job_transition_ok(out->state, KILN_JOB_RUNNING));
    if ((s = prepare(st, "UPDATE jobs SET state=?, attempts=attempts+1, started_ms=? WHERE id=? AND state=?",
                     &stmt, err)) != KILN_OK)
        goto rollback;
    int64_t t = now_ms();
    sqlite3_bind_int(stmt, 1, KILN_JOB_RUNNING);
    sqlite3_bind_int64(stmt, 2, t);
    bind_text(stmt, 3, out->id);
    sqlite3_bind_int(stmt, 4, KILN_JOB_QUEUED);
    if (sqlite3_step(stmt) != SQLITE_DONE || sqlite3_changes(st->db) != 1) {
        s = db_fail(st, err, "claim");
        goto rollback;
    }
    sqlite3_finalize(stmt);
    stmt = NULL;
    if ((s = exec_sql(st, "COMMIT;", err)) != KILN_OK) goto rollback;
    out->state = KILN_JOB_RUNNING;
    out->attempts++;
    out->started_ms = t;
    goto out;
rollback:
    sqlite3_finalize(stmt);
    stmt = NULL;
    sqlite3_exec(st->db, "ROLLBACK;", NULL, NULL, NULL);
    kiln_job_clear(out);
out:
    sqlite3_finalize(stmt);
    pthread_mutex_unlock(&st->mu);
    return s;
}

kiln_status kiln_store_claim_next(kiln_store *st, kiln_job *out, kiln_err *err) { return claim(st, NULL, out, err); }
kiln_status kiln_store_claim(kiln_store *st, const char *id, kiln_job *out, kiln_err *err) {
    return claim(st, id, out, err);
}

/* One guarded transition: UPDATE ... WHERE id=? AND state=from. */
static kiln_status transition(kiln_store *st, const char *id, kiln_job_state from, kiln_job_state to,
                              const char *result, const char *messages, const char *error,
                              const char *const *events, kiln_err *err) {
    if (!kiln_job_transition_ok(from, to))
        return KILN_FAIL(err, KILN_E_INVALID, "illegal job transition %s -> %s", kiln_job_state_name(from),
                         kiln_job_state_name(to));
    if (st->pg) return kiln_pg_transition(st->pg, id, from, to, result, messages, error, events, err);
    pthread_mutex_lock(&st->mu);
    sqlite3_stmt *stmt = NULL;
    kiln_status s = prepare(st,
                            "UPDATE jobs SET state=?, result=COALESCE(?, result), messages=COALESCE(?, messages),"
                            " error=COALESCE(?, error), finished_ms=? WHERE id=? AND state=?",
                            &stmt, err);
    if (s == KILN_OK) {
        sqlite3_bind_int(stmt, 1, to);
        bind_text(stmt, 2, result);
        bind_text(stmt, 3, messages);
        bind_text(stmt, 4, error);
        sqlite3_bind_int64(stmt, 5, now_ms());
        bind_text(stmt, 6, id);
        sqlite3_bind_int(stmt, 7, from);
        if (sqlite3_step(stmt) != SQLITE_DONE)
            s = db_fail(st, err, "update state");
        else if (sqlite3_changes(st->db) != 1)
            s = KILN_FAIL(err, KILN_E_NOT_FOUND, "job %s is not %s", id, kiln_job_state_name(from));
    }
    sqlite3_finalize(stmt);
    pthread_mutex_unlock(&st->mu);
    return s;
}

kiln_status kiln_store_finish(kiln_store *st, const char *id, kiln_job_state final_state, const char *result,
                              const char *messages, const char *error, const char *const *events, kiln_err *err) {
    if (!kiln_job_state_final(final_state) || final_state == KILN_JOB_CANCELLED)
        return KILN_FAIL(err, KILN_E_INVALID, "illegal job transition running -> %s",
                         kiln_job_state_name(final_state));
    return transition(st, id, KILN_JOB_RUNNING, final_state, result, messages, error, events, err);
}

kiln_status kiln_store_cancel(kiln_store *st, const char *id, kiln_err *err) {
    return transition(st, id, KILN_JOB_QUEUED, KILN_JOB_CANCELLED, NULL, NULL, NULL, NULL, err);
}

kiln_status kiln_store_cancel_all(kiln_store *st, int *n, kiln_err *err) {
    if (st->pg) return kiln_pg_cancel_all(st->pg, n, err);
    pthread_mutex_lock(&st->mu);
    char sql[160];
    snprintf(sql, sizeof sql, "UPDATE jobs SET state=%d, finished_ms=%lld WHERE state=%d;", KILN_JOB_CANCELLED,
             (long long)now_ms(), KILN_JOB_QUEUED);
    kiln_status s = exec_sql(st, sql, err);
    if (s == KILN_OK && n) *n = sqlite3_changes(st->db);
    pthread_mutex_unlock(&st->mu);
    return s;
}

kiln_status kiln_store_get(kiln_store *st, const char *id, kiln_job *out, kiln_err *err) {
    memset(out, 0, sizeof *out);
    if (st->pg) return kiln_pg_get(st->pg, id, out, err);
    pthread_mutex_lock(&st->mu);
    sqlite3_stmt *stmt = NULL;
    kiln_status s = prepare(st, "SELECT " JOB_COLUMNS " FROM jobs WHERE id=?", &stmt, err);
    if (s == KILN_OK) {
        bind_text(stmt, 1, id);
        int rc = sqlite3_step(stmt);
        if (rc == SQLITE_ROW)
            s = load_row(stmt, out, err);
        else if (rc == SQLITE_DONE)
            s = KILN_FAIL(err, KILN_E_NOT_FOUND, "no job %s", id);
        else
            s = db_fail(st, err, "get");
    }
    sqlite3_finalize(stmt);
    pthread_mutex_unlock(&st->mu);
    return s;
}

kiln_status kiln_store_list(kiln_store *st, unsigned state_mask, bool newest_first, int max,
                            kiln_store_visit_fn fn, void *ctx, kiln_err *err) {
    if (st->pg) return kiln_pg_list(st->pg, state_mask, newest_first, max, fn, ctx, err);
    pthread_mutex_lock(&st->mu);
    sqlite3_stmt *stmt = NULL;
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT " JOB_COLUMNS " FROM jobs WHERE ((1 << state) & ?) != 0 ORDER BY %s LIMIT ?",
             newest_first ? "number DESC" : "front DESC, number");
    kiln_status s = prepare(st, sql, &stmt, err);
    if (s == KILN_OK) {
        sqlite3_bind_int64(stmt, 1, (sqlite3_int64)state_mask);
        sqlite3_bind_int(stmt, 2, max > 0 ? max : -1);
        int rc;
        while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
            kiln_job j;
            if ((s = load_row(stmt, &j, err)) != KILN_OK) break;
            bool more = fn(ctx, &j);
            kiln_job_clear(&j);
            if (!more) break;
        }
        if (s == KILN_OK && rc != SQLITE_ROW && rc != SQLITE_DONE) s = db_fail(st, err, "list");
    }
    sqlite3_finalize(stmt);
    pthread_mutex_unlock(&st->mu);
    return s;
}

kiln_status kiln_store_delete(kiln_store *st, const char *id, kiln_err *err) {
    if (st->pg) return kiln_pg_delete(st->pg, id, false, err);
    pthread_mutex_lock(&st->mu);
    sqlite3_stmt *stmt = NULL;
    kiln_status s = prepare(st, "DELETE FROM jobs WHERE id=? AND state IN (?,?,?,?)", &stmt, err);
    if (s == KILN_OK) {
        bind_text(stmt, 1, id);
        sqlite3_bind_int(stmt, 2, KILN_JOB_SUCCEEDED);
        sqlite3_bind_int(stmt, 3, KILN_JOB_FAILED);
        sqlite3_bind_int(stmt, 4, KILN_JOB_CANCELLED);
        sqlite3_bind_int(stmt, 5, KILN_JOB_INTERRUPTED);
        if (sqlite3_step(stmt) != SQLITE_DONE)
            s = db_fail(st, err, "delete");
        else if (sqlite3_changes(st->db) != 1)
            s = KILN_FAIL(err, KILN_E_NOT_FOUND, "no finished job %s", id);
    }
    sqlite3_finalize(stmt);
    pthread_mutex_unlock(&st->mu);
    return s;
}

kiln_status kiln_store_delete_finished(kiln_store *st, kiln_err *err) {
    if (st->pg) return kiln_pg_delete(st->pg, NULL, true, err);
    pthread_mutex_lock(&st->mu);
    char sql[128];
    snprintf(sql, sizeof sql, "DELETE FROM jobs WHERE state IN (%d,%d,%d,%d);", KILN_JOB_SUCCEEDED,
             KILN_JOB_FAILED, KILN_JOB_CANCELLED, KILN_JOB_INTERRUPTED);
    kiln_status s = exec_sql(st, sql, err);
    pthread_mutex_unlock(&st->mu);
    return s;
}

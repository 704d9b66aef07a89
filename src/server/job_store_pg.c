/* job_store_pg.c - the PostgreSQL job store (see job_store_pg.h for what differs from SQLite and why). */
#include "server/job_store_pg.h"

#include <libpq-fe.h>
#include <openssl/rand.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/log.h"

struct kiln_pg {
    PGconn *db;          /* the calls' connection (mu) */
    pthread_mutex_t mu;
    char conninfo[2048];
    char node[40];       /* this process: owner of its claims */
    atomic_llong lease_ms;
    pthread_t beat, listen;
    bool beat_started, listen_started;
    atomic_bool stop;
    kiln_store_event_fn on_event;
    void *event_ctx;
    pthread_mutex_t ev_mu;
};

static int64_t now_ms(void) { return (int64_t)(kiln_clock_wall_s() * 1000.0); }

/* ---- connection and migrations ---------------------------------------------------------------------------- */

/* The error text without the connection string (it may hold a password) and on one line. */
static kiln_status pg_fail(PGconn *db, kiln_err *err, const char *what) {
    char msg[400];
    snprintf(msg, sizeof msg, "%s", db ? PQerrorMessage(db) : "no connection");
    for (char *p = msg; *p; p++)
        if (*p == '\n') *p = ' ';
    return KILN_FAIL(err, KILN_E_IO, "job store (postgresql): %s: %s", what, msg);
}

static kiln_status exec_ok(PGconn *db, PGresult *res, kiln_err *err, const char *what) {
    ExecStatusType t = PQresultStatus(res);
    kiln_status s = (t == PGRES_COMMAND_OK || t == PGRES_TUPLES_OK) ? KILN_OK : pg_fail(db, err, what);
    return s;
}

static kiln_status exec_sql(PGconn *db, const char *sql, kiln_err *err) {
    PGresult *res = PQexec(db, sql);
    kiln_status s = exec_ok(db, res, err, sql);
    PQclear(res);
    return s;
}

static PGconn *connect_db(const char *conninfo, kiln_err *err) {
    PGconn *db = PQconnectdb(conninfo);
    if (!db || PQstatus(db) != CONNECTION_OK) {
        pg_fail(db, err, "connect");
        PQfinish(db);
        return NULL;
    }
    PQclear(PQexec(db, "SET client_min_messages = warning"));
    return db;
}

/* Versioned migrations, applied in order once each; never edit one that shipped - add the next. */
static const char *const migrations[] = {
    /* 1: the jobs table (the SQLite columns, plus the claim's owner and lease) */
    "CREATE TABLE kiln_jobs("
    " number BIGSERIAL PRIMARY KEY,"
    " id TEXT NOT NULL UNIQUE,"
    " kind TEXT NOT NULL,"
    " state INTEGER NOT NULL,"
    " front INTEGER NOT NULL DEFAULT 0,"
    " attempts INTEGER NOT NULL DEFAULT 0,"
    " client_id TEXT,"
    " request TEXT NOT NULL,"
    " result TEXT, messages TEXT, error TEXT,"
    " created_ms BIGINT NOT NULL, started_ms BIGINT NOT NULL DEFAULT 0, finished_ms BIGINT NOT NULL DEFAULT 0,"
    " owner TEXT, lease_until_ms BIGINT NOT NULL DEFAULT 0);"
    "CREATE INDEX kiln_jobs_queue ON kiln_jobs(state, front DESC, number);",
};

static kiln_status migrate(PGconn *db, kiln_err *err) {
    kiln_status s = exec_sql(db, "BEGIN", err);
    /* one node migrates at a time: the others wait here, then find the versions applied */
    if (s == KILN_OK) s = exec_sql(db, "SELECT pg_advisory_xact_lock(7210301)", err);
    if (s == KILN_OK)
        s = exec_sql(db, "CREATE TABLE IF NOT EXISTS kiln_schema(version INTEGER PRIMARY KEY, applied_ms BIGINT NOT NULL)",
                     err);
    int have = 0;
    if (s == KILN_OK) {
        PGresult *res = PQexec(db, "SELECT COALESCE(MAX(version), 0) FROM kiln_schema");
        s = exec_ok(db, res, err, "schema version");
        if (s == KILN_OK) have = atoi(PQgetvalue(res, 0, 0));
        PQclear(res);
    }
    int n = (int)(sizeof migrations / sizeof migrations[0]);
    if (s == KILN_OK && have > n)
        s = KILN_FAIL(err, KILN_E_UNSUPPORTED, "job store (postgresql): schema version %d is newer than this kiln "
                      "(%d): upgrade kiln", have, n);
    for (int v = have + 1; s == KILN_OK && v <= n; v++) {
        s = exec_sql(db, migrations[v - 1], err);
        char sql[128];
        snprintf(sql, sizeof sql, "INSERT INTO kiln_schema VALUES(%d, %lld)", v, (long long)now_ms());
        if (s == KILN_OK) s = exec_sql(db, sql, err);
        if (s == KILN_OK) log_info("serve: job store schema migrated to version %d", v);
    }
    if (s == KILN_OK) return exec_sql(db, "COMMIT", err);
    PQclear(PQexec(db, "ROLLBACK"));
    return s;
}

/* ---- heartbeat and listener threads ---------------------------------------------------------------------- */

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Renews this node's leases; requeues the RUNNING jobs whose lease expired (their node is gone). */
static void *heartbeat_main(void *arg) {
    kiln_pg *pg = arg;
    PGconn *db = NULL;
    while (!atomic_load(&pg->stop)) {
        long long lease = atomic_load(&pg->lease_ms);
        if (!db || PQstatus(db) != CONNECTION_OK) {
            PQfinish(db);
            kiln_err err = {0};
            if (!(db = connect_db(pg->conninfo, &err))) log_warn("serve: heartbeat: %s", err.msg);
        }
        if (db) {
            char until[32], now[32], running[8], queued[8];
            snprintf(until, sizeof until, "%lld", (long long)now_ms() + lease);
            snprintf(now, sizeof now, "%lld", (long long)now_ms());
            snprintf(running, sizeof running, "%d", KILN_JOB_RUNNING);
            snprintf(queued, sizeof queued, "%d", KILN_JOB_QUEUED);
            const char *renew[] = {until, pg->node, running};
            PQclear(PQexecParams(db, "UPDATE kiln_jobs SET lease_until_ms=$1 WHERE owner=$2 AND state=$3", 3, NULL,
                                 renew, NULL, NULL, 0));
            const char *reap[] = {queued, running, now};
            PGresult *res = PQexecParams(db,
                                         "UPDATE kiln_jobs SET state=$1, owner=NULL, lease_until_ms=0 WHERE state=$2 "
                                         "AND lease_until_ms < $3 RETURNING id",
                                         3, NULL, reap, NULL, NULL, 0);
            if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) > 0) {
                log_warn("serve: %d job(s) whose node stopped renewing its lease were queued again", PQntuples(res));
                PQclear(PQexec(db, "NOTIFY kiln_jobs"));
            }
            PQclear(res);
        }
        int step = (int)(lease / 3 > 50 ? lease / 3 : 50);
        for (int t = 0; t < step && !atomic_load(&pg->stop); t += 50) sleep_ms(50);
    }
    PQfinish(db);
    return NULL;
}

/* LISTEN kiln_events, kiln_jobs; hands each notification to the server's callback. */
static void *listen_main(void *arg) {
    kiln_pg *pg = arg;
    PGconn *db = NULL;
    while (!atomic_load(&pg->stop)) {
        if (!db || PQstatus(db) != CONNECTION_OK) {
            PQfinish(db);
            kiln_err err = {0};
            db = connect_db(pg->conninfo, &err);
            if (db && (exec_sql(db, "LISTEN kiln_events", &err) != KILN_OK ||
                       exec_sql(db, "LISTEN kiln_jobs", &err) != KILN_OK)) {
                PQfinish(db);
                db = NULL;
            }
            if (!db) {
                log_warn("serve: event listener: %s", err.msg);
                sleep_ms(500);
                continue;
            }
        }
        struct pollfd pfd = {.fd = PQsocket(db), .events = POLLIN};
        if (poll(&pfd, 1, 200) > 0 && !PQconsumeInput(db)) continue; /* reconnects next round */
        PGnotify *n;
        while ((n = PQnotifies(db))) {
            /* called under ev_mu: once kiln_pg_on_event(NULL) returns, no callback runs (the server frees its
             * hub after that) */
            pthread_mutex_lock(&pg->ev_mu);
            if (pg->on_event) pg->on_event(pg->event_ctx, n->relname, n->extra ? n->extra : "");
            pthread_mutex_unlock(&pg->ev_mu);
            PQfreemem(n);
        }
    }
    PQfinish(db);
    return NULL;
}

/* ---- open / close ------------------------------------------------------------------------------------------ */

kiln_status kiln_pg_open(const char *conninfo, kiln_pg **out, kiln_err *err) {
    *out = NULL;
    if (strlen(conninfo) >= sizeof((kiln_pg *)0)->conninfo)
        return KILN_FAIL(err, KILN_E_INVALID, "job store (postgresql): the connection URI is too long");
    kiln_pg *pg = kiln_calloc(1, sizeof *pg);
    if (!pg) return KILN_FAIL(err, KILN_E_NOMEM, "job store: out of memory");
    pthread_mutex_init(&pg->mu, NULL);
    pthread_mutex_init(&pg->ev_mu, NULL);
    snprintf(pg->conninfo, sizeof pg->conninfo, "%s", conninfo);
    atomic_store(&pg->lease_ms, 30000);
    unsigned char b[8] = {0};
    RAND_bytes(b, sizeof b);
    snprintf(pg->node, sizeof pg->node, "node-%02x%02x%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5],
             b[6], b[7]);
    kiln_status s = (pg->db = connect_db(conninfo, err)) ? migrate(pg->db, err) : KILN_E_IO;
    if (s == KILN_OK) {
        pg->beat_started = pthread_create(&pg->beat, NULL, heartbeat_main, pg) == 0;
        pg->listen_started = pthread_create(&pg->listen, NULL, listen_main, pg) == 0;
        if (!pg->beat_started || !pg->listen_started) s = KILN_FAIL(err, KILN_E_NOMEM, "job store: no threads");
    }
    if (s != KILN_OK) {
        kiln_pg_close(pg);
        return s;
    }
    log_info("serve: job store on postgresql, this node is %s", pg->node);
    *out = pg;
    return KILN_OK;
}

void kiln_pg_close(kiln_pg *pg) {
    if (!pg) return;
    atomic_store(&pg->stop, true);
    if (pg->beat_started) pthread_join(pg->beat, NULL);
    if (pg->listen_started) pthread_join(pg->listen, NULL);
    if (pg->db && PQstatus(pg->db) == CONNECTION_OK) {
        /* a graceful stop: this node's running jobs go back to the queue now, not after the lease */
        char queued[8], running[8];
        snprintf(queued, sizeof queued, "%d", KILN_JOB_QUEUED);
        snprintf(running, sizeof running, "%d", KILN_JOB_RUNNING);
        const char *p[] = {queued, pg->node, running};
        PGresult *res = PQexecParams(pg->db, "UPDATE kiln_jobs SET state=$1, owner=NULL, lease_until_ms=0 "
                                     "WHERE owner=$2 AND state=$3", 3, NULL, p, NULL, NULL, 0);
        if (PQresultStatus(res) == PGRES_COMMAND_OK && atoi(PQcmdTuples(res)) > 0) {
            log_info("serve: %s job(s) this node was running handed back to the queue", PQcmdTuples(res));
            PQclear(PQexec(pg->db, "NOTIFY kiln_jobs"));
        }
        PQclear(res);
    }
    PQfinish(pg->db);
    pthread_mutex_destroy(&pg->mu);
    pthread_mutex_destroy(&pg->ev_mu);
    kiln_free(pg);
}

void kiln_pg_set_lease(kiln_pg *pg, double lease_s) {
    if (lease_s >= 1 && lease_s <= 3600) atomic_store(&pg->lease_ms, (long long)(lease_s * 1000));
}

const char *kiln_pg_node(const kiln_pg *pg) { return pg->node; }

void kiln_pg_on_event(kiln_pg *pg, kiln_store_event_fn fn, void *ctx) {
    pthread_mutex_lock(&pg->ev_mu);
    pg->on_event = fn;
    pg->event_ctx = ctx;
    pthread_mutex_unlock(&pg->ev_mu);
}

bool kiln_pg_publish(kiln_pg *pg, const char *channel, const char *payload) {
    if (strlen(payload) >= KILN_STORE_NOTICE_MAX) return false;
    pthread_mutex_lock(&pg->mu);
    const char *p[] = {channel, payload};
    PGresult *res = PQexecParams(pg->db, "SELECT pg_notify($1, $2)", 2, NULL, p, NULL, NULL, 0);
    bool ok = PQresultStatus(res) == PGRES_TUPLES_OK;
    PQclear(res);
    pthread_mutex_unlock(&pg->mu);
    return ok;
}

/* ---- rows -------------------------------------------------------------------------------------------------- */

#define JOB_COLUMNS                                                                                           \
    "number, id, kind, state, front, attempts, client_id, request, result, messages, error, created_ms, "     \
    "started_ms, finished_ms"

#define JOB_COLUMNS_J                                                                                         \
    "j.number, j.id, j.kind, j.state, j.front, j.attempts, j.client_id, j.request, j.result, j.messages, "   \
    "j.error, j.created_ms, j.started_ms, j.finished_ms"

static char *col_dup(PGresult *res, int row, int col) {
    return PQgetisnull(res, row, col) ? NULL : kiln_strdup(PQgetvalue(res, row, col));
}

static kiln_status load_row(PGresult *res, int row, kiln_job *j, kiln_err *err) {
    memset(j, 0, sizeof *j);
    j->number = strtoll(PQgetvalue(res, row, 0), NULL, 10);
    snprintf(j->id, sizeof j->id, "%s", PQgetvalue(res, row, 1));
    snprintf(j->kind, sizeof j->kind, "%s", PQgetvalue(res, row, 2));
    int state = atoi(PQgetvalue(res, row, 3));
    if (state < 0 || state >= KILN_JOB_STATE_COUNT)
        return KILN_FAIL(err, KILN_E_FORMAT, "job store: job %s has unknown state %d", j->id, state);
    j->state = (kiln_job_state)state;
    j->front = atoi(PQgetvalue(res, row, 4));
    j->attempts = atoi(PQgetvalue(res, row, 5));
    j->client_id = col_dup(res, row, 6);
    j->request = col_dup(res, row, 7);
    j->result = col_dup(res, row, 8);
    j->messages = col_dup(res, row, 9);
    j->error = col_dup(res, row, 10);
    j->created_ms = strtoll(PQgetvalue(res, row, 11), NULL, 10);
    j->started_ms = strtoll(PQgetvalue(res, row, 12), NULL, 10);
    j->finished_ms = strtoll(PQgetvalue(res, row, 13), NULL, 10);
    if (!j->request) {
        kiln_job_clear(j);
        return KILN_FAIL(err, KILN_E_NOMEM, "job store: out of memory loading a job");
    }
    return KILN_OK;
}

/* One parameterised statement on the calls' connection (the caller holds mu). */
static PGresult *run(kiln_pg *pg, const char *sql, int n, const char *const *params) {
    if (PQstatus(pg->db) != CONNECTION_OK) PQreset(pg->db); /* the server restarted: one reconnect per call */
    return PQexecParams(pg->db, sql, n, NULL, params, NULL, NULL, 0);
}

#define INT_STR(name, v)                                                                                      \
    char name[24];                                                                                            \
    snprintf(name, sizeof name, "%lld", (long long)(v))

int kiln_pg_count(kiln_pg *pg, kiln_job_state s) {
    INT_STR(st, s);
    const char *p[] = {st};
    pthread_mutex_lock(&pg->mu);
    PGresult *res = run(pg, "SELECT COUNT(*) FROM kiln_jobs WHERE state=$1", 1, p);
    int n = PQresultStatus(res) == PGRES_TUPLES_OK ? atoi(PQgetvalue(res, 0, 0)) : -1;
    PQclear(res);
    pthread_mutex_unlock(&pg->mu);
    return n;
}

kiln_status kiln_pg_add(kiln_pg *pg, const char *id, const char *kind, const char *client_id, const char *request,
                        bool front, int max_pending, int64_t *number, kiln_err *err) {
    if (max_pending > 0) {
        int n = kiln_pg_count(pg, KILN_JOB_QUEUED);
        if (n < 0) return pg_fail(pg->db, err, "count");
        if (n >= max_pending)
            return KILN_FAIL(err, KILN_E_LIMIT, "queue is full (%d pending jobs, limit %d)", n, max_pending);
    }
    INT_STR(st, KILN_JOB_QUEUED);
    INT_STR(fr, front ? 1 : 0);
    INT_STR(now, now_ms());
    const char *p[] = {id, kind, st, fr, client_id, request, now};
    pthread_mutex_lock(&pg->mu);
    PGresult *res = run(pg,
                        "INSERT INTO kiln_jobs(id, kind, state, front, client_id, request, created_ms) "
                        "VALUES($1,$2,$3,$4,$5,$6,$7) ON CONFLICT (id) DO NOTHING RETURNING number",
                        7, p);
    kiln_status s = exec_ok(pg->db, res, err, "insert");
    if (s == KILN_OK && PQntuples(res) != 1) s = KILN_FAIL(err, KILN_E_INVALID, "a job with id %s already exists", id);
    if (s == KILN_OK && number) *number = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    if (s == KILN_OK) PQclear(run(pg, "NOTIFY kiln_jobs", 0, NULL)); /* idle workers on every node wake */
    pthread_mutex_unlock(&pg->mu);
    return s;
}

kiln_status kiln_pg_claim(kiln_pg *pg, const char *id, kiln_job *out, kiln_err *err) {
    memset(out, 0, sizeof *out);
    INT_STR(running, KILN_JOB_RUNNING);
    INT_STR(queued, KILN_JOB_QUEUED);
    INT_STR(now, now_ms());
    INT_STR(until, now_ms() + atomic_load(&pg->lease_ms));
    const char *p[] = {running, now, pg->node, until, queued, id};
    /* the row is locked by the inner SELECT; SKIP LOCKED passes over rows another node is claiming right now */
    const char *sql =
        id ? "UPDATE kiln_jobs j SET state=$1, attempts=attempts+1, started_ms=$2, owner=$3, lease_until_ms=$4 "
             "FROM (SELECT number FROM kiln_jobs WHERE state=$5 AND id=$6 FOR UPDATE SKIP LOCKED) c "
             "WHERE j.number=c.number RETURNING " JOB_COLUMNS_J
           : "UPDATE kiln_jobs j SET state=$1, attempts=attempts+1, started_ms=$2, owner=$3, lease_until_ms=$4 "
             "FROM (SELECT number FROM kiln_jobs WHERE state=$5 ORDER BY front DESC, number LIMIT 1 "
             "FOR UPDATE SKIP LOCKED) c WHERE j.number=c.number RETURNING " JOB_COLUMNS_J;
    pthread_mutex_lock(&pg->mu);
    PGresult *res = run(pg, sql, id ? 6 : 5, p);
    kiln_status s = exec_ok(pg->db, res, err, "claim");
    if (s == KILN_OK && PQntuples(res) != 1)
        s = id ? KILN_FAIL(err, KILN_E_NOT_FOUND, "job %s is not queued", id)
               : KILN_FAIL(err, KILN_E_NOT_FOUND, "queue is empty");
    if (s == KILN_OK) s = load_row(res, 0, out, err);
    PQclear(res);
    pthread_mutex_unlock(&pg->mu);
    return s;
}

/* One statement inside a transaction: no reconnect (a new connection would run the rest outside it). */
static PGresult *run_in_tx(kiln_pg *pg, const char *sql, int n, const char *const *params) {
    return PQexecParams(pg->db, sql, n, NULL, params, NULL, NULL, 0);
}

/* Ends the transaction begun for a transition with events: COMMIT when s is KILN_OK, else ROLLBACK. */
static kiln_status end_transaction(kiln_pg *pg, kiln_status s, kiln_err *err) {
    if (s != KILN_OK) {
        PQclear(run_in_tx(pg, "ROLLBACK", 0, NULL));
        return s;
    }
    PGresult *res = run_in_tx(pg, "COMMIT", 0, NULL);
    s = exec_ok(pg->db, res, err, "commit");
    PQclear(res);
    return s;
}

kiln_status kiln_pg_transition(kiln_pg *pg, const char *id, kiln_job_state from, kiln_job_state to,
                               const char *result, const char *messages, const char *error,
                               const char *const *events, kiln_err *err) {
    INT_STR(to_s, to);
    INT_STR(from_s, from);
    INT_STR(now, now_ms());
    /* leaving RUNNING is this node's to do only while it owns the claim: the result is committed once */
    const char *p[] = {to_s, result, messages, error, now, id, from_s, pg->node};
    const char *sql = from == KILN_JOB_RUNNING
                          ? "UPDATE kiln_jobs SET state=$1, result=COALESCE($2, result), messages=COALESCE($3, "
                            "messages), error=COALESCE($4, error), finished_ms=$5, owner=NULL WHERE id=$6 AND "
                            "state=$7 AND owner=$8"
                          : "UPDATE kiln_jobs SET state=$1, result=COALESCE($2, result), messages=COALESCE($3, "
                            "messages), error=COALESCE($4, error), finished_ms=$5 WHERE id=$6 AND state=$7";
    /* events go out in the transaction of the state change: NOTIFY is delivered at COMMIT, so every node's
     * clients get them exactly when the change is durable - a node killed right after its commit cannot have
     * committed a job whose final events nobody will ever see */
    bool with_events = events && events[0];
    for (int i = 0; with_events && events[i]; i++)
        if (strlen(events[i]) >= KILN_STORE_NOTICE_MAX)
            return KILN_FAIL(err, KILN_E_LIMIT, "job store (postgresql): an event of %zu bytes is too long for a "
                             "notification", strlen(events[i]));
    pthread_mutex_lock(&pg->mu);
    kiln_status s = KILN_OK;
    if (with_events) {
        PGresult *res = run(pg, "BEGIN", 0, NULL);
        s = exec_ok(pg->db, res, err, "begin");
        PQclear(res);
    }
    if (s == KILN_OK) {
        int n = from == KILN_JOB_RUNNING ? 8 : 7;
        PGresult *res = with_events ? run_in_tx(pg, sql, n, p) : run(pg, sql, n, p);
        s = exec_ok(pg->db, res, err, "update state");
        if (s == KILN_OK && atoi(PQcmdTuples(res)) != 1)
            s = KILN_FAIL(err, KILN_E_NOT_FOUND, "job %s is not %s%s", id, kiln_job_state_name(from),
                          from == KILN_JOB_RUNNING ? " on this node" : "");
        PQclear(res);
    }
    for (int i = 0; with_events && s == KILN_OK && events[i]; i++) {
        PGresult *res = run_in_tx(pg, "SELECT pg_notify('kiln_events', $1)", 1, &events[i]);
        s = exec_ok(pg->db, res, err, "notify");
        PQclear(res);
    }
    if (with_events) s = end_transaction(pg, s, err);
    pthread_mutex_unlock(&pg->mu);
    return s;
}

kiln_status kiln_pg_cancel_all(kiln_pg *pg, int *n, kiln_err *err) {
    INT_STR(c, KILN_JOB_CANCELLED);
    INT_STR(now, now_ms());
    INT_STR(q, KILN_JOB_QUEUED);
    const char *p[] = {c, now, q};
    pthread_mutex_lock(&pg->mu);
    PGresult *res = run(pg, "UPDATE kiln_jobs SET state=$1, finished_ms=$2 WHERE state=$3", 3, p);
    kiln_status s = exec_ok(pg->db, res, err, "cancel all");
    if (s == KILN_OK && n) *n = atoi(PQcmdTuples(res));
    PQclear(res);
    pthread_mutex_unlock(&pg->mu);
    return s;
}

kiln_status kiln_pg_get(kiln_pg *pg, const char *id, kiln_job *out, kiln_err *err) {
    memset(out, 0, sizeof *out);
    const char *p[] = {id};
    pthread_mutex_lock(&pg->mu);
    PGresult *res = run(pg, "SELECT " JOB_COLUMNS " FROM kiln_jobs WHERE id=$1", 1, p);
    kiln_status s = exec_ok(pg->db, res, err, "get");
    if (s == KILN_OK)
        s = PQntuples(res) == 1 ? load_row(res, 0, out, err) : KILN_FAIL(err, KILN_E_NOT_FOUND, "no job %s", id);
    PQclear(res);
    pthread_mutex_unlock(&pg->mu);
    return s;
}

kiln_status kiln_pg_list(kiln_pg *pg, unsigned state_mask, bool newest_first, int max, kiln_store_visit_fn fn,
                         void *ctx, kiln_err *err) {
    INT_STR(mask, state_mask);
    INT_STR(lim, max);
    const char *p[] = {mask, max > 0 ? lim : NULL};
    char sql[300];
    snprintf(sql, sizeof sql, "SELECT " JOB_COLUMNS " FROM kiln_jobs WHERE ((1 << state) & $1::int) != 0 ORDER BY %s "
             "LIMIT $2::bigint", newest_first ? "number DESC" : "front DESC, number");
    pthread_mutex_lock(&pg->mu);
    PGresult *res = run(pg, sql, 2, p);
    kiln_status s = exec_ok(pg->db, res, err, "list");
    pthread_mutex_unlock(&pg->mu); /* the rows are ours now: visit them without the lock */
    for (int i = 0; s == KILN_OK && i < PQntuples(res); i++) {
        kiln_job j;
        if ((s = load_row(res, i, &j, err)) != KILN_OK) break;
        bool more = fn(ctx, &j);
        kiln_job_clear(&j);
        if (!more) break;
    }
    PQclear(res);
    return s;
}

kiln_status kiln_pg_delete(kiln_pg *pg, const char *id, bool all_finished, kiln_err *err) {
    char fin[64];
    snprintf(fin, sizeof fin, "{%d,%d,%d,%d}", KILN_JOB_SUCCEEDED, KILN_JOB_FAILED, KILN_JOB_CANCELLED,
             KILN_JOB_INTERRUPTED);
    const char *p[] = {fin, id};
    pthread_mutex_lock(&pg->mu);
    PGresult *res = all_finished ? run(pg, "DELETE FROM kiln_jobs WHERE state = ANY($1::int[])", 1, p)
                                 : run(pg, "DELETE FROM kiln_jobs WHERE state = ANY($1::int[]) AND id=$2", 2, p);
    kiln_status s = exec_ok(pg->db, res, err, "delete");
    if (s == KILN_OK && !all_finished && atoi(PQcmdTuples(res)) != 1)
        s = KILN_FAIL(err, KILN_E_NOT_FOUND, "no finished job %s", id);
    PQclear(res);
    pthread_mutex_unlock(&pg->mu);
    return s;
}

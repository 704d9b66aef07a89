/* test_server_store.c - the durable job queue: state machine, ordering, limits, and survival of kill -9. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "server/job_store.h"
#include "test.h"

static char db_path[256];

static void fresh_path(const char *tag) {
    snprintf(db_path, sizeof db_path, "/tmp/kiln-test-store-%s-%d.db", tag, (int)getpid());
    char p[300];
    unlink(db_path);
    snprintf(p, sizeof p, "%s-wal", db_path);
    unlink(p);
    snprintf(p, sizeof p, "%s-shm", db_path);
    unlink(p);
    snprintf(p, sizeof p, "%s.owner", db_path);
    unlink(p);
}

static void cleanup(void) {
    char p[300];
    unlink(db_path);
    snprintf(p, sizeof p, "%s-wal", db_path);
    unlink(p);
    snprintf(p, sizeof p, "%s-shm", db_path);
    unlink(p);
    snprintf(p, sizeof p, "%s.owner", db_path);
    unlink(p);
}

static void test_transitions_table(void) {
    CHECK(kiln_job_transition_ok(KILN_JOB_QUEUED, KILN_JOB_RUNNING));
    CHECK(kiln_job_transition_ok(KILN_JOB_QUEUED, KILN_JOB_CANCELLED));
    CHECK(!kiln_job_transition_ok(KILN_JOB_QUEUED, KILN_JOB_SUCCEEDED));
    CHECK(kiln_job_transition_ok(KILN_JOB_RUNNING, KILN_JOB_SUCCEEDED));
    CHECK(kiln_job_transition_ok(KILN_JOB_RUNNING, KILN_JOB_FAILED));
    CHECK(kiln_job_transition_ok(KILN_JOB_RUNNING, KILN_JOB_INTERRUPTED));
    CHECK(!kiln_job_transition_ok(KILN_JOB_RUNNING, KILN_JOB_CANCELLED));
    for (int f = KILN_JOB_SUCCEEDED; f < KILN_JOB_STATE_COUNT; f++)
        for (int t = 0; t < KILN_JOB_STATE_COUNT; t++) CHECK(!kiln_job_transition_ok(f, t));
    /* final = no way out: what /history reports as done and what a waiting client stops waiting for */
    for (int st = 0; st < KILN_JOB_STATE_COUNT; st++)
        CHECK_MSG(kiln_job_state_final((kiln_job_state)st) == (st >= KILN_JOB_SUCCEEDED), "state %s",
                  kiln_job_state_name((kiln_job_state)st));
    CHECK_EQ_STR(kiln_job_state_name(KILN_JOB_INTERRUPTED), "interrupted");
    CHECK_EQ_STR(kiln_job_state_name((kiln_job_state)77), "unknown");
}

static void test_fifo_front_and_lifecycle(void) {
    kiln_err err = {0};
    kiln_store *st;
    CHECK_EQ_INT(kiln_store_open(":memory:", &st, NULL, &err), KILN_OK);
    int64_t n1, n2, n3;
    CHECK_EQ_INT(kiln_store_add(st, "a", "comfy", "c1", "{\"x\":1}", false, 0, &n1, &err), KILN_OK);
    CHECK_EQ_INT(kiln_store_add(st, "b", "comfy", NULL, "{}", false, 0, &n2, &err), KILN_OK);
    CHECK_EQ_INT(kiln_store_add(st, "c", "openai", NULL, "{}", true, 0, &n3, &err), KILN_OK);
    CHECK(n1 < n2 && n2 < n3);
    CHECK_EQ_INT(kiln_store_add(st, "a", "comfy", NULL, "{}", false, 0, NULL, &err), KILN_E_INVALID);
    CHECK_ERR_CONTAINS(&err, "already exists");
    CHECK_EQ_INT(kiln_store_count(st, KILN_JOB_QUEUED), 3);

    kiln_job j;
    CHECK_EQ_INT(kiln_store_claim_next(st, &j, &err), KILN_OK); /* front:true first */
    CHECK_EQ_STR(j.id, "c");
    CHECK_EQ_INT(j.state, KILN_JOB_RUNNING);
    CHECK_EQ_INT(j.attempts, 1);
    CHECK_EQ_INT(kiln_store_finish(st, "c", KILN_JOB_SUCCEEDED, "{\"o\":1}", "[]", NULL, NULL, &err), KILN_OK);
    /* a second finish of the same job is refused: it is no longer running */
    CHECK_EQ_INT(kiln_store_finish(st, "c", KILN_JOB_FAILED, NULL, NULL, "{}", NULL, &err), KILN_E_NOT_FOUND);
    CHECK_EQ_INT(kiln_store_finish(st, "c", KILN_JOB_CANCELLED, NULL, NULL, NULL, NULL, &err), KILN_E_INVALID);
    kiln_job_clear(&j);

    CHECK_EQ_INT(kiln_store_claim_next(st, &j, &err), KILN_OK);
    CHECK_EQ_STR(j.id, "a");
    CHECK_EQ_STR(j.client_id, "c1");
    CHECK_EQ_STR(j.request, "{\"x\":1}");
    CHECK_EQ_INT(kiln_store_cancel(st, "a", &err), KILN_E_NOT_FOUND); /* running: cancel is not legal */
    CHECK_EQ_INT(kiln_store_finish(st, "a", KILN_JOB_INTERRUPTED, NULL, "[]", NULL, NULL, &err), KILN_OK);
    kiln_job_clear(&j);

    CHECK_EQ_INT(kiln_store_cancel(st, "b", &err), KILN_OK);
    CHECK_EQ_INT(kiln_store_claim_next(st, &j, &err), KILN_E_NOT_FOUND);

    kiln_job g;
    CHECK_EQ_INT(kiln_store_get(st, "c", &g, &err), KILN_OK);
    CHECK_EQ_INT(g.state, KILN_JOB_SUCCEEDED);
    CHECK_EQ_STR(g.result, "{\"o\":1}");
    CHECK(g.finished_ms >= g.started_ms && g.started_ms >= g.created_ms);
    kiln_job_clear(&g);
    CHECK_EQ_INT(kiln_store_get(st, "zzz", &g, &err), KILN_E_NOT_FOUND);

    CHECK_EQ_INT(kiln_store_delete(st, "c", &err), KILN_OK);
    CHECK_EQ_INT(kiln_store_delete(st, "c", &err), KILN_E_NOT_FOUND);
    CHECK_EQ_INT(kiln_store_delete_finished(st, &err), KILN_OK);
    CHECK_EQ_INT(kiln_store_count(st, KILN_JOB_CANCELLED), 0);
    kiln_store_close(st);
}

static bool count_visit(void *ctx, const kiln_job *j) {
    (void)j;
    ++*(int *)ctx;
    return true;
}

static void test_queue_limit_and_list(void) {
    kiln_err err = {0};
    kiln_store *st;
    CHECK_EQ_INT(kiln_store_open(":memory:", &st, NULL, &err), KILN_OK);
    char id[32];
    for (int i = 0; i < 5; i++) {
        snprintf(id, sizeof id, "j%d", i);
        CHECK_EQ_INT(kiln_store_add(st, id, "comfy", NULL, "{}", false, 5, NULL, &err), KILN_OK);
    }
    CHECK_EQ_INT(kiln_store_add(st, "j5", "comfy", NULL, "{}", false, 5, NULL, &err), KILN_E_LIMIT);
    CHECK_ERR_CONTAINS(&err, "queue is full");
    int n = 0;
    CHECK_EQ_INT(kiln_store_list(st, KILN_JOB_MASK(KILN_JOB_QUEUED), false, 3, count_visit, &n, &err), KILN_OK);
    CHECK_EQ_INT(n, 3);
    int cancelled = 0;
    CHECK_EQ_INT(kiln_store_cancel_all(st, &cancelled, &err), KILN_OK);
    CHECK_EQ_INT(cancelled, 5);
    CHECK_EQ_INT(kiln_store_add(st, "j5", "comfy", NULL, "{}", false, 5, NULL, &err), KILN_OK);
    CHECK_EQ_INT(kiln_store_add(st, "", "comfy", NULL, "{}", false, 5, NULL, &err), KILN_E_INVALID);
    kiln_store_close(st);
}

/* A child process accepts jobs, starts one, and is killed with SIGKILL mid-run. The parent reopens the file:
 * the running job is queued again (attempts 1 -> runs a second time), the queued ones are there, the finished
 * one is still history. */
static void test_kill9_recovery(void) {
    fresh_path("kill9");
    int pipefd[2];
    CHECK(pipe(pipefd) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(pipefd[0]);
        kiln_err err = {0};
        kiln_store *st;
        if (kiln_store_open(db_path, &st, NULL, &err) != KILN_OK) _exit(10);
        if (kiln_store_add(st, "done", "comfy", NULL, "{\"n\":0}", false, 0, NULL, &err)) _exit(11);
        kiln_job j;
        if (kiln_store_claim_next(st, &j, &err) || kiln_store_finish(st, "done", KILN_JOB_SUCCEEDED, "{\"ok\":1}",
                                                                     "[]", NULL, NULL, &err))
            _exit(12);
        kiln_job_clear(&j);
        if (kiln_store_add(st, "run", "comfy", NULL, "{\"n\":1}", false, 0, NULL, &err)) _exit(13);
        if (kiln_store_add(st, "wait", "comfy", NULL, "{\"n\":2}", false, 0, NULL, &err)) _exit(14);
        if (kiln_store_claim_next(st, &j, &err)) _exit(15);
        if (write(pipefd[1], "k", 1) != 1) _exit(16);
        for (;;) pause(); /* "running" until killed */
    }
    close(pipefd[1]);
    char c = 0;
    CHECK(read(pipefd[0], &c, 1) == 1 && c == 'k');
    close(pipefd[0]);
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    kiln_err err = {0};
    kiln_store *st;
    int recovered = -1;
    CHECK_EQ_INT(kiln_store_open(db_path, &st, &recovered, &err), KILN_OK);
    CHECK_EQ_INT(recovered, 1);
    kiln_job j;
    CHECK_EQ_INT(kiln_store_get(st, "done", &j, &err), KILN_OK);
    CHECK_EQ_INT(j.state, KILN_JOB_SUCCEEDED);
    CHECK_EQ_STR(j.result, "{\"ok\":1}");
    kiln_job_clear(&j);
    CHECK_EQ_INT(kiln_store_claim_next(st, &j, &err), KILN_OK);
    CHECK_EQ_STR(j.id, "run"); /* keeps its place at the head of the queue */
    CHECK_EQ_INT(j.attempts, 2);
    CHECK_EQ_INT(kiln_store_finish(st, "run", KILN_JOB_SUCCEEDED, "{}", "[]", NULL, NULL, &err), KILN_OK);
    kiln_job_clear(&j);
    CHECK_EQ_INT(kiln_store_claim_next(st, &j, &err), KILN_OK);
    CHECK_EQ_STR(j.id, "wait");
    CHECK_EQ_INT(j.attempts, 1);
    kiln_job_clear(&j);
    kiln_store_close(st);
    cleanup();
}

/* kiln_store_claim: a worker batching jobs claims them by id, each a guarded QUEUED -> RUNNING. */
static void test_claim_by_id(void) {
    kiln_err err = {0};
    kiln_store *st;
    CHECK_EQ_INT(kiln_store_open(":memory:", &st, NULL, &err), KILN_OK);
    CHECK_EQ_INT(kiln_store_add(st, "a", "comfy", NULL, "{}", false, 0, NULL, &err), KILN_OK);
    CHECK_EQ_INT(kiln_store_add(st, "b", "comfy", "cb", "{\"b\":1}", false, 0, NULL, &err), KILN_OK);
    CHECK_EQ_INT(kiln_store_add(st, "c", "comfy", NULL, "{}", false, 0, NULL, &err), KILN_OK);
    kiln_job j;
    CHECK_EQ_INT(kiln_store_claim(st, "b", &j, &err), KILN_OK); /* out of FIFO order, by id */
    CHECK_EQ_STR(j.id, "b");
    CHECK_EQ_STR(j.client_id, "cb");
    CHECK_EQ_INT(j.state, KILN_JOB_RUNNING);
    CHECK_EQ_INT(j.attempts, 1);
    kiln_job_clear(&j);
    CHECK_EQ_INT(kiln_store_claim(st, "b", &j, &err), KILN_E_NOT_FOUND); /* already running */
    CHECK_ERR_CONTAINS(&err, "not queued");
    CHECK_EQ_INT(kiln_store_cancel(st, "c", &err), KILN_OK);
    CHECK_EQ_INT(kiln_store_claim(st, "c", &j, &err), KILN_E_NOT_FOUND); /* cancelled meanwhile */
    CHECK_EQ_INT(kiln_store_claim(st, "zz", &j, &err), KILN_E_NOT_FOUND);
    CHECK_EQ_INT(kiln_store_claim_next(st, &j, &err), KILN_OK); /* the rest of the queue is untouched */
    CHECK_EQ_STR(j.id, "a");
    kiln_job_clear(&j);
    CHECK_EQ_INT(kiln_store_count(st, KILN_JOB_RUNNING), 2);
    CHECK_EQ_INT(kiln_store_finish(st, "b", KILN_JOB_SUCCEEDED, "{}", "[]", NULL, NULL, &err), KILN_OK);
    kiln_store_close(st);
}

/* One live owner per SQLite file: a second open (another server on the same --database) is refused by name, with
 * the owner's pid, and nothing in the file is touched - above all its RUNNING job is not queued again. Once the
 * owner closes (or dies: test_kill9_recovery reopens after a kill -9), the next open succeeds and recovers. */
static void test_one_owner(void) {
    fresh_path("owner");
    kiln_err err = {0};
    kiln_store *a, *b = (kiln_store *)1;
    CHECK_EQ_INT(kiln_store_open(db_path, &a, NULL, &err), KILN_OK);
    CHECK_EQ_INT(kiln_store_add(a, "run", "comfy", NULL, "{}", false, 0, NULL, &err), KILN_OK);
    kiln_job j;
    CHECK_EQ_INT(kiln_store_claim_next(a, &j, &err), KILN_OK);
    kiln_job_clear(&j);
    int recovered = -1;
    CHECK_EQ_INT(kiln_store_open(db_path, &b, &recovered, &err), KILN_E_INVALID);
    CHECK(b == NULL);
    CHECK_ERR_CONTAINS(&err, "in use by another kiln serve");
    char pid[32];
    snprintf(pid, sizeof pid, "(pid %d)", (int)getpid());
    CHECK_ERR_CONTAINS(&err, pid);
    CHECK_ERR_CONTAINS(&err, "--database");
    CHECK_EQ_INT(kiln_store_count(a, KILN_JOB_RUNNING), 1); /* the refused open recovered nothing */
    kiln_store_close(a);
    CHECK_EQ_INT(kiln_store_open(db_path, &b, &recovered, &err), KILN_OK);
    CHECK_EQ_INT(recovered, 1);
    kiln_store_close(b);
    kiln_store *m1, *m2; /* ":memory:" stores share nothing: no owner file */
    CHECK_EQ_INT(kiln_store_open(":memory:", &m1, NULL, &err), KILN_OK);
    CHECK_EQ_INT(kiln_store_open(":memory:", &m2, NULL, &err), KILN_OK);
    kiln_store_close(m1);
    kiln_store_close(m2);
    cleanup();
}

static void test_open_errors(void) {
    kiln_err err = {0};
    kiln_store *st = (kiln_store *)1;
    CHECK(kiln_store_open("/nonexistent-dir/x/y.db", &st, NULL, &err) != KILN_OK);
    CHECK(st == NULL);
    CHECK_ERR_CONTAINS(&err, "job store");
}

int main(void) {
    RUN(test_transitions_table);
    RUN(test_fifo_front_and_lifecycle);
    RUN(test_queue_limit_and_list);
    RUN(test_kill9_recovery);
    RUN(test_claim_by_id);
    RUN(test_one_owner);
    RUN(test_open_errors);
    return test_summary();
}

/* test_compute_comm.c - the communicator (compute/comm.h). Alone: the one-rank implementation. Under mpirun
 * (tests/cli/parallel_mpi.sh, 2 and 4 ranks): every collective of the MPI implementation against values each
 * rank can compute for itself. Failure drills for that script (test hooks, not product code):
 * KILN_COMM_TEST_HANG_RANK=r makes rank r sleep instead of joining a barrier (the others must time out and abort
 * the job), KILN_COMM_TEST_DIE_RANK=r makes rank r exit at once (the job must end, not hang). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compute/comm.h"
#include "test.h"

static kiln_backend *be;

static void test_single(void) {
    kiln_err err = {0};
    kiln_comm *c = NULL;
    CHECK(kiln_comm_open_single(&c, &err) == KILN_OK);
    if (!c) return;
    CHECK(!strcmp(c->ops->name, "single"));
    CHECK_EQ_INT(c->size, 1);
    CHECK_EQ_INT(c->rank, 0);
    float a[4] = {1, 2, 3, 4}, b[4] = {0};
    CHECK(c->ops->all_to_all(c, be, a, b, 4, &err) == KILN_OK);
    CHECK(!memcmp(a, b, sizeof a));
    memset(b, 0, sizeof b);
    CHECK(c->ops->all_gather(c, be, a, b, 4, &err) == KILN_OK);
    CHECK(!memcmp(a, b, sizeof a));
    memset(b, 0, sizeof b);
    CHECK(c->ops->reduce_scatter(c, be, a, b, 4, &err) == KILN_OK);
    CHECK(!memcmp(a, b, sizeof a));
    CHECK(c->ops->all_reduce(c, be, a, 4, &err) == KILN_OK);
    CHECK(a[3] == 4);
    CHECK(c->ops->broadcast(c, be, a, sizeof a, 0, &err) == KILN_OK);
    CHECK(c->ops->broadcast(c, be, a, sizeof a, 1, &err) == KILN_E_INVALID);
    CHECK(c->ops->barrier(c, &err) == KILN_OK);
    uint64_t v = 42, all = 0;
    CHECK(kiln_comm_host_all_gather(c, &v, &all, sizeof v, &err) == KILN_OK);
    CHECK(all == 42);
    kiln_comm_close(c);
}

static void test_mpi(void) {
    kiln_err err = {0};
    kiln_comm *c = NULL;
    CHECK_MSG(kiln_comm_open(&c, &err) == KILN_OK, "%s", err.msg);
    if (!c) return;
    int R = c->rank, P = c->size;
    CHECK(!strcmp(c->ops->name, "mpi"));
    CHECK_EQ_INT(P, kiln_comm_launcher_size());
    const char *hang = getenv("KILN_COMM_TEST_HANG_RANK"), *die = getenv("KILN_COMM_TEST_DIE_RANK");
    if (die && atoi(die) == R) _exit(3);
    if (hang && atoi(hang) == R) sleep(600);
    CHECK(c->ops->barrier(c, &err) == KILN_OK);
    enum { n = 5 };
    float *s = calloc((size_t)P * n, sizeof(float)), *r = calloc((size_t)P * n, sizeof(float));
    for (int q = 0; q < P; q++)
        for (int i = 0; i < n; i++) s[q * n + i] = (float)(R * 1000 + q * 10 + i);
    CHECK(c->ops->all_to_all(c, be, s, r, n, &err) == KILN_OK);
    int bad = 0;
    for (int q = 0; q < P; q++)
        for (int i = 0; i < n; i++) bad += r[q * n + i] != (float)(q * 1000 + R * 10 + i);
    CHECK_MSG(bad == 0, "all-to-all: %d wrong", bad);
    float mine[n];
    for (int i = 0; i < n; i++) mine[i] = (float)(R * 100 + i);
    CHECK(c->ops->all_gather(c, be, mine, r, n, &err) == KILN_OK);
    bad = 0;
    for (int q = 0; q < P; q++)
        for (int i = 0; i < n; i++) bad += r[q * n + i] != (float)(q * 100 + i);
    CHECK_MSG(bad == 0, "all-gather: %d wrong", bad);
    for (int j = 0; j < P * n; j++) s[j] = (float)((R + 1) * (j + 1)); /* sum over ranks: (j+1) P(P+1)/2 */
    CHECK(c->ops->reduce_scatter(c, be, s, r, n, &err) == KILN_OK);
    bad = 0;
    for (int i = 0; i < n; i++) bad += r[i] != (float)((R * n + i + 1) * P * (P + 1) / 2);
    CHECK_MSG(bad == 0, "reduce-scatter: %d wrong", bad);
    for (int i = 0; i < n; i++) mine[i] = (float)(R + i);
    CHECK(c->ops->all_reduce(c, be, mine, n, &err) == KILN_OK);
    bad = 0;
    for (int i = 0; i < n; i++) bad += mine[i] != (float)(P * (P - 1) / 2 + P * i);
    CHECK_MSG(bad == 0, "all-reduce: %d wrong", bad);
    char msg[16] = {0};
    if (R == P - 1) strcpy(msg, "from the last");
    CHECK(c->ops->broadcast(c, be, msg, sizeof msg, P - 1, &err) == KILN_OK);
    CHECK(!strcmp(msg, "from the last"));
    CHECK(c->ops->broadcast(c, be, msg, sizeof msg, P, &err) == KILN_E_INVALID);
    /* the host all-gather (the ranks' memory agreement): rank q's 12 bytes land in slot q on every rank */
    struct { uint64_t bytes; int32_t rank; } me = {(uint64_t)R * 1000003u + 7, R}, *every = calloc((size_t)P, sizeof *every);
    CHECK(kiln_comm_host_all_gather(c, &me, every, sizeof me, &err) == KILN_OK);
    bad = 0;
    for (int q = 0; q < P; q++) bad += every[q].bytes != (uint64_t)q * 1000003u + 7 || every[q].rank != q;
    CHECK_MSG(bad == 0, "host all-gather: %d wrong", bad);
    free(every);
    /* the drill counts this line: printed only when every check above held */
    if (!test_failures_in_current) printf("  rank %d of %d: every collective ok\n", R, P);
    free(s);
    free(r);
    kiln_comm_close(c);
}

int main(void) {
    kiln_err err = {0};
    if (kiln_backend_open_cpu(1, &be, &err) != KILN_OK) return 1;
    if (kiln_comm_launcher_size() > 1) RUN(test_mpi);
    else RUN(test_single);
    kiln_backend_close(be);
    return test_summary();
}

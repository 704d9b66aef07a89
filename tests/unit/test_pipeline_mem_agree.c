/* test_pipeline_mem_agree.c - the ranks' memory agreement (pipeline/mem_agree.h). Alone: one rank agrees with
 * itself, without a message. Under mpirun (tests/cli/ranks_memory.sh, 2 ranks and more): the MIN over the ranks
 * with an unknown limit (0) bounding nothing, the lowest rank on a tie, "fixed" only when every rank's is, and
 * every rank getting the same answer; each rank prints "memory agreement ok" when every check held. */
#include <stdio.h>
#include <string.h>

#include "compute/comm.h"
#include "pipeline/mem_agree.h"
#include "test.h"

static void test_one_rank(void) {
    kiln_err err = {0};
    kiln_mem_limit l;
    char where[64] = "x";
    CHECK(kiln_mem_limit_agree(NULL, 12345, false, &l, &err) == KILN_OK);
    CHECK(l.bytes == 12345 && l.rank == 0 && l.ranks == 1 && !l.fixed);
    CHECK(!strcmp(kiln_mem_limit_where(&l, where, sizeof where), ""));
    kiln_comm *c = NULL;
    CHECK(kiln_comm_open_single(&c, &err) == KILN_OK);
    if (!c) return;
    CHECK(kiln_mem_limit_agree(c, 0, true, &l, &err) == KILN_OK);
    CHECK(l.bytes == 0 && l.ranks == 1 && l.fixed);
    kiln_comm_close(c);
    /* the text for several ranks (what the refusal's message carries) */
    l = (kiln_mem_limit){.bytes = 1, .rank = 1, .ranks = 2};
    CHECK(!strcmp(kiln_mem_limit_where(&l, where, sizeof where), " (rank 1 of 2, the tightest)"));
}

static void test_ranks(void) {
    kiln_err err = {0};
    kiln_comm *c = NULL;
    CHECK_MSG(kiln_comm_open(&c, &err) == KILN_OK, "%s", err.msg);
    if (!c) return;
    int R = c->rank, P = c->size;
    kiln_mem_limit l;
    /* rank 0 unknown (0), the others 1000 x (P + 1 - r): the last rank is the tightest; rank 1 measured */
    size_t mine = R == 0 ? 0 : (size_t)1000 * (size_t)(P + 1 - R);
    CHECK(kiln_mem_limit_agree(c, mine, R != 1, &l, &err) == KILN_OK);
    CHECK_MSG(l.bytes == 2000 && l.rank == P - 1 && l.ranks == P && !l.fixed, "rank %d: %zu at rank %d of %d, fixed %d",
              R, l.bytes, l.rank, l.ranks, (int)l.fixed);
    /* a tie: the lowest of the tightest ranks is named; all fixed */
    CHECK(kiln_mem_limit_agree(c, R == 0 ? 9000 : 5000, true, &l, &err) == KILN_OK);
    CHECK_MSG(l.bytes == 5000 && l.rank == 1 && l.fixed, "rank %d: %zu at rank %d", R, l.bytes, l.rank);
    /* nobody knows: no limit, as on one rank */
    CHECK(kiln_mem_limit_agree(c, 0, false, &l, &err) == KILN_OK);
    CHECK(l.bytes == 0 && l.ranks == P);
    if (!test_failures_in_current) printf("  rank %d of %d: memory agreement ok\n", R, P);
    kiln_comm_close(c);
}

int main(void) {
    if (kiln_comm_launcher_size() > 1) RUN(test_ranks);
    else RUN(test_one_rank);
    return test_summary();
}

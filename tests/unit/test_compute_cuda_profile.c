/* test_compute_cuda_profile.c - the per-op table of KILN_CUDA_PROFILE=1 (host logic, no GPU needed): intervals
 * add up per op name (by content, not pointer), the lines come most time first with their share, the total line
 * closes them, a small buffer is cut at a line and stays terminated, names past the table are counted. */
#include <stdio.h>
#include <string.h>

#include "compute/cuda/cuda_profile.h"
#include "test.h"

static void test_rows_and_order(void) {
    static kcu_profile p; /* zero */
    char other[16];
    snprintf(other, sizeof other, "%s", "cuda_matmul"); /* the same name at another address: the same row */
    kcu_prof_add(&p, "cuda_attention", 3.0);
    kcu_prof_add(&p, "cuda_matmul", 1.0);
    kcu_prof_add(&p, other, 5.0);
    kcu_prof_add(&p, "cuda_rms_norm", 0.5);
    CHECK_EQ_INT(p.n_rows, 3);
    char buf[2048];
    size_t len = kcu_prof_format(&p, buf, sizeof buf);
    CHECK_EQ_INT(len, strlen(buf));
    const char *mm = strstr(buf, "cuda_matmul"), *at = strstr(buf, "cuda_attention"), *rn = strstr(buf, "cuda_rms_norm");
    const char *tot = strstr(buf, "total");
    CHECK(mm && at && rn && tot);
    if (mm && at && rn && tot) CHECK(mm < at && at < rn && rn < tot); /* most time first, the total last */
    CHECK(strstr(buf, "       2 calls      6.000 ms  63.2%") != NULL); /* 6 of 9.5 ms */
    CHECK(strstr(buf, "       4 calls      9.500 ms") != NULL);
    CHECK(strstr(buf, "some ops past the table") == NULL);
}

static void test_small_buffer(void) {
    static kcu_profile p;
    kcu_prof_add(&p, "cuda_conv2d", 2.0);
    kcu_prof_add(&p, "cuda_group_norm", 1.0);
    char full[1024], cut[80];
    size_t need = kcu_prof_format(&p, full, sizeof full);
    memset(cut, 'x', sizeof cut);
    size_t len = kcu_prof_format(&p, cut, sizeof cut);
    CHECK_EQ_INT(len, need);
    CHECK(memchr(cut, 0, sizeof cut) != NULL);            /* terminated */
    CHECK(strlen(cut) < sizeof cut && strncmp(cut, full, strlen(cut)) == 0);
    CHECK(strlen(cut) == 0 || cut[strlen(cut) - 1] == '\n'); /* whole lines only */
    CHECK_EQ_INT(kcu_prof_format(&p, NULL, 0), need);
}

static void test_table_full(void) {
    static kcu_profile p;
    static char names[KCU_PROF_OPS + 2][16];
    for (int i = 0; i < KCU_PROF_OPS + 2; i++) {
        snprintf(names[i], sizeof names[i], "op%d", i);
        kcu_prof_add(&p, names[i], 1.0);
    }
    CHECK_EQ_INT(p.n_rows, KCU_PROF_OPS);
    CHECK_EQ_INT(p.dropped, 2);
    kcu_prof_add(&p, "op0", 1.0); /* a known row still counts */
    CHECK_EQ_INT(p.rows[0].calls, 2);
    char buf[16384];
    kcu_prof_format(&p, buf, sizeof buf);
    CHECK(strstr(buf, "some ops past the table") != NULL);
}

int main(void) {
    RUN(test_rows_and_order);
    RUN(test_small_buffer);
    RUN(test_table_full);
    return test_summary();
}

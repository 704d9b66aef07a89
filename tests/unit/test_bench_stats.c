/* test_bench_stats.c - reductions, order-statistic coverage, median intervals, ratio of medians, outliers.
 * Expected values were computed by hand and with Python's statistics/math modules (shown beside each). */
#include <math.h>
#include <stdbool.h>

#include "bench/stats.h"
#include "test.h"

static void test_reduce_basic(void) {
    double x[] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
    kiln_reduction r = kiln_reduce(x, 10);
    CHECK_EQ_INT(r.n, 10);
    CHECK_NEAR(r.min, 1, 0);
    CHECK_NEAR(r.max, 9, 0);
    CHECK_NEAR(r.median, 3.5, 1e-12); /* statistics.median -> 3.5 */
    CHECK_NEAR(r.mean, 3.9, 1e-12);
    CHECK_NEAR(x[0], 3, 0); /* input untouched */
    double odd[] = {4.75, 5.093, 4.9};
    CHECK_NEAR(kiln_reduce(odd, 3).median, 4.9, 0);
}

static void test_reduce_skips_nan_and_empty_is_null(void) {
    double x[] = {NAN, 2, NAN, 4};
    kiln_reduction r = kiln_reduce(x, 4);
    CHECK_EQ_INT(r.n, 2);
    CHECK_NEAR(r.median, 3, 0);
    CHECK_NEAR(r.mean, 3, 0);
    double none[] = {NAN, NAN};
    r = kiln_reduce(none, 2);
    CHECK_EQ_INT(r.n, 0);
    CHECK(isnan(r.min) && isnan(r.median) && isnan(r.max) && isnan(r.mean));
    r = kiln_reduce(NULL, 0);
    CHECK_EQ_INT(r.n, 0);
    CHECK(isnan(r.mean));
}

static void test_coverage(void) {
    CHECK_NEAR(kiln_order_stat_coverage(4, 1), 0.875, 1e-15);        /* 1 - 2/16 */
    CHECK_NEAR(kiln_order_stat_coverage(10, 2), 0.978515625, 1e-15); /* 1 - 2*(1+10)/1024 */
    CHECK_NEAR(kiln_order_stat_coverage(10, 3), 0.890625, 1e-15);    /* 1 - 2*(1+10+45)/1024 */
    CHECK_NEAR(kiln_order_stat_coverage(100, 40), 0.9647997997822952, 1e-12); /* math.comb sum */
    CHECK_NEAR(kiln_order_stat_coverage(4, 0), 0, 0);
    CHECK_NEAR(kiln_order_stat_coverage(4, 3), 0, 0);
}

static void test_median_ci(void) {
    double x[] = {10, 1, 9, 2, 8, 3, 7, 4, 6, 5}; /* sorted 1..10 */
    double lo, hi, ach;
    kiln_median_ci(x, 10, 0.95, &lo, &hi, &ach); /* j = 2 reaches 0.9785, j = 3 only 0.8906 */
    CHECK_NEAR(lo, 2, 0);
    CHECK_NEAR(hi, 9, 0);
    CHECK_NEAR(ach, 0.978515625, 1e-15);
    kiln_median_ci(x, 10, 0.85, &lo, &hi, &ach); /* j = 3 (0.8906) meets 0.85; j = 4 gives 0.65625 */
    CHECK_NEAR(lo, 3, 0);
    CHECK_NEAR(hi, 8, 0);
    double four[] = {4, 1, 3, 2};
    kiln_median_ci(four, 4, 0.95, &lo, &hi, &ach); /* cannot reach 0.95: (min, max) and says so */
    CHECK_NEAR(lo, 1, 0);
    CHECK_NEAR(hi, 4, 0);
    CHECK_NEAR(ach, 0.875, 1e-15);
    kiln_median_ci(four, 0, 0.95, &lo, &hi, &ach);
    CHECK(isnan(lo) && isnan(hi));
    CHECK_NEAR(ach, 0, 0);
}

static void test_ratio_of_medians_seed001(void) {
    /* Engine end-to-end seconds of seed 001: side a (eager) and side b (bcg). */
    double a[] = {4.315030758269131, 4.306321962270886, 4.33755365293473, 4.303403602913022};
    double b[] = {4.104417082853615, 4.105607620906085, 4.385314859915525, 4.115676726680249};
    kiln_ratio q;
    kiln_ratio_of_medians(a, 4, b, 4, 0.95, &q);
    CHECK(q.ok);
    CHECK_NEAR(q.median_a, 4.3106763602700084, 1e-12);
    CHECK_NEAR(q.median_b, 4.110642173793167, 1e-12);
    CHECK_NEAR(q.ratio, 0.9535956379559165, 1e-12);
    CHECK_NEAR(q.lo, 0.9462515996952849, 1e-12); /* min(b) / max(a) */
    CHECK_NEAR(q.hi, 1.019034063397413, 1e-12);  /* max(b) / min(a) */
    CHECK_NEAR(q.conf_achieved, 0.765625, 1e-12); /* 0.875^2: four per arm cannot certify 95 % */
    CHECK_EQ_INT(q.n_a, 4);
    double zero[] = {0, 0};
    kiln_ratio_of_medians(zero, 2, b, 4, 0.95, &q);
    CHECK(!q.ok);
    kiln_ratio_of_medians(a, 0, b, 4, 0.95, &q);
    CHECK(!q.ok);
}

static void test_ratio_large_n_uses_inner_order_stats(void) {
    double a[10], b[10];
    for (int i = 0; i < 10; i++) {
        a[i] = 10 + i; /* 10..19 */
        b[i] = 20 + 2 * i; /* 20..38 */
    }
    kiln_ratio q;
    kiln_ratio_of_medians(a, 10, b, 10, 0.95, &q); /* per side sqrt(.95) = .9747: j = 2 (.9785) */
    CHECK_NEAR(q.ratio, 29.0 / 14.5, 1e-12);
    CHECK_NEAR(q.lo, 22.0 / 18.0, 1e-12);
    CHECK_NEAR(q.hi, 36.0 / 11.0, 1e-12);
    CHECK_NEAR(q.conf_achieved, 0.978515625 * 0.978515625, 1e-12);
}

static void test_outliers_seed001_text_encoding(void) {
    /* TextEncodingStage ms of seed 001's eight cells; r2-2-b (371 ms) is the retained outlier. */
    double x[] = {99.02, 101.87, 100.71, 105.77, 98.15, 371.11, 102.26, 99.07};
    bool f[8];
    CHECK_EQ_INT(kiln_flag_outliers(x, 8, 3.5, f), 1);
    CHECK(f[5]);
    CHECK(!f[3]); /* 105.77: z = 0.6745 * 4.48 / 2.245 = 1.35 */
    double same[] = {5, 5, 5, 5};
    CHECK_EQ_INT(kiln_flag_outliers(same, 4, 3.5, f), 0);
    /* MAD = 0 (three of five equal) -> mean absolute deviation stands in: MeanAD = (0+0+0+1+50)/5 = 10.2,
     * z(55) = 50 / (1.253314 * 10.2) = 3.91 > 3.5, z(6) = 0.078 */
    double mostly[] = {5, 5, 5, 6, 55};
    CHECK_EQ_INT(kiln_flag_outliers(mostly, 5, 3.5, f), 1);
    CHECK(f[4] && !f[3]);
    double withnan[] = {1, NAN, 1.1, 0.9, 1.05, 40};
    bool g[6];
    CHECK_EQ_INT(kiln_flag_outliers(withnan, 6, 3.5, g), 1);
    CHECK(g[5] && !g[1]);
}

int main(void) {
    RUN(test_reduce_basic);
    RUN(test_reduce_skips_nan_and_empty_is_null);
    RUN(test_coverage);
    RUN(test_median_ci);
    RUN(test_ratio_of_medians_seed001);
    RUN(test_ratio_large_n_uses_inner_order_stats);
    RUN(test_outliers_seed001_text_encoding);
    return test_summary();
}

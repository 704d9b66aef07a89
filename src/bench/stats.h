/* stats.h - the numbers a benchmark report is made of: reductions, medians' confidence intervals, the ratio of
 * two medians and outlier flags. Pure functions over double arrays; nothing here allocates except where noted.
 *
 *     double t[] = {4.75, 5.093, 4.9};
 *     kiln_reduction r = kiln_reduce(t, 3);        // r.n = 3, r.min = 4.75, r.median = 4.9, ...
 *     kiln_ratio q;
 *     kiln_ratio_of_medians(a, na, b, nb, 0.95, &q); // q.ratio = median(b) / median(a), q.lo/q.hi its interval
 *
 * Missing values: NaN stands for "no reading" (an unsupported telemetry field, a failed sample). Reductions skip
 * NaN, so n counts real readings; with n = 0 every statistic is NaN and the report writes null, never 0.
 *
 * Why order statistics: a benchmark's timings are skewed and have outliers (a GC pause, a slow first request),
 * so the harness reports medians and gives each median a distribution-free interval [X_(j), X_(n+1-j)] whose
 * coverage comes from the binomial(n, 1/2) law and holds for any continuous distribution.
 */
#ifndef KILN_BENCH_STATS_H
#define KILN_BENCH_STATS_H

#include <stdbool.h>
#include <stddef.h>

/* n/min/median/max/mean over the non-NaN values. median of an even count = mean of the two middle values. */
typedef struct kiln_reduction {
    size_t n;
    double min, median, max, mean; /* NaN when n == 0 */
} kiln_reduction;

/* Reduces x[0..count) skipping NaN. x is not modified (the median sorts a private copy; on allocation failure
 * the median falls back to NaN and n stays correct - a reduction never fails loudly). */
kiln_reduction kiln_reduce(const double *x, size_t count);

/* The p-th percentile (0 <= p <= 100) of the non-NaN values, interpolated linearly between the two nearest order
 * statistics at rank p/100 * (n - 1) - numpy's default ("linear"), the definition serving benchmarks report
 * (vLLM, SGLang). NaN when there are no values or p is outside [0, 100]. */
double kiln_percentile(const double *x, size_t count, double p);

/* Median of the non-NaN values (NaN if none). */
double kiln_median(const double *x, size_t count);

/* Probability that [X_(j), X_(n+1-j)] covers the population median of a continuous law:
 * 1 - 2 * P(Binomial(n, 1/2) <= j - 1). Defined for 1 <= j <= n/2; returns 0 for any other j. */
double kiln_order_stat_coverage(size_t n, size_t j);

/* A distribution-free interval for the median of the non-NaN values of x: the narrowest symmetric pair
 * (X_(j), X_(n+1-j)) with coverage >= conf. When even (min, max) does not reach conf (small n: n = 4 gives
 * 0.875), the interval is (min, max) and *achieved says what it is worth; callers report it, never hide it.
 * With n = 0 everything is NaN and *achieved = 0. lo/hi/achieved may not be NULL. */
void kiln_median_ci(const double *x, size_t count, double conf, double *lo, double *hi, double *achieved);

/* Ratio of medians B / A (e.g. new build over old: < 1 means B is faster when the values are seconds) with a
 * conservative interval: each median gets an order-statistic interval at confidence sqrt(conf); the samples are
 * independent, so both cover at once with probability >= conf, and then the true ratio lies in
 * [lo_B / hi_A, hi_B / lo_A]. achieved = achieved_A * achieved_B. ok = false when either side has no values or
 * a median/bound of A is <= 0 (a ratio of seconds needs positive values). */
typedef struct kiln_ratio {
    bool ok;
    double median_a, median_b;
    double ratio, lo, hi;
    double conf_requested, conf_achieved;
    size_t n_a, n_b;
} kiln_ratio;

void kiln_ratio_of_medians(const double *a, size_t na, const double *b, size_t nb, double conf, kiln_ratio *out);

/* Outlier flags by the modified z-score (Iglewicz & Hoaglin): z_i = 0.6745 (x_i - median) / MAD, flagged when
 * |z_i| > threshold (3.5 is their recommendation). When MAD is 0 (more than half the values identical) the mean
 * absolute deviation scaled by 1.253314 stands in (z_i = (x_i - median) / (1.253314 * MeanAD)). NaN values are
 * never flagged. flags[i] is set for each i; returns the number flagged. Outliers are flagged, never dropped. */
size_t kiln_flag_outliers(const double *x, size_t count, double threshold, bool *flags);

#endif

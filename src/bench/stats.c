/* stats.c - reductions, order-statistic intervals, ratio of medians, outlier flags (see stats.h). */
#include "bench/stats.h"

#include <math.h>
#include <stdlib.h>

#include "base/alloc.h"

static int cmp_double(const void *pa, const void *pb) {
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

/* Copies the non-NaN values of x into a fresh sorted array; *m = how many. NULL when there are none or when
 * the allocation fails (then *m is still the count). */
static double *sorted_values(const double *x, size_t count, size_t *m) {
    size_t k = 0;
    for (size_t i = 0; i < count; i++)
        if (!isnan(x[i])) k++;
    *m = k;
    if (k == 0) return NULL;
    double *v = kiln_malloc(k * sizeof *v);
    if (!v) return NULL;
    k = 0;
    for (size_t i = 0; i < count; i++)
        if (!isnan(x[i])) v[k++] = x[i];
    qsort(v, k, sizeof *v, cmp_double);
    return v;
}

static double median_of_sorted(const double *v, size_t m) {
    if (m == 0) return NAN;
    return m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
}

kiln_reduction kiln_reduce(const double *x, size_t count) {
    kiln_reduction r = {0, NAN, NAN, NAN, NAN};
    double sum = 0;
    for (size_t i = 0; i < count; i++) {
        if (isnan(x[i])) continue;
        if (r.n == 0 || x[i] < r.min) r.min = x[i];
        if (r.n == 0 || x[i] > r.max) r.max = x[i];
        sum += x[i];
        r.n++;
    }
    if (r.n == 0) return r;
    r.mean = sum / (double)r.n;
    /* The mean of values that are all equal can drift by an ulp; keep it inside [min, max]. */
    if (r.mean < r.min) r.mean = r.min;
    if (r.mean > r.max) r.mean = r.max;
    r.median = kiln_median(x, count);
    return r;
}

double kiln_percentile(const double *x, size_t count, double p) {
    size_t m;
    double *v = sorted_values(x, count, &m);
    double r = NAN;
    if (v && p >= 0 && p <= 100) {
        double pos = p / 100.0 * (double)(m - 1);
        size_t lo = (size_t)floor(pos);
        size_t hi = lo + 1 < m ? lo + 1 : lo;
        r = v[lo] + (v[hi] - v[lo]) * (pos - (double)lo);
    }
    kiln_free(v);
    return r;
}

double kiln_median(const double *x, size_t count) {
    size_t m;
    double *v = sorted_values(x, count, &m);
    double med = v ? median_of_sorted(v, m) : NAN;
    kiln_free(v);
    return med;
}

double kiln_order_stat_coverage(size_t n, size_t j) {
    if (j < 1 || 2 * j > n) return 0;
    /* P(Bin(n, 1/2) <= j-1) summed in log space so that n in the thousands neither overflows nor underflows. */
    double tail = 0;
    for (size_t i = 0; i < j; i++) {
        double lc = lgamma((double)n + 1) - lgamma((double)i + 1) - lgamma((double)(n - i) + 1);
        tail += exp(lc - (double)n * log(2.0));
    }
    double c = 1 - 2 * tail;
    return c < 0 ? 0 : c;
}

void kiln_median_ci(const double *x, size_t count, double conf, double *lo, double *hi, double *achieved) {
    size_t m;
    double *v = sorted_values(x, count, &m);
    *lo = *hi = NAN;
    *achieved = 0;
    if (!v) return;
    if (m == 1) { /* one value: an interval of one point has no coverage worth quoting */
        *lo = *hi = v[0];
        kiln_free(v);
        return;
    }
    /* Coverage falls as j grows, so the narrowest pair meeting conf is the largest such j. j = 1 is (min, max). */
    size_t best = 1;
    for (size_t j = 1; 2 * j <= m; j++) {
        if (kiln_order_stat_coverage(m, j) >= conf) best = j;
        else break;
    }
    *lo = v[best - 1];
    *hi = v[m - best];
    *achieved = kiln_order_stat_coverage(m, best);
    kiln_free(v);
}

void kiln_ratio_of_medians(const double *a, size_t na, const double *b, size_t nb, double conf, kiln_ratio *out) {
    kiln_ratio q = {.ok = false, .median_a = NAN, .median_b = NAN, .ratio = NAN, .lo = NAN, .hi = NAN,
                    .conf_requested = conf, .conf_achieved = 0};
    size_t ma, mb;
    double *va = sorted_values(a, na, &ma), *vb = sorted_values(b, nb, &mb);
    q.n_a = ma;
    q.n_b = mb;
    if (va && vb) {
        q.median_a = median_of_sorted(va, ma);
        q.median_b = median_of_sorted(vb, mb);
        double side = sqrt(conf), alo, ahi, aach, blo, bhi, bach;
        kiln_median_ci(va, ma, side, &alo, &ahi, &aach);
        kiln_median_ci(vb, mb, side, &blo, &bhi, &bach);
        if (q.median_a > 0 && alo > 0) {
            q.ok = true;
            q.ratio = q.median_b / q.median_a;
            q.lo = blo / ahi;
            q.hi = bhi / alo;
            q.conf_achieved = aach * bach;
        }
    }
    kiln_free(va);
    kiln_free(vb);
    *out = q;
}

size_t kiln_flag_outliers(const double *x, size_t count, double threshold, bool *flags) {
    for (size_t i = 0; i < count; i++) flags[i] = false;
    size_t m;
    double *v = sorted_values(x, count, &m);
    if (!v) return 0;
    double med = median_of_sorted(v, m);
    /* Reuse v for the absolute deviations: their median is the MAD. */
    double mean_ad = 0;
    for (size_t i = 0; i < m; i++) {
        v[i] = fabs(v[i] - med);
        mean_ad += v[i];
    }
    mean_ad /= (double)m;
    qsort(v, m, sizeof *v, cmp_double);
    double mad = median_of_sorted(v, m);
    kiln_free(v);
    double scale; /* |x - med| / scale is the modified z-score */
    if (mad > 0) scale = mad / 0.6745;
    else if (mean_ad > 0) scale = 1.253314 * mean_ad;
    else return 0; /* all values equal: nothing stands out */
    size_t flagged = 0;
    for (size_t i = 0; i < count; i++) {
        if (isnan(x[i])) continue;
        if (fabs(x[i] - med) / scale > threshold) {
            flags[i] = true;
            flagged++;
        }
    }
    return flagged;
}

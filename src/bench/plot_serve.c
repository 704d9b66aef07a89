/* plot_serve.c - the picture of a serve-load report (`kiln bench plot`, `kiln bench serve --plot`):
 *   top panel    latency of every request against its send time, one colour per run; a failed request is a
 *                ring at the top; the dashed line is each run's median SLO deadline;
 *   bottom panel queue wait (latency not spent executing) against send time - a load the server cannot keep
 *                up with shows as a rising line.
 * The legend names each run with its throughput and SLO attainment. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "bench/plot_canvas.h"
#include "bench/stats.h"

#define W KILN_PLOT_WIDTH
#define H KILN_PLOT_HEIGHT

static double num(const json_t *o, const char *k) {
    const json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static void grow(double v, double *lo, double *hi) {
    if (isnan(v)) return;
    if (isnan(*lo) || v < *lo) *lo = v;
    if (isnan(*hi) || v > *hi) *hi = v;
}

kiln_status kiln_bench_plot_serve(const json_t *report, const char *path, kiln_err *err) {
    const json_t *runs = json_object_get(report, "runs");
    if (!json_is_array(runs) || !json_array_size(runs))
        return KILN_FAIL(err, KILN_E_INVALID, "plot: not a serve-load report with runs");
    double t_hi = NAN, t_lo = 0, l_lo = 0, l_hi = NAN, q_lo = 0, q_hi = NAN;
    const json_t *run, *r;
    size_t k, i;
    json_array_foreach(runs, k, run) {
        json_array_foreach(json_object_get(run, "requests"), i, r) {
            grow(num(r, "sent_s"), &t_lo, &t_hi);
            grow(num(r, "latency_s"), &l_lo, &l_hi);
            grow(num(r, "deadline_s"), &l_lo, &l_hi);
            grow(num(r, "queue_wait_s"), &q_lo, &q_hi);
        }
    }
    if (isnan(t_hi)) return KILN_FAIL(err, KILN_E_INVALID, "plot: the report has no request");
    if (isnan(q_hi)) q_hi = 1;
    kiln_canvas c = {kiln_malloc((size_t)W * H * 3)};
    if (!c.px) return KILN_FAIL(err, KILN_E_NOMEM, "plot: out of memory");
    memset(c.px, 255, (size_t)W * H * 3);
    kiln_panel top = {90, 40, W - 20, 330}, bot = {90, 390, W - 20, H - 60};
    kiln_plot_frame(&c, top, "LATENCY S BY SEND TIME (RING: FAILED; DASHES: MEDIAN SLO DEADLINE)");
    kiln_plot_range_labels(&c, top, l_lo, l_hi, kiln_plot_black, 0);
    kiln_plot_frame(&c, bot, "QUEUE WAIT S (LATENCY NOT EXECUTING) BY SEND TIME");
    kiln_plot_range_labels(&c, bot, q_lo, q_hi, kiln_plot_black, 0);
    char buf[160];
    snprintf(buf, sizeof buf, "0 .. %.3g S", t_hi);
    kiln_plot_text(&c, bot.x1 - 8 * (int)strlen(buf), bot.y1 + 6, buf, kiln_plot_black);
    int lx = top.x0, ly = H - 40;
    json_array_foreach(runs, k, run) {
        kiln_rgb col = kiln_plot_palette[k % kiln_plot_n_palette];
        const json_t *reqs = json_object_get(run, "requests");
        size_t n = json_array_size(reqs);
        double *dl = kiln_calloc(n ? n : 1, sizeof *dl);
        int px = -1, py = -1;
        json_array_foreach(reqs, i, r) {
            int x = kiln_plot_map(num(r, "sent_s"), t_lo, t_hi, top.x0 + 3, top.x1 - 3);
            bool ok = json_is_true(json_object_get(r, "ok"));
            if (dl) dl[i] = num(r, "deadline_s");
            if (!ok) {
                kiln_plot_disc(&c, x, top.y0 + 4, 3, col, true);
                continue;
            }
            kiln_plot_disc(&c, x, kiln_plot_map(num(r, "latency_s"), l_lo, l_hi, top.y1 - 3, top.y0 + 3), 2, col, false);
            double q = num(r, "queue_wait_s");
            if (isnan(q)) continue;
            int y = kiln_plot_map(q, q_lo, q_hi, bot.y1 - 3, bot.y0 + 3);
            if (px >= 0) kiln_plot_line(&c, px, py, x, y, col);
            kiln_plot_disc(&c, x, y, 2, col, false);
            px = x;
            py = y;
        }
        double d = dl ? kiln_median(dl, n) : NAN;
        kiln_free(dl);
        if (!isnan(d)) {
            int y = kiln_plot_map(d, l_lo, l_hi, top.y1 - 3, top.y0 + 3);
            for (int x = top.x0 + 1; x < top.x1; x += 8) kiln_plot_line(&c, x, y, x + 3, y, col);
        }
        const json_t *s = json_object_get(run, "summary");
        snprintf(buf, sizeof buf, "%s: %.3g REQ/S, SLO %.0f%%", json_string_value(json_object_get(run, "label")),
                 num(s, "throughput_rps"), 100 * num(json_object_get(s, "slo"), "attainment"));
        kiln_plot_disc(&c, lx + 4, ly + 5, 4, col, false);
        kiln_plot_text(&c, lx + 14, ly, buf, col);
        lx += 14 + 8 * (int)strlen(buf) + 24;
        if (lx > W - 300) {
            lx = top.x0;
            ly += 16;
        }
    }
    snprintf(buf, sizeof buf, "SERVE LOAD: %s", json_string_value(json_object_get(json_object_get(report, "target"), "url")));
    kiln_plot_text(&c, top.x0, 8, buf, kiln_plot_black);
    kiln_status st = kiln_plot_write_png(&c, path, err);
    kiln_free(c.px);
    return st;
}

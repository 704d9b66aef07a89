/* plot.c - the report picture (see plot.h). */
#include "bench/plot.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "bench/plot_canvas.h"

#define W KILN_PLOT_WIDTH
#define H KILN_PLOT_HEIGHT

/* Calls fn for every batch of every card of every graph; gi = graph index. */
typedef void (*batch_fn)(void *ctx, size_t gi, const char *gname, const json_t *batch);
static void each_batch(const json_t *report, batch_fn fn, void *ctx) {
    size_t gi = 0;
    const char *gname, *cname, *bname;
    json_t *g, *card, *b;
    json_object_foreach(json_object_get(report, "graphs"), gname, g) {
        json_object_foreach(json_object_get(g, "cards"), cname, card) {
            json_object_foreach(json_object_get(card, "batches"), bname, b) fn(ctx, gi, gname, b);
        }
        gi++;
    }
}

typedef struct scan {
    double lo, hi, plo, phi, clo, chi, t_total;
    size_t n, nseries;
} scan;

static void minmax(double v, double *lo, double *hi) {
    if (isnan(v)) return;
    if (isnan(*lo) || v < *lo) *lo = v;
    if (isnan(*hi) || v > *hi) *hi = v;
}

static void scan_batch(void *ctx, size_t gi, const char *gname, const json_t *b) {
    (void)gi;
    (void)gname;
    scan *s = ctx;
    const json_t *timed = json_object_get(b, "timed");
    for (size_t i = 0; i < json_array_size(timed); i++) {
        const json_t *v = json_object_get(json_array_get(timed, i), "exec_seconds_per_image");
        if (json_is_number(v)) {
            minmax(json_number_value(v), &s->lo, &s->hi);
            s->n++;
        }
    }
    const json_t *ser = json_object_get(json_object_get(b, "trace"), "series");
    const json_t *t = json_object_get(ser, "t"), *p = json_object_get(ser, "power.draw"),
                 *c = json_object_get(ser, "clocks.sm");
    for (size_t i = 0; i < json_array_size(t); i++) {
        minmax(json_is_number(json_array_get(p, i)) ? json_number_value(json_array_get(p, i)) : NAN, &s->plo, &s->phi);
        minmax(json_is_number(json_array_get(c, i)) ? json_number_value(json_array_get(c, i)) : NAN, &s->clo, &s->chi);
    }
    size_t nt = json_array_size(t);
    if (nt) {
        s->t_total += json_number_value(json_array_get(t, nt - 1)) + 1e-9;
        s->nseries += nt;
    }
}

typedef struct draw {
    kiln_canvas *c;
    scan *s;
    kiln_panel top, bottom;
    size_t k;       /* submits drawn so far */
    double t_off;   /* time offset of this batch in the bottom kiln_panel */
} draw;

static void draw_batch(void *ctx, size_t gi, const char *gname, const json_t *b) {
    (void)gname;
    draw *d = ctx;
    kiln_rgb col = kiln_plot_palette[gi % kiln_plot_n_palette];
    const json_t *timed = json_object_get(b, "timed");
    int px = -1, py = -1;
    for (size_t i = 0; i < json_array_size(timed); i++) {
        const json_t *sub = json_array_get(timed, i);
        const json_t *v = json_object_get(sub, "exec_seconds_per_image");
        if (!json_is_number(v)) continue;
        int x = kiln_plot_map((double)d->k++, -0.5, (double)d->s->n - 0.5, d->top.x0 + 10, d->top.x1 - 10);
        int y = kiln_plot_map(json_number_value(v), d->s->lo, d->s->hi, d->top.y1 - 10, d->top.y0 + 10);
        if (px >= 0) kiln_plot_line(d->c, px, py, x, y, col);
        kiln_plot_disc(d->c, x, y, 4, col, false);
        if (json_is_true(json_object_get(sub, "outlier"))) kiln_plot_disc(d->c, x, y, 9, kiln_plot_black, true);
        px = x;
        py = y;
    }
    const json_t *ser = json_object_get(json_object_get(b, "trace"), "series");
    const json_t *t = json_object_get(ser, "t");
    const char *keys[2] = {"power.draw", "clocks.sm"};
    double lo[2] = {d->s->plo, d->s->clo}, hi[2] = {d->s->phi, d->s->chi};
    kiln_rgb cols[2] = {{214, 39, 40}, {31, 119, 180}};
    size_t nt = json_array_size(t);
    for (int f = 0; f < 2; f++) {
        const json_t *col_v = json_object_get(ser, keys[f]);
        int lx = -1, ly = -1;
        for (size_t i = 0; i < nt; i++) {
            const json_t *v = json_array_get(col_v, i);
            if (!json_is_number(v)) {
                lx = -1;
                continue;
            }
            double tt = d->t_off + json_number_value(json_array_get(t, i));
            int x = kiln_plot_map(tt, 0, d->s->t_total, d->bottom.x0 + 2, d->bottom.x1 - 2);
            int y = kiln_plot_map(json_number_value(v), lo[f], hi[f], d->bottom.y1 - 6, d->bottom.y0 + 6);
            if (lx >= 0) kiln_plot_line(d->c, lx, ly, x, y, cols[f]);
            lx = x;
            ly = y;
        }
    }
    if (nt) {
        d->t_off += json_number_value(json_array_get(t, nt - 1)) + 1e-9;
        int x = kiln_plot_map(d->t_off, 0, d->s->t_total, d->bottom.x0 + 2, d->bottom.x1 - 2);
        for (int y = d->bottom.y0; y < d->bottom.y1; y += 3) kiln_plot_put(d->c, x, y, kiln_plot_grey);
    }
}

kiln_status kiln_bench_plot(const json_t *report, const char *path, kiln_err *err) {
    if (!json_is_object(json_object_get(report, "graphs")))
        return KILN_FAIL(err, KILN_E_INVALID, "plot: not a seconds-per-image report");
    scan s = {NAN, NAN, NAN, NAN, NAN, NAN, 0, 0, 0};
    each_batch(report, scan_batch, &s);
    if (s.n == 0) return KILN_FAIL(err, KILN_E_INVALID, "plot: the report has no timed submit");
    kiln_canvas c = {kiln_malloc((size_t)W * H * 3)};
    if (!c.px) return KILN_FAIL(err, KILN_E_NOMEM, "plot: out of memory");
    memset(c.px, 255, (size_t)W * H * 3);
    draw d = {&c, &s, {90, 40, W - 20, 330}, {90, 390, W - 20, H - 60}, 0, 0};
    kiln_plot_frame(&c, d.top, "SECONDS PER IMAGE, TIMED SUBMITS IN RUN ORDER (RINGED: OUTLIER, KEPT)");
    kiln_plot_range_labels(&c, d.top, s.lo, s.hi, kiln_plot_black, 0);
    kiln_plot_frame(&c, d.bottom, "TELEMETRY OVER THE TIMED WINDOWS: POWER W (RED), SM CLOCK MHZ (BLUE)");
    if (s.nseries) {
        kiln_plot_range_labels(&c, d.bottom, s.plo, s.phi, kiln_plot_palette[1], 0);
        kiln_plot_range_labels(&c, (kiln_panel){d.bottom.x0, d.bottom.y0 + 14, d.bottom.x1, d.bottom.y1 - 14}, s.clo, s.chi,
                     kiln_plot_palette[0], 0);
    } else {
        kiln_plot_text(&c, d.bottom.x0 + 40, (d.bottom.y0 + d.bottom.y1) / 2, "NO TELEMETRY TRACE IN THIS REPORT", kiln_plot_black);
    }
    each_batch(report, draw_batch, &d);
    /* Legend: graph names in their colours. */
    int lx = d.top.x0, ly = H - 40;
    size_t gi = 0;
    const char *gname;
    json_t *g;
    json_object_foreach(json_object_get(report, "graphs"), gname, g) {
        kiln_rgb col = kiln_plot_palette[gi++ % kiln_plot_n_palette];
        kiln_plot_disc(&c, lx + 4, ly + 5, 4, col, false);
        kiln_plot_text(&c, lx + 14, ly, gname, col);
        lx += 14 + 8 * (int)strlen(gname) + 24;
        if (lx > W - 200) {
            lx = d.top.x0;
            ly += 16;
        }
    }
    char arm[160];
    snprintf(arm, sizeof arm, "ARM %s", json_string_value(json_object_get(report, "arm")) ? json_string_value(json_object_get(report, "arm")) : "?");
    kiln_plot_text(&c, d.top.x0, 8, arm, kiln_plot_black);
    kiln_status st = kiln_plot_write_png(&c, path, err);
    kiln_free(c.px);
    return st;
}

/* plot.c - the report picture (see plot.h). */
#include "bench/plot.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <spng.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

#define W KILN_PLOT_WIDTH
#define H KILN_PLOT_HEIGHT

typedef struct canvas {
    unsigned char *px; /* RGB8 */
} canvas;

typedef struct rgb {
    unsigned char r, g, b;
} rgb;

static const rgb palette[] = {{31, 119, 180}, {214, 39, 40}, {44, 160, 44}, {148, 103, 189},
                              {255, 127, 14}, {140, 86, 75}, {227, 119, 194}, {23, 190, 207}};
static const rgb black = {0, 0, 0}, grey = {200, 200, 200};

static void put(canvas *c, int x, int y, rgb col) {
    if (x < 0 || y < 0 || x >= W || y >= H) return;
    unsigned char *p = c->px + ((size_t)y * W + (size_t)x) * 3;
    p[0] = col.r;
    p[1] = col.g;
    p[2] = col.b;
}

static void line(canvas *c, int x0, int y0, int x1, int y1, rgb col) {
    int dx = abs(x1 - x0), dy = -abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1, e = dx + dy;
    for (int guard = 0; guard < 4 * (W + H); guard++) {
        put(c, x0, y0, col);
        if (x0 == x1 && y0 == y1) break;
        int e2 = 2 * e;
        if (e2 >= dy) {
            e += dy;
            x0 += sx;
        }
        if (e2 <= dx) {
            e += dx;
            y0 += sy;
        }
    }
}

static void disc(canvas *c, int x, int y, int r, rgb col, bool ring) {
    for (int j = -r; j <= r; j++)
        for (int i = -r; i <= r; i++) {
            int d = i * i + j * j;
            if (ring ? (d <= r * r && d >= (r - 1) * (r - 1)) : d <= r * r) put(c, x + i, y + j, col);
        }
}

/* 3x5 glyphs, one row per 3 bits (MSB left). Unknown characters draw as blanks. */
static unsigned glyph(char ch) {
    static const struct {
        char c;
        unsigned rows;
    } font[] = {
        {'0', 075557}, {'1', 026222}, {'2', 071747}, {'3', 071717}, {'4', 055711}, {'5', 074717}, {'6', 074757},
        {'7', 071111}, {'8', 075757}, {'9', 075717}, {'.', 000002}, {',', 000024}, {'-', 000700}, {'/', 011244}, {':', 002020},
        {'%', 051245}, {'(', 024442}, {')', 042224}, {'A', 025755}, {'B', 065656}, {'C', 034443}, {'D', 065556},
        {'E', 074647}, {'F', 074644}, {'G', 034553}, {'H', 055755}, {'I', 072227}, {'J', 011153}, {'K', 055655},
        {'L', 044447}, {'M', 057755}, {'N', 065555}, {'O', 025552}, {'P', 065644}, {'Q', 025563}, {'R', 065655},
        {'S', 034716}, {'T', 072222}, {'U', 055557}, {'V', 055552}, {'W', 055775}, {'X', 055255}, {'Y', 055222},
        {'Z', 071247}, {'_', 000007}, {'=', 007070}, {'+', 002720},
    };
    for (size_t i = 0; i < sizeof font / sizeof font[0]; i++)
        if (font[i].c == ch) return font[i].rows;
    return 0;
}

/* Text at scale 2 (6x10 cells plus spacing). */
static void text(canvas *c, int x, int y, const char *s, rgb col) {
    for (; *s; s++, x += 8) {
        unsigned g = glyph((char)toupper((unsigned char)*s));
        for (int row = 0; row < 5; row++)
            for (int bit = 0; bit < 3; bit++)
                if (g >> ((4 - row) * 3 + (2 - bit)) & 1)
                    for (int k = 0; k < 4; k++) put(c, x + bit * 2 + k % 2, y + row * 2 + k / 2, col);
    }
}

typedef struct panel {
    int x0, y0, x1, y1; /* pixel box */
} panel;

static void frame(canvas *c, panel p, const char *title) {
    line(c, p.x0, p.y1, p.x1, p.y1, black);
    line(c, p.x0, p.y0, p.x0, p.y1, black);
    for (int k = 1; k < 4; k++) {
        int y = p.y0 + (p.y1 - p.y0) * k / 4;
        for (int x = p.x0 + 1; x < p.x1; x += 4) put(c, x, y, grey);
    }
    text(c, p.x0, p.y0 - 16, title, black);
}

static int map(double v, double lo, double hi, int a, int b) {
    if (!(hi > lo)) return (a + b) / 2;
    return a + (int)lround((v - lo) / (hi - lo) * (b - a));
}

static void range_labels(canvas *c, panel p, double lo, double hi, rgb col, int dx) {
    char buf[32];
    snprintf(buf, sizeof buf, "%.3g", hi);
    text(c, p.x0 - 70 + dx, p.y0, buf, col);
    snprintf(buf, sizeof buf, "%.3g", lo);
    text(c, p.x0 - 70 + dx, p.y1 - 10, buf, col);
}

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
    canvas *c;
    scan *s;
    panel top, bottom;
    size_t k;       /* submits drawn so far */
    double t_off;   /* time offset of this batch in the bottom panel */
} draw;

static void draw_batch(void *ctx, size_t gi, const char *gname, const json_t *b) {
    (void)gname;
    draw *d = ctx;
    rgb col = palette[gi % (sizeof palette / sizeof palette[0])];
    const json_t *timed = json_object_get(b, "timed");
    int px = -1, py = -1;
    for (size_t i = 0; i < json_array_size(timed); i++) {
        const json_t *sub = json_array_get(timed, i);
        const json_t *v = json_object_get(sub, "exec_seconds_per_image");
        if (!json_is_number(v)) continue;
        int x = map((double)d->k++, -0.5, (double)d->s->n - 0.5, d->top.x0 + 10, d->top.x1 - 10);
        int y = map(json_number_value(v), d->s->lo, d->s->hi, d->top.y1 - 10, d->top.y0 + 10);
        if (px >= 0) line(d->c, px, py, x, y, col);
        disc(d->c, x, y, 4, col, false);
        if (json_is_true(json_object_get(sub, "outlier"))) disc(d->c, x, y, 9, black, true);
        px = x;
        py = y;
    }
    const json_t *ser = json_object_get(json_object_get(b, "trace"), "series");
    const json_t *t = json_object_get(ser, "t");
    const char *keys[2] = {"power.draw", "clocks.sm"};
    double lo[2] = {d->s->plo, d->s->clo}, hi[2] = {d->s->phi, d->s->chi};
    rgb cols[2] = {{214, 39, 40}, {31, 119, 180}};
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
            int x = map(tt, 0, d->s->t_total, d->bottom.x0 + 2, d->bottom.x1 - 2);
            int y = map(json_number_value(v), lo[f], hi[f], d->bottom.y1 - 6, d->bottom.y0 + 6);
            if (lx >= 0) line(d->c, lx, ly, x, y, cols[f]);
            lx = x;
            ly = y;
        }
    }
    if (nt) {
        d->t_off += json_number_value(json_array_get(t, nt - 1)) + 1e-9;
        int x = map(d->t_off, 0, d->s->t_total, d->bottom.x0 + 2, d->bottom.x1 - 2);
        for (int y = d->bottom.y0; y < d->bottom.y1; y += 3) put(d->c, x, y, grey);
    }
}

kiln_status kiln_bench_plot(const json_t *report, const char *path, kiln_err *err) {
    if (!json_is_object(json_object_get(report, "graphs")))
        return KILN_FAIL(err, KILN_E_INVALID, "plot: not a seconds-per-image report");
    scan s = {NAN, NAN, NAN, NAN, NAN, NAN, 0, 0, 0};
    each_batch(report, scan_batch, &s);
    if (s.n == 0) return KILN_FAIL(err, KILN_E_INVALID, "plot: the report has no timed submit");
    canvas c = {kiln_malloc((size_t)W * H * 3)};
    if (!c.px) return KILN_FAIL(err, KILN_E_NOMEM, "plot: out of memory");
    memset(c.px, 255, (size_t)W * H * 3);
    draw d = {&c, &s, {90, 40, W - 20, 330}, {90, 390, W - 20, H - 60}, 0, 0};
    frame(&c, d.top, "SECONDS PER IMAGE, TIMED SUBMITS IN RUN ORDER (RINGED: OUTLIER, KEPT)");
    range_labels(&c, d.top, s.lo, s.hi, black, 0);
    frame(&c, d.bottom, "TELEMETRY OVER THE TIMED WINDOWS: POWER W (RED), SM CLOCK MHZ (BLUE)");
    if (s.nseries) {
        range_labels(&c, d.bottom, s.plo, s.phi, palette[1], 0);
        range_labels(&c, (panel){d.bottom.x0, d.bottom.y0 + 14, d.bottom.x1, d.bottom.y1 - 14}, s.clo, s.chi,
                     palette[0], 0);
    } else {
        text(&c, d.bottom.x0 + 40, (d.bottom.y0 + d.bottom.y1) / 2, "NO TELEMETRY TRACE IN THIS REPORT", black);
    }
    each_batch(report, draw_batch, &d);
    /* Legend: graph names in their colours. */
    int lx = d.top.x0, ly = H - 40;
    size_t gi = 0;
    const char *gname;
    json_t *g;
    json_object_foreach(json_object_get(report, "graphs"), gname, g) {
        rgb col = palette[gi++ % (sizeof palette / sizeof palette[0])];
        disc(&c, lx + 4, ly + 5, 4, col, false);
        text(&c, lx + 14, ly, gname, col);
        lx += 14 + 8 * (int)strlen(gname) + 24;
        if (lx > W - 200) {
            lx = d.top.x0;
            ly += 16;
        }
    }
    char arm[160];
    snprintf(arm, sizeof arm, "ARM %s", json_string_value(json_object_get(report, "arm")) ? json_string_value(json_object_get(report, "arm")) : "?");
    text(&c, d.top.x0, 8, arm, black);
    /* Encode. */
    kiln_status st = KILN_OK;
    FILE *f = fopen(path, "wb");
    if (!f) st = KILN_FAIL(err, KILN_E_IO, "%s: %s", path, strerror(errno));
    spng_ctx *ctx = f ? spng_ctx_new(SPNG_CTX_ENCODER) : NULL;
    if (f && !ctx) st = KILN_FAIL(err, KILN_E_NOMEM, "plot: out of memory");
    if (ctx) {
        struct spng_ihdr ihdr = {.width = W, .height = H, .bit_depth = 8, .color_type = SPNG_COLOR_TYPE_TRUECOLOR};
        int rc = spng_set_png_file(ctx, f);
        if (!rc) rc = spng_set_ihdr(ctx, &ihdr);
        if (!rc) rc = spng_encode_image(ctx, c.px, (size_t)W * H * 3, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE);
        if (rc) st = KILN_FAIL(err, KILN_E_IO, "%s: %s", path, spng_strerror(rc));
        spng_ctx_free(ctx);
    }
    if (f && fclose(f) != 0 && st == KILN_OK) st = KILN_FAIL(err, KILN_E_IO, "%s: %s", path, strerror(errno));
    if (st != KILN_OK && f) remove(path);
    kiln_free(c.px);
    return st;
}

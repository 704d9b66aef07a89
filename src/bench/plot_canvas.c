/* plot_canvas.c - the raster primitives of the report pictures (see plot_canvas.h). */
#include "bench/plot_canvas.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <spng.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define W KILN_PLOT_WIDTH
#define H KILN_PLOT_HEIGHT

const kiln_rgb kiln_plot_palette[] = {{31, 119, 180}, {214, 39, 40}, {44, 160, 44}, {148, 103, 189},
                              {255, 127, 14}, {140, 86, 75}, {227, 119, 194}, {23, 190, 207}};
const kiln_rgb kiln_plot_black = {0, 0, 0}, kiln_plot_grey = {200, 200, 200};
const size_t kiln_plot_n_palette = sizeof kiln_plot_palette / sizeof kiln_plot_palette[0];

void kiln_plot_put(kiln_canvas *c, int x, int y, kiln_rgb col) {
    if (x < 0 || y < 0 || x >= W || y >= H) return;
    unsigned char *p = c->px + ((size_t)y * W + (size_t)x) * 3;
    p[0] = col.r;
    p[1] = col.g;
    p[2] = col.b;
}

void kiln_plot_line(kiln_canvas *c, int x0, int y0, int x1, int y1, kiln_rgb col) {
    int dx = abs(x1 - x0), dy = -abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1, e = dx + dy;
    for (int guard = 0; guard < 4 * (W + H); guard++) {
        kiln_plot_put(c, x0, y0, col);
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

void kiln_plot_disc(kiln_canvas *c, int x, int y, int r, kiln_rgb col, bool ring) {
    for (int j = -r; j <= r; j++)
        for (int i = -r; i <= r; i++) {
            int d = i * i + j * j;
            if (ring ? (d <= r * r && d >= (r - 1) * (r - 1)) : d <= r * r) kiln_plot_put(c, x + i, y + j, col);
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
void kiln_plot_text(kiln_canvas *c, int x, int y, const char *s, kiln_rgb col) {
    for (; *s; s++, x += 8) {
        unsigned g = glyph((char)toupper((unsigned char)*s));
        for (int row = 0; row < 5; row++)
            for (int bit = 0; bit < 3; bit++)
                if (g >> ((4 - row) * 3 + (2 - bit)) & 1)
                    for (int k = 0; k < 4; k++) kiln_plot_put(c, x + bit * 2 + k % 2, y + row * 2 + k / 2, col);
    }
}

void kiln_plot_frame(kiln_canvas *c, kiln_panel p, const char *title) {
    kiln_plot_line(c, p.x0, p.y1, p.x1, p.y1, kiln_plot_black);
    kiln_plot_line(c, p.x0, p.y0, p.x0, p.y1, kiln_plot_black);
    for (int k = 1; k < 4; k++) {
        int y = p.y0 + (p.y1 - p.y0) * k / 4;
        for (int x = p.x0 + 1; x < p.x1; x += 4) kiln_plot_put(c, x, y, kiln_plot_grey);
    }
    kiln_plot_text(c, p.x0, p.y0 - 16, title, kiln_plot_black);
}

int kiln_plot_map(double v, double lo, double hi, int a, int b) {
    if (!(hi > lo)) return (a + b) / 2;
    return a + (int)lround((v - lo) / (hi - lo) * (b - a));
}

void kiln_plot_range_labels(kiln_canvas *c, kiln_panel p, double lo, double hi, kiln_rgb col, int dx) {
    char buf[32];
    snprintf(buf, sizeof buf, "%.3g", hi);
    kiln_plot_text(c, p.x0 - 70 + dx, p.y0, buf, col);
    snprintf(buf, sizeof buf, "%.3g", lo);
    kiln_plot_text(c, p.x0 - 70 + dx, p.y1 - 10, buf, col);
}

kiln_status kiln_plot_write_png(const kiln_canvas *c, const char *path, kiln_err *err) {
    kiln_status st = KILN_OK;
    FILE *f = fopen(path, "wb");
    if (!f) st = KILN_FAIL(err, KILN_E_IO, "%s: %s", path, strerror(errno));
    spng_ctx *ctx = f ? spng_ctx_new(SPNG_CTX_ENCODER) : NULL;
    if (f && !ctx) st = KILN_FAIL(err, KILN_E_NOMEM, "plot: out of memory");
    if (ctx) {
        struct spng_ihdr ihdr = {.width = W, .height = H, .bit_depth = 8, .color_type = SPNG_COLOR_TYPE_TRUECOLOR};
        int rc = spng_set_png_file(ctx, f);
        if (!rc) rc = spng_set_ihdr(ctx, &ihdr);
        if (!rc) rc = spng_encode_image(ctx, c->px, (size_t)W * H * 3, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE);
        if (rc) st = KILN_FAIL(err, KILN_E_IO, "%s: %s", path, spng_strerror(rc));
        spng_ctx_free(ctx);
    }
    if (f && fclose(f) != 0 && st == KILN_OK) st = KILN_FAIL(err, KILN_E_IO, "%s: %s", path, strerror(errno));
    if (st != KILN_OK && f) remove(path);
    return st;
}

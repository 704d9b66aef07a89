/* plot_canvas.h - the raster the report pictures are drawn on (plot.c: seconds per image; plot_serve.c: a load
 * run): an RGB8 canvas of KILN_PLOT_WIDTH x KILN_PLOT_HEIGHT, lines, discs, a 3x5 pixel font at scale 2, framed
 * panels and the PNG encoder (libspng). Drawing outside the canvas is clipped, never an error. */
#ifndef KILN_BENCH_PLOT_CANVAS_H
#define KILN_BENCH_PLOT_CANVAS_H

#include <stdbool.h>
#include <stddef.h>

#include "base/status.h"
#include "bench/plot.h"

typedef struct kiln_canvas {
    unsigned char *px; /* RGB8, KILN_PLOT_WIDTH x KILN_PLOT_HEIGHT */
} kiln_canvas;

typedef struct kiln_rgb {
    unsigned char r, g, b;
} kiln_rgb;

typedef struct kiln_panel {
    int x0, y0, x1, y1; /* pixel box */
} kiln_panel;

extern const kiln_rgb kiln_plot_palette[];
extern const size_t kiln_plot_n_palette;
extern const kiln_rgb kiln_plot_black, kiln_plot_grey;

void kiln_plot_put(kiln_canvas *c, int x, int y, kiln_rgb col);
void kiln_plot_line(kiln_canvas *c, int x0, int y0, int x1, int y1, kiln_rgb col);
void kiln_plot_disc(kiln_canvas *c, int x, int y, int r, kiln_rgb col, bool ring); /* ring: the outline only */
void kiln_plot_text(kiln_canvas *c, int x, int y, const char *s, kiln_rgb col);    /* upper-cased, 8 px a char */
/* Axes, quarter grid lines and a title above the box. */
void kiln_plot_frame(kiln_canvas *c, kiln_panel p, const char *title);
/* v in [lo, hi] to a pixel in [a, b] (the middle when the range is empty). */
int kiln_plot_map(double v, double lo, double hi, int a, int b);
/* lo and hi printed left of the panel's bottom and top; dx shifts them. */
void kiln_plot_range_labels(kiln_canvas *c, kiln_panel p, double lo, double hi, kiln_rgb col, int dx);
/* Encodes the canvas into path (removed again on failure). */
kiln_status kiln_plot_write_png(const kiln_canvas *c, const char *path, kiln_err *err);

#endif

/* plot.h - a PNG picture of a seconds-per-image report (`kiln bench plot REPORT -o FILE.png`):
 *   top panel    seconds per image of every timed submit, one colour per graph, in run order (outliers ringed);
 *   bottom panel the telemetry trace of the timed windows (power W and SM clock, each scaled to its own range),
 *                or "NO TELEMETRY TRACE IN THIS REPORT" when it has no trace series.
 * Axis ranges are printed in a small built-in pixel font; the legend names the graphs. No plotting library:
 * a raster and libspng. */
#ifndef KILN_BENCH_PLOT_H
#define KILN_BENCH_PLOT_H

#include <jansson.h>

#include "base/status.h"

#define KILN_PLOT_WIDTH 960
#define KILN_PLOT_HEIGHT 600

/* Draws report (a seconds-per-image report that passed the schema) into path. KILN_E_INVALID for another kind
 * or a report with no timed submit; KILN_E_IO when the file cannot be written. */
kiln_status kiln_bench_plot(const json_t *report, const char *path, kiln_err *err);

/* A serve-load report (`kiln bench serve`): latency and queue wait of every request by send time, one colour
 * per run (plot_serve.c). KILN_E_INVALID when it has no request. */
kiln_status kiln_bench_plot_serve(const json_t *report, const char *path, kiln_err *err);

#endif

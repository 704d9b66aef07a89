/* progress_bar.h - a kiln_progress_fn that draws progress on a terminal, or prints plain lines otherwise.
 *
 *     kiln_progress_bar bar;
 *     kiln_progress_bar_init(&bar, stderr);          // a bar if stderr is a terminal, else one line per event
 *     req.progress = kiln_progress_bar_update;
 *     req.progress_ctx = &bar;
 *     kiln_generate(...);
 *     kiln_progress_bar_finish(&bar);                // ends the bar's line
 *
 * Terminal:  "Denoising   [##########..........] step 2/4  elapsed 12.3s  eta 12.1s" redrawn in place.
 * Not a terminal: "kiln: Denoising step 2/4 elapsed 12.3s eta 12.1s" once per event (logs stay readable).
 * Never cancels (always returns true).
 */
#ifndef KILN_PIPELINE_PROGRESS_BAR_H
#define KILN_PIPELINE_PROGRESS_BAR_H

#include <stdbool.h>
#include <stdio.h>

#include "kiln.h"

typedef struct kiln_progress_bar {
    FILE *out;
    bool tty;
    bool drawn; /* a bar line is open */
    bool quiet;
} kiln_progress_bar;

void kiln_progress_bar_init(kiln_progress_bar *bar, FILE *out);
bool kiln_progress_bar_update(void *ctx, const kiln_progress *p);
void kiln_progress_bar_finish(kiln_progress_bar *bar);
/* The text of one event, as printed (no newline); for tests. */
void kiln_progress_format(const kiln_progress *p, bool bar, char *buf, size_t cap);

#endif

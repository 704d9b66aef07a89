/* progress_bar.c - terminal bar or plain lines for request progress (see progress_bar.h). */
#include "pipeline/progress_bar.h"

#include <string.h>
#include <unistd.h>

void kiln_progress_bar_init(kiln_progress_bar *bar, FILE *out) {
    memset(bar, 0, sizeof *bar);
    bar->out = out;
    bar->tty = isatty(fileno(out)) != 0;
}

void kiln_progress_format(const kiln_progress *p, bool bar, char *buf, size_t cap) {
    char eta[32] = "";
    if (p->eta_s >= 0) snprintf(eta, sizeof eta, "  eta %.1fs", p->eta_s);
    if (p->n_steps > 0 && bar) {
        enum { WIDTH = 20 };
        char cells[WIDTH + 1];
        int full = p->step * WIDTH / p->n_steps;
        for (int i = 0; i < WIDTH; i++) cells[i] = i < full ? '#' : '.';
        cells[WIDTH] = 0;
        snprintf(buf, cap, "%-19s [%s] step %d/%d  elapsed %.1fs%s", kiln_stage_name(p->stage), cells, p->step,
                 p->n_steps, p->elapsed_s, eta);
    } else if (p->n_steps > 0) {
        snprintf(buf, cap, "%s step %d/%d elapsed %.1fs%s", kiln_stage_name(p->stage), p->step, p->n_steps,
                 p->elapsed_s, eta);
    } else {
        snprintf(buf, cap, "%s%s elapsed %.1fs", kiln_stage_name(p->stage), bar ? "..." : "", p->elapsed_s);
    }
}

bool kiln_progress_bar_update(void *ctx, const kiln_progress *p) {
    kiln_progress_bar *bar = ctx;
    if (!bar || bar->quiet) return true;
    char line[256];
    kiln_progress_format(p, bar->tty, line, sizeof line);
    if (bar->tty) {
        fprintf(bar->out, "\r\033[K%s", line);
        bar->drawn = true;
    } else {
        fprintf(bar->out, "kiln: %s\n", line);
    }
    fflush(bar->out);
    return true;
}

void kiln_progress_bar_finish(kiln_progress_bar *bar) {
    if (bar->tty && bar->drawn) fputc('\n', bar->out);
    bar->drawn = false;
}

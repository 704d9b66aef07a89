/* trace_capture.h - how the golden tests capture a pipeline's traces (pipeline/trace.h, kiln_generate_traced):
 * each named stage's floats appended in call order - per-image traces come one image at a time, and "x.image" is
 * stored as "x" - then looked up by name; and the PSNR of a uint8 image against a float one in [0, 255]. */
#ifndef KILN_TEST_TRACE_CAPTURE_H
#define KILN_TEST_TRACE_CAPTURE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRACE_CAPTURE_MAX 64

typedef struct trace_buf {
    char name[64];
    float *data;
    size_t n;
} trace_buf;

typedef struct traces {
    trace_buf t[TRACE_CAPTURE_MAX];
    int n;
} traces;

/* The trace callback: ctx is a traces. Stages past TRACE_CAPTURE_MAX are dropped (a test then finds none). */
static inline void trace_capture(void *ctx, const char *name, const float *data, size_t n) {
    traces *tr = ctx;
    char key[64];
    snprintf(key, sizeof key, "%s", name);
    char *dot = strstr(key, ".image");
    if (dot) *dot = 0;
    trace_buf *b = NULL;
    for (int i = 0; i < tr->n; i++)
        if (!strcmp(tr->t[i].name, key)) b = &tr->t[i];
    if (!b) {
        if (tr->n == TRACE_CAPTURE_MAX) return;
        b = &tr->t[tr->n++];
        snprintf(b->name, sizeof b->name, "%s", key);
    }
    b->data = realloc(b->data, (b->n + n) * sizeof(float));
    memcpy(b->data + b->n, data, n * sizeof(float));
    b->n += n;
}

static inline trace_buf *trace_find(traces *tr, const char *name) {
    for (int i = 0; i < tr->n; i++)
        if (!strcmp(tr->t[i].name, name)) return &tr->t[i];
    return NULL;
}

static inline void traces_free(traces *tr) {
    for (int i = 0; i < tr->n; i++) free(tr->t[i].data);
    tr->n = 0;
}

static inline double psnr_u8(const uint8_t *a, const float *b, size_t n) {
    double se = 0;
    for (size_t i = 0; i < n; i++) se += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return se == 0 ? 999.0 : 10.0 * log10(255.0 * 255.0 / (se / n));
}

#endif

/* png_write.h - RGB8 images to PNG bytes (libspng), with ComfyUI's text chunks ("prompt", "workflow") so a
 * saved image carries the graph that made it. */
#ifndef KILN_GRAPH_PNG_WRITE_H
#define KILN_GRAPH_PNG_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct kiln_png_text {
    const char *keyword; /* 1..79 Latin-1 characters */
    const char *text;
} kiln_png_text;

/* Encodes w x h RGB8 pixels. *out is malloc'd (free with free()), *len its size. */
kiln_status kiln_png_encode(const uint8_t *rgb, int w, int h, const kiln_png_text *texts, int n_texts,
                            void **out, size_t *len, kiln_err *err);

#endif

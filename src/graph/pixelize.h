/* pixelize.h - the pixelize post-process: box-average downscale by an integer factor, then nearest-neighbour
 * upscale back to the original size (the benchmark's `pixel4` graph uses factor 4).
 *
 * Each factor x factor block of the source (blocks at the right and bottom edges are clipped to the image)
 * becomes one pixel holding the rounded mean of the block per channel; upscaling repeats that pixel over the
 * block, so the output has the input's size. factor 1 is the identity.
 */
#ifndef KILN_GRAPH_PIXELIZE_H
#define KILN_GRAPH_PIXELIZE_H

#include <stdint.h>

#include "base/status.h"

/* Box-average downscale: src w x h x c (8-bit, interleaved) -> dst ceil(w/f) x ceil(h/f) x c. */
kiln_status kiln_downscale_box(const uint8_t *src, int w, int h, int c, int factor, uint8_t *dst, kiln_err *err);
/* Nearest-neighbour upscale: src sw x sh x c -> dst w x h x c, dst(x, y) = src(x / f, y / f). */
kiln_status kiln_upscale_nearest(const uint8_t *src, int sw, int sh, int c, int factor, int w, int h,
                                 uint8_t *dst, kiln_err *err);
/* Both, in place on one w x h x c image. */
kiln_status kiln_pixelize(uint8_t *img, int w, int h, int c, int factor, kiln_err *err);

#endif

/* image_load.h - decoding untrusted PNG, JPEG and WebP input images (references, init images, uploads) into
 * 8-bit RGB, strictly.
 *
 *     uint8_t *rgb; int w, h;
 *     KILN_TRY(kiln_image_load("ref.png", NULL, &rgb, &w, &h, &err));       // kiln_free(rgb)
 *     KILN_TRY(kiln_image_decode(bytes, len, NULL, &rgb, &w, &h, &err));    // from memory (an upload)
 *
 * The format comes from the magic bytes, never from a file name. The dimensions are read from the header and
 * checked against the limits BEFORE the pixel buffer is allocated, so a 30000x30000 header costs nothing.
 * Truncated or corrupt data is an error, never a partly grey image: libjpeg's "premature end" warnings count as
 * errors, PNG chunk CRCs are checked, an animated WebP is refused. Alpha is dropped and grey / palette images
 * are expanded, as PIL's convert("RGB") does (what the official pipelines apply to their inputs).
 * Errors: KILN_E_FORMAT (not an image, truncated, corrupt), KILN_E_LIMIT (dimensions or file size over the
 * limits), KILN_E_UNSUPPORTED (CMYK JPEG, animated WebP), KILN_E_NOT_FOUND / KILN_E_IO (file), KILN_E_NOMEM.
 */
#ifndef KILN_IO_IMAGE_LOAD_H
#define KILN_IO_IMAGE_LOAD_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct kiln_image_limits {
    int max_side;         /* widest and tallest accepted side, pixels */
    int64_t max_pixels;   /* width * height */
    size_t max_bytes;     /* encoded size (kiln_image_load: the file size) */
} kiln_image_limits;

/* 16384 per side, 64 megapixels, 256 MiB of encoded data. */
kiln_image_limits kiln_image_limits_default(void);

typedef enum kiln_image_format { KILN_IMAGE_UNKNOWN = 0, KILN_IMAGE_PNG, KILN_IMAGE_JPEG, KILN_IMAGE_WEBP } kiln_image_format;

/* The format the first bytes announce (KILN_IMAGE_UNKNOWN for anything else). */
kiln_image_format kiln_image_sniff(const uint8_t *data, size_t len);
const char *kiln_image_format_name(kiln_image_format f); /* "png", "jpeg", "webp", "unknown" */

/* limits NULL = kiln_image_limits_default(). On success *rgb (kiln_malloc'd, w*h*3, row-major) belongs to the
 * caller; on failure *rgb is NULL. */
kiln_status kiln_image_decode(const uint8_t *data, size_t len, const kiln_image_limits *limits, uint8_t **rgb,
                              int *width, int *height, kiln_err *err);
kiln_status kiln_image_load(const char *path, const kiln_image_limits *limits, uint8_t **rgb, int *width,
                            int *height, kiln_err *err);

#endif

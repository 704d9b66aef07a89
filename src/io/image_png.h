/* image_png.h - writing 8-bit RGB images as PNG, with the generation parameters in tEXt chunks.
 *
 *     kiln_png_text text[] = {{"prompt", "a red fox"}, {"seed", "42"}, {"steps", "4"}};
 *     KILN_TRY(kiln_png_write("out.png", rgb, 512, 512, text, 3, &err));
 *     uint8_t *png; size_t len;
 *     KILN_TRY(kiln_png_encode(rgb, 512, 512, text, 3, &png, &len, &err));   // free(png) with kiln_free
 *
 * kiln_png_write writes to "path.tmp" and renames, so a failure never leaves a half-written file at path.
 * Keys are 1-79 Latin-1 characters (PNG rule); values are stored as given (UTF-8 text goes into iTXt when it
 * is not plain ASCII, so no byte is mangled). Errors: KILN_E_INVALID (size 0 or over 65535, bad key),
 * KILN_E_IO (file), KILN_E_NOMEM.
 */
#ifndef KILN_IO_IMAGE_PNG_H
#define KILN_IO_IMAGE_PNG_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct kiln_png_text {
    const char *key;
    const char *value;
} kiln_png_text;

kiln_status kiln_png_encode(const uint8_t *rgb, int width, int height, const kiln_png_text *text, size_t n_text,
                            uint8_t **out, size_t *out_len, kiln_err *err);
kiln_status kiln_png_write(const char *path, const uint8_t *rgb, int width, int height, const kiln_png_text *text,
                           size_t n_text, kiln_err *err);

/* Reads an 8-bit RGB (or RGBA/gray, converted) PNG for tests and image inputs. *rgb is kiln_malloc'd.
 * If text/n_text are non-NULL, the text chunks are returned too (kiln_png_text_free). */
kiln_status kiln_png_read(const char *path, uint8_t **rgb, int *width, int *height, kiln_png_text **text,
                          size_t *n_text, kiln_err *err);
void kiln_png_text_free(kiln_png_text *text, size_t n);

#endif

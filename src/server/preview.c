/* preview.c - live previews during denoising (--preview-method latent2rgb): the DiT's latent tokens projected
 * to a small RGB image and JPEG-encoded with libjpeg(-turbo), for ComfyUI's binary PREVIEW_IMAGE frames.
 *
 * The projection is fixed and linear, per latent pixel: the 32 latent channels (batch-normalised, so about unit
 * variance) are split into three bands (channels 0-10, 11-21, 22-31) whose means drive R, G and B around mid
 * grey. It is kiln's own, not fitted to the real VAE's colours: it shows the layout forming step by step,
 * not the final colours. The preview is the latent's resolution (W/8 x H/8). */
#include <math.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h> /* after stdio.h and stddef.h: it uses FILE and size_t */

#include "base/alloc.h"
#include "server/server_internal.h"

uint8_t *kiln_preview_latent2rgb(const float *tokens, int h16, int w16, int *width, int *height) {
    int W = 2 * w16, H = 2 * h16;
    if (h16 <= 0 || w16 <= 0 || h16 > 4096 || w16 > 4096) return NULL;
    uint8_t *rgb = kiln_malloc((size_t)W * (size_t)H * 3);
    if (!rgb) return NULL;
    static const int band[4] = {0, 11, 22, 32};
    for (int y = 0; y < h16; y++)
        for (int x = 0; x < w16; x++) {
            const float *t = tokens + ((size_t)y * (size_t)w16 + (size_t)x) * 128;
            for (int pi = 0; pi < 2; pi++)
                for (int pj = 0; pj < 2; pj++) {
                    uint8_t *px = rgb + (((size_t)(2 * y + pi) * (size_t)W) + (size_t)(2 * x + pj)) * 3;
                    for (int k = 0; k < 3; k++) {
                        float sum = 0;
                        for (int c = band[k]; c < band[k + 1]; c++) sum += t[c * 4 + pi * 2 + pj];
                        /* a band mean of n unit-variance channels has sd 1/sqrt(n): scale back to ~unit */
                        int n = band[k + 1] - band[k];
                        float v = 0.5f + 0.25f * sum / sqrtf((float)n);
                        if (!(v > 0.0f)) v = 0.0f; /* NaN too */
                        if (v > 1.0f) v = 1.0f;
                        px[k] = (uint8_t)lrintf(v * 255.0f);
                    }
                }
        }
    *width = W;
    *height = H;
    return rgb;
}

/* libjpeg's default error handler exits the process: ours jumps back and the encode fails instead. */
typedef struct jpeg_fail {
    struct jpeg_error_mgr mgr;
    jmp_buf jump;
} jpeg_fail;

static void on_jpeg_error(j_common_ptr c) { longjmp(((jpeg_fail *)c->err)->jump, 1); }

bool kiln_jpeg_encode(const uint8_t *rgb, int width, int height, int quality, uint8_t **out, size_t *len) {
    struct jpeg_compress_struct c;
    jpeg_fail jerr;
    unsigned char *volatile buf = NULL;
    unsigned long size = 0;
    *out = NULL;
    *len = 0;
    c.err = jpeg_std_error(&jerr.mgr);
    jerr.mgr.error_exit = on_jpeg_error;
    if (setjmp(jerr.jump)) {
        jpeg_destroy_compress(&c);
        free(buf);
        return false;
    }
    jpeg_create_compress(&c);
    jpeg_mem_dest(&c, (unsigned char **)&buf, &size);
    c.image_width = (JDIMENSION)width;
    c.image_height = (JDIMENSION)height;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, quality, TRUE);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(rgb + (size_t)c.next_scanline * (size_t)width * 3);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    /* libjpeg's buffer comes from malloc; hand out a kiln_malloc copy so callers free it one way */
    *out = kiln_malloc(size ? size : 1);
    if (*out) memcpy(*out, buf, size);
    *len = size;
    free(buf);
    return *out != NULL && size > 0;
}

/* image_encode.c - the OpenAI route's output formats: PNG (libspng through io/image_png), JPEG (libjpeg-turbo,
 * preview.c) and WebP (libwebp), plus the nearest-neighbour resize that brings a latent preview to the size the
 * client asked for. */
#include <string.h>
#include <webp/encode.h>

#include "base/alloc.h"
#include "io/image_png.h"
#include "server/openai.h"

const char *kiln_oai_format_name(kiln_oai_format f) {
    return f == KILN_OAI_JPEG ? "jpeg" : f == KILN_OAI_WEBP ? "webp" : "png";
}

bool kiln_image_encode(kiln_oai_format f, const uint8_t *rgb, int w, int h, int quality, uint8_t **out,
                       size_t *len) {
    *out = NULL;
    *len = 0;
    if (w <= 0 || h <= 0 || w > 16384 || h > 16384) return false;
    if (quality < 0) quality = 0;
    if (quality > 100) quality = 100;
    if (f == KILN_OAI_JPEG) return kiln_jpeg_encode(rgb, w, h, quality, out, len);
    if (f == KILN_OAI_WEBP) {
        uint8_t *buf = NULL;
        size_t n = quality >= 100 ? WebPEncodeLosslessRGB(rgb, w, h, w * 3, &buf)
                                  : WebPEncodeRGB(rgb, w, h, w * 3, (float)quality, &buf);
        if (!n || !buf) {
            WebPFree(buf);
            return false;
        }
        *out = kiln_malloc(n); /* libwebp's buffer goes back through WebPFree; callers free one way */
        if (*out) memcpy(*out, buf, n);
        WebPFree(buf);
        *len = n;
        return *out != NULL;
    }
    kiln_err err = {0};
    return kiln_png_encode(rgb, w, h, NULL, 0, out, len, &err) == KILN_OK;
}

uint8_t *kiln_image_resize_nearest(const uint8_t *rgb, int w, int h, int ow, int oh) {
    if (w <= 0 || h <= 0 || ow <= 0 || oh <= 0 || ow > 16384 || oh > 16384) return NULL;
    uint8_t *o = kiln_malloc((size_t)ow * (size_t)oh * 3);
    if (!o) return NULL;
    for (int y = 0; y < oh; y++) {
        const uint8_t *src = rgb + (size_t)((int64_t)y * h / oh) * (size_t)w * 3;
        uint8_t *dst = o + (size_t)y * (size_t)ow * 3;
        for (int x = 0; x < ow; x++) memcpy(dst + (size_t)x * 3, src + (size_t)((int64_t)x * w / ow) * 3, 3);
    }
    return o;
}

/* pixelize.c - box-average downscale and nearest-neighbour upscale (see pixelize.h). */
#include "graph/pixelize.h"

#include "base/alloc.h"

static kiln_status check(int w, int h, int c, int factor, kiln_err *err) {
    if (w <= 0 || h <= 0 || c <= 0 || c > 4) return KILN_FAIL(err, KILN_E_INVALID, "pixelize: bad image %dx%dx%d", w, h, c);
    if (factor < 1 || factor > 4096) return KILN_FAIL(err, KILN_E_INVALID, "pixelize: factor %d out of 1..4096", factor);
    return KILN_OK;
}

kiln_status kiln_downscale_box(const uint8_t *src, int w, int h, int c, int factor, uint8_t *dst, kiln_err *err) {
    KILN_TRY(check(w, h, c, factor, err));
    int sw = (w + factor - 1) / factor, sh = (h + factor - 1) / factor;
    for (int by = 0; by < sh; by++) {
        int y0 = by * factor, y1 = y0 + factor < h ? y0 + factor : h;
        for (int bx = 0; bx < sw; bx++) {
            int x0 = bx * factor, x1 = x0 + factor < w ? x0 + factor : w;
            uint32_t count = (uint32_t)((y1 - y0) * (x1 - x0));
            for (int ch = 0; ch < c; ch++) {
                uint64_t sum = 0;
                for (int y = y0; y < y1; y++)
                    for (int x = x0; x < x1; x++) sum += src[((size_t)y * (size_t)w + (size_t)x) * (size_t)c + (size_t)ch];
                dst[((size_t)by * (size_t)sw + (size_t)bx) * (size_t)c + (size_t)ch] = (uint8_t)((sum + count / 2) / count);
            }
        }
    }
    return KILN_OK;
}

kiln_status kiln_upscale_nearest(const uint8_t *src, int sw, int sh, int c, int factor, int w, int h,
                                 uint8_t *dst, kiln_err *err) {
    KILN_TRY(check(w, h, c, factor, err));
    if (sw != (w + factor - 1) / factor || sh != (h + factor - 1) / factor)
        return KILN_FAIL(err, KILN_E_INVALID, "pixelize: %dx%d is not %dx%d downscaled by %d", sw, sh, w, h, factor);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int ch = 0; ch < c; ch++)
                dst[((size_t)y * (size_t)w + (size_t)x) * (size_t)c + (size_t)ch] =
                    src[((size_t)(y / factor) * (size_t)sw + (size_t)(x / factor)) * (size_t)c + (size_t)ch];
    return KILN_OK;
}

kiln_status kiln_pixelize(uint8_t *img, int w, int h, int c, int factor, kiln_err *err) {
    KILN_TRY(check(w, h, c, factor, err));
    if (factor == 1) return KILN_OK;
    int sw = (w + factor - 1) / factor, sh = (h + factor - 1) / factor;
    uint8_t *small = kiln_malloc((size_t)sw * (size_t)sh * (size_t)c);
    if (!small) return KILN_FAIL(err, KILN_E_NOMEM, "pixelize: out of memory");
    kiln_status s = kiln_downscale_box(img, w, h, c, factor, small, err);
    if (s == KILN_OK) s = kiln_upscale_nearest(small, sw, sh, c, factor, w, h, img, err);
    kiln_free(small);
    return s;
}

/* ref_image.c - reference image preparation (ref_image.h): the pipeline's checks, PIL's LANCZOS resize, the
 * multiple-of-16 center crop. The resampler follows Pillow's libImaging/Resample.c algorithm (filter support
 * scaled when reducing, coefficients normalised per output pixel then rounded to 22-bit fixed point, a
 * horizontal pass over only the rows the vertical pass reads, each pass clipped to 8 bits); written from its
 * description, so that kiln's reference pixels are the official pipeline's. */
#include "pipeline/ref_image.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "base/alloc.h"

#define PRECISION_BITS (32 - 8 - 2)

static double sinc(double x) {
    if (x == 0.0) return 1.0;
    x *= M_PI;
    return sin(x) / x;
}

static double lanczos(double x) { return (-3.0 <= x && x < 3.0) ? sinc(x) * sinc(x / 3.0) : 0.0; }

/* Per output pixel: the first input index, the count, and ksize fixed-point weights. */
typedef struct coeffs {
    int ksize;
    int *bounds;   /* [out, 2] */
    int32_t *k;    /* [out, ksize] */
} coeffs;

static kiln_status precompute(int in_size, int out_size, coeffs *c, kiln_err *err) {
    double scale = (double)in_size / out_size, filterscale = scale < 1.0 ? 1.0 : scale;
    double support = 3.0 * filterscale;
    int ksize = (int)ceil(support) * 2 + 1;
    double *pre = kiln_malloc((size_t)out_size * ksize * sizeof(double));
    c->bounds = kiln_malloc((size_t)out_size * 2 * sizeof(int));
    c->k = kiln_malloc((size_t)out_size * ksize * sizeof(int32_t));
    c->ksize = ksize;
    if (!pre || !c->bounds || !c->k) {
        kiln_free(pre);
        return KILN_FAIL(err, KILN_E_NOMEM, "resize: out of memory");
    }
    for (int xx = 0; xx < out_size; xx++) {
        double center = (xx + 0.5) * scale, ww = 0.0, ss = 1.0 / filterscale;
        int xmin = (int)(center - support + 0.5), xmax = (int)(center + support + 0.5);
        if (xmin < 0) xmin = 0;
        if (xmax > in_size) xmax = in_size;
        xmax -= xmin;
        double *k = pre + (size_t)xx * ksize;
        int x;
        for (x = 0; x < xmax; x++) {
            double w = lanczos((x + xmin - center + 0.5) * ss);
            k[x] = w;
            ww += w;
        }
        for (x = 0; x < xmax; x++)
            if (ww != 0.0) k[x] /= ww;
        for (; x < ksize; x++) k[x] = 0;
        c->bounds[xx * 2] = xmin;
        c->bounds[xx * 2 + 1] = xmax;
    }
    for (size_t i = 0; i < (size_t)out_size * ksize; i++)
        c->k[i] = pre[i] < 0 ? (int32_t)(-0.5 + pre[i] * (1 << PRECISION_BITS)) : (int32_t)(0.5 + pre[i] * (1 << PRECISION_BITS));
    kiln_free(pre);
    return KILN_OK;
}

static uint8_t clip8(int64_t v) {
    v >>= PRECISION_BITS; /* arithmetic shift: floor, as Pillow's lookup index */
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

kiln_status kiln_resize_lanczos(const uint8_t *in, int iw, int ih, uint8_t *out, int ow, int oh, kiln_err *err) {
    if (iw == ow && ih == oh) {
        memcpy(out, in, (size_t)iw * ih * 3);
        return KILN_OK;
    }
    coeffs ch = {0}, cv = {0};
    uint8_t *tmp = NULL;
    kiln_status s = precompute(iw, ow, &ch, err);
    if (s == KILN_OK) s = precompute(ih, oh, &cv, err);
    if (s != KILN_OK) goto out;
    const bool need_h = iw != ow, need_v = ih != oh;
    /* The rows the vertical pass reads: [first, last). */
    int first = cv.bounds[0], last = cv.bounds[oh * 2 - 2] + cv.bounds[oh * 2 - 1];
    const uint8_t *src = in;
    int src_rows0 = 0; /* row index of src's first row in the input */
    if (need_h) {
        int rows = last - first;
        tmp = kiln_malloc((size_t)ow * rows * 3);
        if (!tmp) {
            s = KILN_FAIL(err, KILN_E_NOMEM, "resize: out of memory");
            goto out;
        }
        for (int y = 0; y < rows; y++) {
            const uint8_t *row = in + (size_t)(y + first) * iw * 3;
            for (int xx = 0; xx < ow; xx++) {
                int xmin = ch.bounds[xx * 2], xmax = ch.bounds[xx * 2 + 1];
                const int32_t *k = ch.k + (size_t)xx * ch.ksize;
                int64_t s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;
                for (int x = 0; x < xmax; x++) {
                    const uint8_t *p = row + (size_t)(x + xmin) * 3;
                    s0 += (int64_t)p[0] * k[x];
                    s1 += (int64_t)p[1] * k[x];
                    s2 += (int64_t)p[2] * k[x];
                }
                uint8_t *o = tmp + ((size_t)y * ow + xx) * 3;
                o[0] = clip8(s0);
                o[1] = clip8(s1);
                o[2] = clip8(s2);
            }
        }
        src = tmp;
        src_rows0 = first;
    }
    if (!need_v) {
        memcpy(out, src, (size_t)ow * oh * 3); /* the horizontal pass read rows 0..ih exactly */
        goto out;
    }
    for (int yy = 0; yy < oh; yy++) {
        int ymin = cv.bounds[yy * 2] - src_rows0, ymax = cv.bounds[yy * 2 + 1];
        const int32_t *k = cv.k + (size_t)yy * cv.ksize;
        for (int xx = 0; xx < ow; xx++) {
            int64_t s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;
            for (int y = 0; y < ymax; y++) {
                const uint8_t *p = src + ((size_t)(y + ymin) * ow + xx) * 3;
                s0 += (int64_t)p[0] * k[y];
                s1 += (int64_t)p[1] * k[y];
                s2 += (int64_t)p[2] * k[y];
            }
            uint8_t *o = out + ((size_t)yy * ow + xx) * 3;
            o[0] = clip8(s0);
            o[1] = clip8(s1);
            o[2] = clip8(s2);
        }
    }
out:
    kiln_free(ch.bounds);
    kiln_free(ch.k);
    kiln_free(cv.bounds);
    kiln_free(cv.k);
    kiln_free(tmp);
    return s;
}

kiln_status kiln_ref_prepare(const uint8_t *rgb, int w, int h, uint8_t **out, int *ow, int *oh, kiln_err *err) {
    *out = NULL;
    if (!rgb || w < KILN_REF_MIN_SIDE || h < KILN_REF_MIN_SIDE)
        return KILN_FAIL(err, KILN_E_INVALID, "image too small: %dx%d; both sides must be at least %d pixels (as in "
                         "the official pipeline)", w, h, KILN_REF_MIN_SIDE);
    double aspect = w > h ? (double)w / h : (double)h / w;
    if (aspect > KILN_REF_MAX_ASPECT)
        return KILN_FAIL(err, KILN_E_INVALID, "image aspect ratio too extreme: %dx%d (%.1f:1, at most %d:1)", w, h,
                         aspect, KILN_REF_MAX_ASPECT);
    const uint8_t *src = rgb;
    uint8_t *resized = NULL;
    if ((int64_t)w * h > KILN_REF_MAX_AREA) {
        double scale = sqrt((double)KILN_REF_MAX_AREA / ((double)w * h));
        int rw = (int)(w * scale), rh = (int)(h * scale);
        resized = kiln_malloc((size_t)rw * rh * 3);
        if (!resized) return KILN_FAIL(err, KILN_E_NOMEM, "reference image: out of memory");
        kiln_status s = kiln_resize_lanczos(rgb, w, h, resized, rw, rh, err);
        if (s != KILN_OK) {
            kiln_free(resized);
            return s;
        }
        src = resized;
        w = rw;
        h = rh;
    }
    int cw = w / 16 * 16, chh = h / 16 * 16, left = (w - cw) / 2, top = (h - chh) / 2;
    uint8_t *o = kiln_malloc((size_t)cw * chh * 3);
    if (!o) {
        kiln_free(resized);
        return KILN_FAIL(err, KILN_E_NOMEM, "reference image: out of memory");
    }
    for (int y = 0; y < chh; y++) memcpy(o + (size_t)y * cw * 3, src + ((size_t)(y + top) * w + left) * 3, (size_t)cw * 3);
    kiln_free(resized);
    *out = o;
    *ow = cw;
    *oh = chh;
    return KILN_OK;
}

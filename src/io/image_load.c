/* image_load.c - strict PNG (libspng), JPEG (libjpeg-turbo) and WebP (libwebp) decoding to RGB8 (image_load.h).
 * Each decoder reads the header first, the limits are checked, and only then is the pixel buffer allocated. */
#include "io/image_load.h"

#include <errno.h>
#include <setjmp.h>
#include <spng.h>
#include <stdio.h> /* before jpeglib.h, which uses FILE */
#include <jpeglib.h>
#include <string.h>
#include <sys/stat.h>
#include <webp/decode.h>

#include "base/alloc.h"

kiln_image_limits kiln_image_limits_default(void) {
    return (kiln_image_limits){.max_side = 16384, .max_pixels = 64LL * 1024 * 1024, .max_bytes = 256u << 20};
}

kiln_image_format kiln_image_sniff(const uint8_t *d, size_t n) {
    static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (n >= 8 && memcmp(d, png_sig, 8) == 0) return KILN_IMAGE_PNG;
    if (n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF) return KILN_IMAGE_JPEG;
    if (n >= 12 && memcmp(d, "RIFF", 4) == 0 && memcmp(d + 8, "WEBP", 4) == 0) return KILN_IMAGE_WEBP;
    return KILN_IMAGE_UNKNOWN;
}

const char *kiln_image_format_name(kiln_image_format f) {
    switch (f) {
    case KILN_IMAGE_PNG: return "png";
    case KILN_IMAGE_JPEG: return "jpeg";
    case KILN_IMAGE_WEBP: return "webp";
    default: return "unknown";
    }
}

/* The one place the dimensions are judged: before any pixel allocation. */
static kiln_status check_dims(const char *fmt, int64_t w, int64_t h, const kiln_image_limits *lim, kiln_err *err) {
    if (w <= 0 || h <= 0) return KILN_FAIL(err, KILN_E_FORMAT, "%s image with an empty size (%lldx%lld)", fmt, (long long)w, (long long)h);
    if (w > lim->max_side || h > lim->max_side || w * h > lim->max_pixels)
        return KILN_FAIL(err, KILN_E_LIMIT, "%s image of %lldx%lld is over the limit (%d pixels a side, %lld pixels)", fmt,
                         (long long)w, (long long)h, lim->max_side, (long long)lim->max_pixels);
    return KILN_OK;
}

static kiln_status decode_png(const uint8_t *data, size_t len, const kiln_image_limits *lim, uint8_t **rgb, int *w,
                              int *h, kiln_err *err) {
    spng_ctx *ctx = spng_ctx_new(0);
    if (!ctx) return KILN_FAIL(err, KILN_E_NOMEM, "png: out of memory");
    kiln_status s = KILN_OK;
    uint8_t *buf = NULL;
    struct spng_ihdr ihdr;
    /* libspng's own caps too (it refuses an IHDR over them while reading the header), and ancillary chunks
     * bounded so a hostile file cannot make it cache megabytes of text. */
    spng_set_image_limits(ctx, (uint32_t)lim->max_side, (uint32_t)lim->max_side);
    spng_set_chunk_limits(ctx, 64u << 20, 64u << 20);
    int e = spng_set_png_buffer(ctx, data, len);
    if (!e) e = spng_get_ihdr(ctx, &ihdr);
    if (e == SPNG_EWIDTH || e == SPNG_EHEIGHT || e == SPNG_EUSER_WIDTH || e == SPNG_EUSER_HEIGHT) {
        /* the IHDR's own numbers for the message (libspng does not hand them out past its limit) */
        uint32_t hw = len >= 24 ? (uint32_t)data[16] << 24 | (uint32_t)data[17] << 16 | (uint32_t)data[18] << 8 | data[19] : 0;
        uint32_t hh = len >= 24 ? (uint32_t)data[20] << 24 | (uint32_t)data[21] << 16 | (uint32_t)data[22] << 8 | data[23] : 0;
        s = KILN_FAIL(err, KILN_E_LIMIT, "png: image of %ux%u is over the limit (%d pixels a side)", hw, hh, lim->max_side);
        goto out;
    }
    if (e) {
        s = KILN_FAIL(err, KILN_E_FORMAT, "png: bad header: %s", spng_strerror(e));
        goto out;
    }
    if ((s = check_dims("png", ihdr.width, ihdr.height, lim, err)) != KILN_OK) goto out;
    size_t n = 0;
    if ((e = spng_decoded_image_size(ctx, SPNG_FMT_RGB8, &n)) != 0 || n != (size_t)ihdr.width * ihdr.height * 3) {
        s = KILN_FAIL(err, KILN_E_FORMAT, "png: cannot decode to RGB: %s", spng_strerror(e));
        goto out;
    }
    if (!(buf = kiln_malloc(n))) {
        s = KILN_FAIL(err, KILN_E_NOMEM, "png: out of memory for %ux%u", ihdr.width, ihdr.height);
        goto out;
    }
    /* No SPNG_DECODE_TRNS / gamma: PIL's convert("RGB") drops transparency and applies no gamma. */
    if ((e = spng_decode_image(ctx, buf, n, SPNG_FMT_RGB8, 0)) != 0) {
        s = KILN_FAIL(err, KILN_E_FORMAT, "png: %s%s", spng_strerror(e),
                      e == SPNG_EOF || e == SPNG_IO_EOF ? " (truncated file)" : "");
        goto out;
    }
    *rgb = buf;
    buf = NULL;
    *w = (int)ihdr.width;
    *h = (int)ihdr.height;
out:
    kiln_free(buf);
    spng_ctx_free(ctx);
    return s;
}

typedef struct jpeg_err {
    struct jpeg_error_mgr mgr;
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX];
} jpeg_err;

static void jpeg_on_error(j_common_ptr c) {
    jpeg_err *je = (jpeg_err *)c->err;
    c->err->format_message(c, je->msg);
    longjmp(je->jump, 1);
}

/* Warnings (a premature end of data above all: libjpeg then pads with grey) are fatal here: strict input. */
static void jpeg_on_message(j_common_ptr c, int level) {
    if (level < 0) jpeg_on_error(c);
}

static kiln_status decode_jpeg(const uint8_t *data, size_t len, const kiln_image_limits *lim, uint8_t **rgb, int *w,
                               int *h, kiln_err *err) {
    struct jpeg_decompress_struct cinfo;
    jpeg_err je;
    memset(&je, 0, sizeof je);
    cinfo.err = jpeg_std_error(&je.mgr);
    je.mgr.error_exit = jpeg_on_error;
    je.mgr.emit_message = jpeg_on_message;
    uint8_t *volatile buf = NULL;
    volatile kiln_status s = KILN_OK;
    if (setjmp(je.jump)) {
        kiln_free(buf);
        jpeg_destroy_decompress(&cinfo);
        if (s == KILN_OK) s = KILN_FAIL(err, KILN_E_FORMAT, "jpeg: %s", je.msg);
        return s;
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, data, (unsigned long)len);
    jpeg_read_header(&cinfo, TRUE);
    if ((s = check_dims("jpeg", cinfo.image_width, cinfo.image_height, lim, err)) != KILN_OK) {
        jpeg_destroy_decompress(&cinfo);
        return s;
    }
    if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
        jpeg_destroy_decompress(&cinfo);
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "jpeg: CMYK images are not supported (convert it to RGB)");
    }
    cinfo.out_color_space = JCS_RGB;
    jpeg_start_decompress(&cinfo);
    const size_t stride = (size_t)cinfo.output_width * 3;
    if (cinfo.output_components != 3 || !(buf = kiln_malloc(stride * cinfo.output_height))) {
        jpeg_destroy_decompress(&cinfo);
        return KILN_FAIL(err, KILN_E_NOMEM, "jpeg: out of memory for %ux%u", cinfo.image_width, cinfo.image_height);
    }
    while (cinfo.output_scanline < cinfo.output_height) {
        JSAMPROW row = buf + stride * cinfo.output_scanline;
        jpeg_read_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_decompress(&cinfo);
    *w = (int)cinfo.output_width;
    *h = (int)cinfo.output_height;
    jpeg_destroy_decompress(&cinfo);
    *rgb = buf;
    return KILN_OK;
}

static kiln_status decode_webp(const uint8_t *data, size_t len, const kiln_image_limits *lim, uint8_t **rgb, int *w,
                               int *h, kiln_err *err) {
    WebPBitstreamFeatures f;
    VP8StatusCode st = WebPGetFeatures(data, len, &f);
    if (st == VP8_STATUS_NOT_ENOUGH_DATA) return KILN_FAIL(err, KILN_E_FORMAT, "webp: truncated header");
    if (st != VP8_STATUS_OK) return KILN_FAIL(err, KILN_E_FORMAT, "webp: bad header (status %d)", (int)st);
    if (f.has_animation) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "webp: animated images are not supported");
    kiln_status s = check_dims("webp", f.width, f.height, lim, err);
    if (s != KILN_OK) return s;
    const size_t stride = (size_t)f.width * 3, n = stride * (size_t)f.height;
    uint8_t *buf = kiln_malloc(n);
    if (!buf) return KILN_FAIL(err, KILN_E_NOMEM, "webp: out of memory for %dx%d", f.width, f.height);
    if (!WebPDecodeRGBInto(data, len, buf, n, (int)stride)) {
        kiln_free(buf);
        return KILN_FAIL(err, KILN_E_FORMAT, "webp: corrupt or truncated image data");
    }
    *rgb = buf;
    *w = f.width;
    *h = f.height;
    return KILN_OK;
}

kiln_status kiln_image_decode(const uint8_t *data, size_t len, const kiln_image_limits *limits, uint8_t **rgb,
                              int *width, int *height, kiln_err *err) {
    const kiln_image_limits lim = limits ? *limits : kiln_image_limits_default();
    *rgb = NULL;
    *width = *height = 0;
    if (!data || len == 0) return KILN_FAIL(err, KILN_E_FORMAT, "empty image data");
    if (len > lim.max_bytes) return KILN_FAIL(err, KILN_E_LIMIT, "image data of %zu bytes is over the limit (%zu)", len, lim.max_bytes);
    switch (kiln_image_sniff(data, len)) {
    case KILN_IMAGE_PNG: return decode_png(data, len, &lim, rgb, width, height, err);
    case KILN_IMAGE_JPEG: return decode_jpeg(data, len, &lim, rgb, width, height, err);
    case KILN_IMAGE_WEBP: return decode_webp(data, len, &lim, rgb, width, height, err);
    default: return KILN_FAIL(err, KILN_E_FORMAT, "not an image: PNG, JPEG or WebP expected (%zu bytes)", len);
    }
}

kiln_status kiln_image_load(const char *path, const kiln_image_limits *limits, uint8_t **rgb, int *width,
                            int *height, kiln_err *err) {
    const kiln_image_limits lim = limits ? *limits : kiln_image_limits_default();
    *rgb = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return KILN_FAIL(err, errno == ENOENT ? KILN_E_NOT_FOUND : KILN_E_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return KILN_FAIL(err, KILN_E_IO, "%s: not a regular file", path);
    }
    if ((uint64_t)st.st_size > lim.max_bytes) {
        fclose(f);
        return KILN_FAIL(err, KILN_E_LIMIT, "%s: %lld bytes, over the image limit (%zu)", path, (long long)st.st_size, lim.max_bytes);
    }
    size_t n = (size_t)st.st_size;
    uint8_t *data = kiln_malloc(n ? n : 1);
    if (!data) {
        fclose(f);
        return KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory", path);
    }
    size_t got = fread(data, 1, n, f);
    int rerr = ferror(f);
    fclose(f);
    if (rerr || got != n) {
        kiln_free(data);
        return KILN_FAIL(err, KILN_E_IO, "%s: read failed", path);
    }
    kiln_status s = kiln_image_decode(data, n, &lim, rgb, width, height, err);
    kiln_free(data);
    if (s != KILN_OK && err) kiln_err_prefix(err, "%s", path);
    return s;
}

/* image_png.c - PNG writing/reading with libpng (see image_png.h). */
#include "io/image_png.h"

#include <errno.h>
#include <png.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"

typedef struct membuf {
    uint8_t *data;
    size_t len, cap;
    bool oom;
} membuf;

static void mem_write(png_structp png, png_bytep data, png_size_t n) {
    membuf *b = png_get_io_ptr(png);
    if (b->oom) return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 65536;
        while (cap < b->len + n) cap *= 2;
        uint8_t *p = kiln_realloc(b->data, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, n);
    b->len += n;
}

static void mem_flush(png_structp png) { (void)png; }

static bool ascii_only(const char *s) {
    for (; *s; s++)
        if ((unsigned char)*s >= 0x80) return false;
    return true;
}

static kiln_status check_args(int width, int height, const kiln_png_text *text, size_t n_text, kiln_err *err) {
    if (width <= 0 || height <= 0 || width > 65535 || height > 65535)
        return KILN_FAIL(err, KILN_E_INVALID, "png: bad image size %dx%d", width, height);
    for (size_t i = 0; i < n_text; i++) {
        size_t kl = text[i].key ? strlen(text[i].key) : 0;
        if (kl == 0 || kl > 79 || !ascii_only(text[i].key))
            return KILN_FAIL(err, KILN_E_INVALID, "png: text key %zu must be 1-79 ASCII characters", i);
        if (!text[i].value) return KILN_FAIL(err, KILN_E_INVALID, "png: text '%s' has no value", text[i].key);
    }
    return KILN_OK;
}

/* The libpng part; returns false when libpng raised an error (longjmp) or the buffer ran out. */
static bool encode(membuf *mb, const uint8_t *rgb, int width, int height, const kiln_png_text *text, size_t n_text) {
    /* Allocated before setjmp so the longjmp path sees its value. */
    png_textp pt = n_text ? calloc(n_text, sizeof *pt) : NULL;
    if (n_text && !pt) return false;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        if (png) png_destroy_write_struct(&png, NULL);
        free(pt);
        return false;
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        free(pt);
        return false;
    }
    png_set_write_fn(png, mb, mem_write, mem_flush);
    png_set_IHDR(png, info, (png_uint_32)width, (png_uint_32)height, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (n_text) {
        for (size_t i = 0; i < n_text; i++) {
            pt[i].key = (png_charp)text[i].key;
            pt[i].text = (png_charp)text[i].value;
            pt[i].compression = ascii_only(text[i].value) ? PNG_TEXT_COMPRESSION_NONE : PNG_ITXT_COMPRESSION_NONE;
        }
        png_set_text(png, info, pt, (int)n_text);
    }
    png_write_info(png, info);
    for (int y = 0; y < height; y++) png_write_row(png, (png_const_bytep)(rgb + (size_t)y * width * 3));
    png_write_end(png, info);
    png_destroy_write_struct(&png, &info);
    free(pt);
    return !mb->oom;
}

kiln_status kiln_png_encode(const uint8_t *rgb, int width, int height, const kiln_png_text *text, size_t n_text,
                            uint8_t **out, size_t *out_len, kiln_err *err) {
    KILN_TRY(check_args(width, height, text, n_text, err));
    membuf mb = {0};
    if (!encode(&mb, rgb, width, height, text, n_text)) {
        kiln_free(mb.data);
        return KILN_FAIL(err, KILN_E_NOMEM, "png: encoding a %dx%d image failed (out of memory)", width, height);
    }
    *out = mb.data;
    *out_len = mb.len;
    return KILN_OK;
}

kiln_status kiln_png_write(const char *path, const uint8_t *rgb, int width, int height, const kiln_png_text *text,
                           size_t n_text, kiln_err *err) {
    uint8_t *buf;
    size_t len;
    KILN_TRY(kiln_png_encode(rgb, width, height, text, n_text, &buf, &len, err));
    size_t pl = strlen(path);
    char *tmp = kiln_malloc(pl + 5);
    if (!tmp) {
        kiln_free(buf);
        return KILN_FAIL(err, KILN_E_NOMEM, "png: out of memory");
    }
    memcpy(tmp, path, pl);
    memcpy(tmp + pl, ".tmp", 5);
    kiln_status s = KILN_OK;
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        s = KILN_FAIL(err, KILN_E_IO, "%s: %s", path, strerror(errno));
    } else {
        bool ok = fwrite(buf, 1, len, f) == len;
        ok = (fflush(f) == 0) && ok;
        ok = (fclose(f) == 0) && ok;
        if (!ok || rename(tmp, path) != 0) {
            s = KILN_FAIL(err, KILN_E_IO, "%s: %s", path, strerror(errno));
            unlink(tmp);
        }
    }
    kiln_free(tmp);
    kiln_free(buf);
    return s;
}

kiln_status kiln_png_read(const char *path, uint8_t **rgb, int *width, int *height, kiln_png_text **text,
                          size_t *n_text, kiln_err *err) {
    FILE *probe = fopen(path, "rb");
    if (!probe) return KILN_FAIL(err, errno == ENOENT ? KILN_E_NOT_FOUND : KILN_E_IO, "%s: %s", path, strerror(errno));
    fclose(probe);
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&im, path))
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: not a readable PNG: %s", path, im.message);
    im.format = PNG_FORMAT_RGB;
    size_t n = PNG_IMAGE_SIZE(im);
    uint8_t *buf = kiln_malloc(n);
    if (!buf) {
        png_image_free(&im);
        return KILN_FAIL(err, KILN_E_NOMEM, "%s: out of memory", path);
    }
    if (!png_image_finish_read(&im, NULL, buf, 0, NULL)) {
        kiln_free(buf);
        return KILN_FAIL(err, KILN_E_FORMAT, "%s: %s", path, im.message);
    }
    *rgb = buf;
    *width = (int)im.width;
    *height = (int)im.height;
    if (text && n_text) {
        *text = NULL;
        *n_text = 0;
        FILE *f = fopen(path, "rb");
        if (!f) return KILN_OK;
        png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
        png_infop info = png ? png_create_info_struct(png) : NULL;
        if (png && info && !setjmp(png_jmpbuf(png))) {
            png_init_io(png, f);
            png_read_info(png, info);
            png_textp pt;
            int nt = 0;
            png_get_text(png, info, &pt, &nt);
            kiln_png_text *out = nt ? kiln_calloc((size_t)nt, sizeof *out) : NULL;
            if (out) {
                for (int i = 0; i < nt; i++) {
                    out[i].key = kiln_strdup(pt[i].key);
                    out[i].value = kiln_strdup(pt[i].text ? pt[i].text : "");
                }
                *text = out;
                *n_text = (size_t)nt;
            }
        }
        if (png) png_destroy_read_struct(&png, info ? &info : NULL, NULL);
        fclose(f);
    }
    return KILN_OK;
}

void kiln_png_text_free(kiln_png_text *text, size_t n) {
    if (!text) return;
    for (size_t i = 0; i < n; i++) {
        kiln_free((void *)text[i].key);
        kiln_free((void *)text[i].value);
    }
    kiln_free(text);
}

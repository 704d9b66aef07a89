/* test_io_image_load.c - PNG/JPEG/WebP input decoding (io/image_load.h) against what PIL's convert("RGB")
 * gives for the same files (tests/data/images, tools/reference/make_image_inputs.py), and the refusals: a
 * truncated PNG / JPEG / WebP, a 30000x30000 header (refused before any allocation), a text file, the caps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "io/image_load.h"
#include "io/image_png.h"
#include "test.h"

static char *data_path(const char *name) {
    static char buf[4096];
    const char *src = getenv("KILN_SOURCE_DIR");
    snprintf(buf, sizeof buf, "%s/tests/data/images/%s", src ? src : ".", name);
    return buf;
}

/* Decodes name and compares with name.expect.png (PIL's pixels); lossy formats may differ by max_diff (PIL
 * bundles its own libjpeg-turbo / libwebp builds). */
static void check_file(const char *name, int max_diff) {
    kiln_err err = {0};
    uint8_t *rgb = NULL, *want = NULL;
    int w = 0, h = 0, ww = 0, wh = 0;
    CHECK_MSG(kiln_image_load(data_path(name), NULL, &rgb, &w, &h, &err) == KILN_OK, "%s: %s", name, err.msg);
    char exp[256];
    snprintf(exp, sizeof exp, "%s.expect.png", name);
    CHECK_MSG(kiln_png_read(data_path(exp), &want, &ww, &wh, NULL, NULL, &err) == KILN_OK, "%s", err.msg);
    if (!rgb || !want) goto out;
    CHECK_EQ_INT(w, ww);
    CHECK_EQ_INT(h, wh);
    if (w != ww || h != wh) goto out;
    int worst = 0;
    for (size_t i = 0; i < (size_t)w * h * 3; i++) {
        int d = abs((int)rgb[i] - (int)want[i]);
        if (d > worst) worst = d;
    }
    printf("# %s: %dx%d, max |kiln - PIL| = %d\n", name, w, h, worst);
    CHECK_MSG(worst <= max_diff, "%s: max difference %d > %d", name, worst, max_diff);
out:
    kiln_free(rgb);
    kiln_free(want);
}

static void test_formats(void) {
    check_file("rgb.png", 0);
    check_file("rgba.png", 0);    /* alpha dropped, not composited */
    check_file("grey.png", 0);
    check_file("palette.png", 0);
    check_file("photo.jpg", 0);
    check_file("grey.jpg", 0);
    check_file("lossless.webp", 0);
    check_file("lossy.webp", 0);
}

static void refuse(const char *name, kiln_status want, const char *needle) {
    kiln_err err = {0};
    uint8_t *rgb = (uint8_t *)1;
    int w = -1, h = -1;
    kiln_status s = kiln_image_load(data_path(name), NULL, &rgb, &w, &h, &err);
    printf("# %s: %s: %s\n", name, kiln_status_name(s), err.msg);
    CHECK_MSG(s == want, "%s: got %s, want %s", name, kiln_status_name(s), kiln_status_name(want));
    CHECK(rgb == NULL);
    CHECK_ERR_CONTAINS(&err, needle);
    CHECK_ERR_CONTAINS(&err, name); /* the file is named */
}

static void test_refusals(void) {
    refuse("bad-truncated.png", KILN_E_FORMAT, "png");
    refuse("bad-30000x30000.png", KILN_E_LIMIT, "30000x30000 is over the limit");
    refuse("bad-truncated.jpg", KILN_E_FORMAT, "jpeg");
    refuse("bad-truncated.webp", KILN_E_FORMAT, "webp");
    refuse("bad-not-an-image.png", KILN_E_FORMAT, "not an image");
    refuse("does-not-exist.png", KILN_E_NOT_FOUND, "does-not-exist");
    /* the caps are the caller's: a 23x17 PNG over a 20-pixel side, then over 300 pixels, then over 100 bytes */
    kiln_err err = {0};
    uint8_t *rgb;
    int w, h;
    kiln_image_limits lim = kiln_image_limits_default();
    lim.max_side = 20;
    CHECK(kiln_image_load(data_path("rgb.png"), &lim, &rgb, &w, &h, &err) == KILN_E_LIMIT);
    lim = kiln_image_limits_default();
    lim.max_pixels = 300;
    CHECK(kiln_image_load(data_path("photo.jpg"), &lim, &rgb, &w, &h, &err) == KILN_E_LIMIT);
    CHECK(kiln_image_load(data_path("lossy.webp"), &lim, &rgb, &w, &h, &err) == KILN_E_LIMIT);
    CHECK(kiln_image_load(data_path("rgb.png"), &lim, &rgb, &w, &h, &err) == KILN_E_LIMIT);
    lim = kiln_image_limits_default();
    lim.max_bytes = 100;
    CHECK(kiln_image_load(data_path("rgb.png"), &lim, &rgb, &w, &h, &err) == KILN_E_LIMIT);
    /* empty and tiny buffers */
    CHECK(kiln_image_decode(NULL, 0, NULL, &rgb, &w, &h, &err) == KILN_E_FORMAT);
    CHECK(kiln_image_decode((const uint8_t *)"\x89PNG", 4, NULL, &rgb, &w, &h, &err) == KILN_E_FORMAT);
    CHECK(kiln_image_decode((const uint8_t *)"\xff\xd8\xff", 3, NULL, &rgb, &w, &h, &err) == KILN_E_FORMAT);
    CHECK(kiln_image_decode((const uint8_t *)"RIFF\0\0\0\0WEBP", 12, NULL, &rgb, &w, &h, &err) == KILN_E_FORMAT);
}

static void test_sniff(void) {
    CHECK(kiln_image_sniff((const uint8_t *)"\x89PNG\r\n\x1a\n", 8) == KILN_IMAGE_PNG);
    CHECK(kiln_image_sniff((const uint8_t *)"\xff\xd8\xff\xe0", 4) == KILN_IMAGE_JPEG);
    CHECK(kiln_image_sniff((const uint8_t *)"RIFF1234WEBPVP8 ", 16) == KILN_IMAGE_WEBP);
    CHECK(kiln_image_sniff((const uint8_t *)"RIFF1234WAVE", 12) == KILN_IMAGE_UNKNOWN);
    CHECK_EQ_STR(kiln_image_format_name(KILN_IMAGE_WEBP), "webp");
}

int main(void) {
    RUN(test_formats);
    RUN(test_refusals);
    RUN(test_sniff);
    return test_summary();
}

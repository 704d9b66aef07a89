/* test_io_png.c - PNG writing with text chunks (io/image_png.h): round trip of pixels and parameters, UTF-8
 * values (iTXt), atomic write (no file left on failure), bad arguments. */
#include <string.h>
#include <unistd.h>

#include "base/alloc.h"
#include "io/image_png.h"
#include "test.h"

static void test_roundtrip(void) {
    enum { W = 7, H = 5 };
    uint8_t rgb[W * H * 3];
    for (int i = 0; i < W * H * 3; i++) rgb[i] = (uint8_t)(i * 37 + 11);
    kiln_png_text text[] = {{"prompt", "a red fox, caf\xc3\xa9 \xe6\x9d\xb1\xe4\xba\xac"}, {"seed", "42"}, {"steps", "4"}};
    char path[] = "/tmp/kiln_png_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    kiln_err err = {0};
    CHECK_MSG(kiln_png_write(path, rgb, W, H, text, 3, &err) == KILN_OK, "%s", err.msg);
    uint8_t *back = NULL;
    int w = 0, h = 0;
    kiln_png_text *rt = NULL;
    size_t nt = 0;
    CHECK_MSG(kiln_png_read(path, &back, &w, &h, &rt, &nt, &err) == KILN_OK, "%s", err.msg);
    CHECK_EQ_INT(w, W);
    CHECK_EQ_INT(h, H);
    CHECK(back && memcmp(back, rgb, sizeof rgb) == 0);
    CHECK_EQ_INT(nt, 3);
    for (size_t i = 0; i < nt && i < 3; i++) {
        CHECK_EQ_STR(rt[i].key, text[i].key);
        CHECK_EQ_STR(rt[i].value, text[i].value); /* UTF-8 kept byte for byte */
    }
    kiln_png_text_free(rt, nt);
    kiln_free(back);
    /* in memory */
    uint8_t *png = NULL;
    size_t len = 0;
    CHECK(kiln_png_encode(rgb, W, H, NULL, 0, &png, &len, &err) == KILN_OK);
    CHECK(png && len > 8 && memcmp(png, "\x89PNG\r\n\x1a\n", 8) == 0);
    kiln_free(png);
    unlink(path);
}

static void test_errors(void) {
    uint8_t rgb[12] = {0};
    kiln_err err = {0};
    uint8_t *png;
    size_t len;
    CHECK(kiln_png_encode(rgb, 0, 2, NULL, 0, &png, &len, &err) == KILN_E_INVALID);
    CHECK(kiln_png_encode(rgb, 70000, 1, NULL, 0, &png, &len, &err) == KILN_E_INVALID);
    kiln_png_text bad[] = {{"", "x"}};
    CHECK(kiln_png_encode(rgb, 2, 2, bad, 1, &png, &len, &err) == KILN_E_INVALID);
    kiln_png_text nov[] = {{"key", NULL}};
    CHECK(kiln_png_encode(rgb, 2, 2, nov, 1, &png, &len, &err) == KILN_E_INVALID);
    /* a folder that does not exist: error, and nothing left behind */
    CHECK(kiln_png_write("/nonexistent-dir/x.png", rgb, 2, 2, NULL, 0, &err) == KILN_E_IO);
    CHECK_ERR_CONTAINS(&err, "/nonexistent-dir/x.png");
    uint8_t *back;
    int w, h;
    CHECK(kiln_png_read("/nonexistent-dir/x.png", &back, &w, &h, NULL, NULL, &err) != KILN_OK);
    /* a file that is not a PNG */
    char path[] = "/tmp/kiln_notpng_XXXXXX";
    int fd = mkstemp(path);
    CHECK(write(fd, "hello", 5) == 5);
    close(fd);
    CHECK(kiln_png_read(path, &back, &w, &h, NULL, NULL, &err) == KILN_E_FORMAT);
    unlink(path);
}

int main(void) {
    RUN(test_roundtrip);
    RUN(test_errors);
    return test_summary();
}

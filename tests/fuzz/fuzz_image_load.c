/* fuzz_image_load.c - libFuzzer target over the input image decoders (kiln_image_decode: PNG, JPEG, WebP): any
 * input gives KILN_OK with a buffer of exactly w*h*3 bytes within the limits, or a clean error with no buffer;
 * no crash, no leak, no huge allocation (the fuzz limits are small). Seeds: tests/fuzz/corpus/fuzz_image_load/
 * (the test images of tests/data/images, good and bad). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "io/image_load.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    kiln_err err = {0};
    kiln_image_limits lim = kiln_image_limits_default();
    lim.max_side = 1024;
    lim.max_pixels = 256 * 1024;
    uint8_t *rgb = NULL;
    int w = 0, h = 0;
    if (kiln_image_decode(data, size, &lim, &rgb, &w, &h, &err) != KILN_OK) {
        if (rgb != NULL || err.msg[0] == '\0') abort();
        return 0;
    }
    if (!rgb || w <= 0 || h <= 0 || w > lim.max_side || h > lim.max_side || (int64_t)w * h > lim.max_pixels) abort();
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < (size_t)w * h * 3; i += 61) sink ^= rgb[i]; /* every row readable (ASan) */
    (void)sink;
    kiln_free(rgb);
    return 0;
}

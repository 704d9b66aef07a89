/* png_write.c - PNG encoding with libspng (see png_write.h). */
#include "graph/png_write.h"

#include <spng.h>
#include <stdlib.h>
#include <string.h>

kiln_status kiln_png_encode(const uint8_t *rgb, int w, int h, const kiln_png_text *texts, int n_texts,
                            void **out, size_t *len, kiln_err *err) {
    *out = NULL;
    *len = 0;
    if (w <= 0 || h <= 0 || w > 65535 || h > 65535) return KILN_FAIL(err, KILN_E_INVALID, "png: bad size %dx%d", w, h);
    spng_ctx *ctx = spng_ctx_new(SPNG_CTX_ENCODER);
    if (!ctx) return KILN_FAIL(err, KILN_E_NOMEM, "png: out of memory");
    spng_set_option(ctx, SPNG_ENCODE_TO_BUFFER, 1);
    struct spng_ihdr ihdr = {.width = (uint32_t)w, .height = (uint32_t)h, .bit_depth = 8,
                             .color_type = SPNG_COLOR_TYPE_TRUECOLOR};
    int rc = spng_set_ihdr(ctx, &ihdr);
    struct spng_text t[4];
    int nt = 0;
    memset(t, 0, sizeof t);
    for (int i = 0; rc == 0 && i < n_texts && nt < 4; i++) {
        if (!texts[i].keyword || !texts[i].text || strlen(texts[i].keyword) > 79) continue;
        strcpy(t[nt].keyword, texts[i].keyword);
        /* iTXt: the JSON is UTF-8, which tEXt (Latin-1) cannot carry faithfully */
        t[nt].type = SPNG_ITXT;
        t[nt].length = strlen(texts[i].text);
        t[nt].text = (char *)texts[i].text;
        t[nt].language_tag = (char *)"";
        t[nt].translated_keyword = (char *)"";
        nt++;
    }
    if (rc == 0 && nt > 0) rc = spng_set_text(ctx, t, (uint32_t)nt);
    size_t bytes = (size_t)w * (size_t)h * 3;
    if (rc == 0) rc = spng_encode_image(ctx, rgb, bytes, SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE);
    if (rc != 0) {
        spng_ctx_free(ctx);
        return KILN_FAIL(err, KILN_E_INTERNAL, "png: %s", spng_strerror(rc));
    }
    int e = 0;
    void *buf = spng_get_png_buffer(ctx, len, &e);
    spng_ctx_free(ctx);
    if (!buf || e) return KILN_FAIL(err, KILN_E_NOMEM, "png: %s", spng_strerror(e));
    *out = buf;
    return KILN_OK;
}

/* target.c - the target dispatch and the decoded-pixel digest (see target.h). */
#include "bench/target.h"

#include <spng.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "bench/digest.h"

void kiln_submit_result_clear(kiln_submit_result *r) {
    kiln_free(r->images);
    json_decref(r->stages);
    memset(r, 0, sizeof *r);
}

kiln_status kiln_target_submit(kiln_target *t, const json_t *graph, kiln_submit_result *out, kiln_err *err) {
    memset(out, 0, sizeof *out);
    return t->ops->submit(t, graph, out, err);
}

json_t *kiln_target_system_stats(kiln_target *t) { return t->ops->system_stats ? t->ops->system_stats(t) : NULL; }

void kiln_target_close(kiln_target *t) {
    if (t) t->ops->close(t);
}

kiln_status kiln_target_open_spec(const char *spec, const kiln_http_opts *opts, kiln_target **out, kiln_err *err) {
    if (spec && !strncmp(spec, "engine:", 7)) return kiln_target_engine_open(spec + 7, 0, NULL, out, err);
    if (spec && !strncmp(spec, "engine@", 7)) {
        /* engine@cpu:DIR, engine@cuda:DIR, engine@cuda:N:DIR: the device is everything before the last ':' that
         * is not followed by digits only up to the next ':' */
        const char *d = spec + 7, *rest = NULL;
        char dev[32];
        int threads = 0;
        if (!strncmp(d, "cpu,threads=", 12)) { /* engine@cpu,threads=N:DIR: a thread count, as --threads */
            char *end;
            long n = strtol(d + 12, &end, 10);
            if (end == d + 12 || *end != ':' || n < 1 || n > 1024)
                return KILN_FAIL(err, KILN_E_INVALID, "target %s: threads= wants a count from 1 to 1024, then :DIR",
                                 spec);
            threads = (int)n;
            snprintf(dev, sizeof dev, "cpu");
            rest = end + 1;
        } else if (!strncmp(d, "cpu:", 4)) {
            snprintf(dev, sizeof dev, "cpu");
            rest = d + 4;
        } else if (!strncmp(d, "cuda:", 5)) {
            const char *p = d + 5;
            size_t nd = strspn(p, "0123456789");
            if (nd > 0 && nd < 4 && p[nd] == ':') {
                snprintf(dev, sizeof dev, "cuda:%.*s", (int)nd, p);
                rest = p + nd + 1;
            } else {
                snprintf(dev, sizeof dev, "cuda");
                rest = p;
            }
        }
        if (!rest || !*rest)
            return KILN_FAIL(err, KILN_E_INVALID, "target %s: expected engine@cpu:DIR, engine@cpu,threads=N:DIR, "
                             "engine@cuda:DIR or engine@cuda:N:DIR", spec);
        return kiln_target_engine_open(rest, threads, dev, out, err);
    }
    return kiln_target_http_open(spec, opts, out, err);
}

kiln_status kiln_png_pixel_sha256(const void *png, size_t len, char hex[65], int *width, int *height, kiln_err *err) {
    hex[0] = 0;
    spng_ctx *ctx = spng_ctx_new(0);
    if (!ctx) return KILN_FAIL(err, KILN_E_NOMEM, "png: out of memory");
    /* Cap what a hostile file can make us allocate: 16384^2 pixels is far over anything kiln makes. */
    spng_set_image_limits(ctx, 16384, 16384);
    spng_set_chunk_limits(ctx, 64u << 20, 64u << 20);
    kiln_status st = KILN_OK;
    struct spng_ihdr ihdr;
    size_t out_len = 0;
    unsigned char *px = NULL;
    int rc = spng_set_png_buffer(ctx, png, len);
    if (!rc) rc = spng_get_ihdr(ctx, &ihdr);
    if (!rc) rc = spng_decoded_image_size(ctx, SPNG_FMT_RGB8, &out_len);
    if (!rc && !(px = kiln_malloc(out_len ? out_len : 1))) st = KILN_FAIL(err, KILN_E_NOMEM, "png: out of memory");
    if (!rc && st == KILN_OK) rc = spng_decode_image(ctx, px, out_len, SPNG_FMT_RGB8, 0);
    if (rc && st == KILN_OK) st = KILN_FAIL(err, KILN_E_FORMAT, "png: %s", spng_strerror(rc));
    if (st == KILN_OK) {
        kiln_sha256_hex(px, out_len, hex);
        *width = (int)ihdr.width;
        *height = (int)ihdr.height;
    }
    kiln_free(px);
    spng_ctx_free(ctx);
    return st;
}

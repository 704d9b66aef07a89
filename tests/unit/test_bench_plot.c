/* test_bench_plot.c - the report picture: seed 000 (no trace series) and a report with a scripted trace are
 * drawn; the PNG decodes at the documented size, the per-image points and the power trace are where the values
 * put them; bad inputs are errors. */
#include <jansson.h>
#include <math.h>
#include <spng.h>
#include <stdio.h>
#include <unistd.h>

#include "base/alloc.h"
#include "bench/plot.h"
#include "bench/telemetry.h"
#include "test.h"

static unsigned char *decode(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    spng_ctx *ctx = spng_ctx_new(0);
    spng_set_png_file(ctx, f);
    struct spng_ihdr ih;
    unsigned char *px = NULL;
    if (spng_get_ihdr(ctx, &ih) == 0 && ih.width == KILN_PLOT_WIDTH && ih.height == KILN_PLOT_HEIGHT &&
        spng_decoded_image_size(ctx, SPNG_FMT_RGB8, len) == 0) {
        px = kiln_malloc(*len);
        if (px && spng_decode_image(ctx, px, *len, SPNG_FMT_RGB8, 0) != 0) {
            kiln_free(px);
            px = NULL;
        }
    }
    spng_ctx_free(ctx);
    fclose(f);
    return px;
}

/* Pixels of exactly this colour inside a box. */
static size_t count(const unsigned char *px, int x0, int y0, int x1, int y1, int r, int g, int b) {
    size_t n = 0;
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++) {
            const unsigned char *p = px + ((size_t)y * KILN_PLOT_WIDTH + (size_t)x) * 3;
            n += p[0] == r && p[1] == g && p[2] == b;
        }
    return n;
}

static void test_seed_report_plots(void) {
    json_error_t je;
    json_t *r = json_load_file(test_src_path("tests/data/bench/seeds/000_b6f3f2a8c34741b3.txt"), 0, &je);
    CHECK(r != NULL);
    char path[] = "/tmp/kiln-plot-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    kiln_err err = {0};
    CHECK_EQ_INT(kiln_bench_plot(r, path, &err), KILN_OK);
    size_t len;
    unsigned char *px = decode(path, &len);
    CHECK(px != NULL);
    if (px) {
        /* Graph 1 (blue) and graph 2 (red) points are in the top panel; the bottom trace panel has none. */
        CHECK(count(px, 90, 40, 940, 330, 31, 119, 180) > 20);
        CHECK(count(px, 90, 40, 940, 330, 214, 39, 40) > 20);
        CHECK_EQ_INT(count(px, 91, 392, 938, 538, 214, 39, 40), 0);
        /* The 32-step graph (6.1 s/image) is the highest point: red pixels in the top quarter. */
        CHECK(count(px, 90, 40, 940, 110, 214, 39, 40) > 10);
        kiln_free(px);
    }
    json_decref(r);
    unlink(path);
}

static void test_trace_is_drawn(void) {
    /* One graph, three timed submits, and a trace whose power climbs from 100 to 300 W. */
    kiln_tsample s[10];
    for (int i = 0; i < 10; i++) {
        kiln_tsample_clear(&s[i]);
        s[i].t = 100 + i;
        s[i].v[KILN_TF_POWER_W] = 100 + 200.0 * i / 9;
        s[i].v[KILN_TF_SM_MHZ] = 1500;
    }
    json_t *series = kiln_telemetry_series(s, 10, 100);
    CHECK_NEAR(json_real_value(json_array_get(json_object_get(series, "t"), 9)), 9.0, 1e-12);
    CHECK(json_is_null(json_array_get(json_object_get(series, "temperature.gpu"), 0)));
    json_t *r = json_pack("{s:s,s:{s:{s:{s:{s:{s:{s:[{s:f},{s:f,s:b},{s:f}],s:{s:o}}}}}}}}", "arm", "t-300w", "graphs",
                          "g", "cards", "0", "batches", "1", "timed", "exec_seconds_per_image", 1.0,
                          "exec_seconds_per_image", 2.0, "outlier", 1, "exec_seconds_per_image", 1.5, "trace",
                          "series", series);
    CHECK(r != NULL);
    char path[] = "/tmp/kiln-plot-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    kiln_err err = {0};
    CHECK_EQ_INT(kiln_bench_plot(r, path, &err), KILN_OK);
    size_t len;
    unsigned char *px = decode(path, &len);
    CHECK(px != NULL);
    if (px) {
        CHECK(count(px, 91, 392, 938, 538, 214, 39, 40) > 300);  /* the power line spans the panel */
        CHECK(count(px, 91, 392, 200, 470, 214, 39, 40) == 0);   /* it starts low (bottom-left), not top-left */
        CHECK(count(px, 800, 392, 938, 420, 214, 39, 40) > 0);   /* and ends high */
        CHECK(count(px, 95, 45, 935, 325, 0, 0, 0) > 20);        /* the outlier ring (black), inside the axes */
        kiln_free(px);
    }
    unlink(path);
    CHECK_EQ_INT(kiln_bench_plot(r, "/nonexistent/dir/plot.png", &err), KILN_E_IO);
    json_decref(r);
    json_t *empty = json_pack("{s:{}}", "graphs");
    CHECK_EQ_INT(kiln_bench_plot(empty, path, &err), KILN_E_INVALID);
    CHECK_ERR_CONTAINS(&err, "no timed submit");
    json_decref(empty);
    json_t *abba = json_pack("{s:[]}", "rows");
    CHECK_EQ_INT(kiln_bench_plot(abba, path, &err), KILN_E_INVALID);
    json_decref(abba);
}

int main(void) {
    RUN(test_seed_report_plots);
    RUN(test_trace_is_drawn);
    return test_summary();
}

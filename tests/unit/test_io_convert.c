/* test_io_convert.c - `kiln convert`'s engine (io/ckpt_convert.h) on the tiny FLUX.2 DiT (BFL names, bf16): each
 * output read back by kiln's own readers, every tensor present with its shape, the quantised ones within their
 * format's error bound of the source and the kept ones exact; failures leave nothing behind. (The gguf package
 * reading the same outputs: tools/reference/check_convert.py.) */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/alloc.h"
#include "io/ckpt_convert.h"
#include "io/fp8_layout.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "tensor/convert.h"
#include "tensor/quant.h"
#include "test.h"

static char dir[64];
#define SRC "tests/data/tiny/comfy/flux-2-klein-4b.safetensors"

static float *widen(const kiln_st_tensor *t, size_t n) {
    float *f = kiln_malloc(n * 4);
    kiln_convert(f, KILN_DT_F32, t->data, t->dtype, n, NULL, NULL);
    return f;
}

static size_t numel(const kiln_st_tensor *t) {
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= (size_t)t->shape[i];
    return n;
}

/* Largest |a - b| over one block of the source versus the bound for its type. */
static bool within(uint32_t type, const float *src, const float *got, size_t n, size_t block, float *worst_out) {
    for (size_t b = 0; b < n; b += block) {
        float lo = 0, hi = 0, amax = 0, worst = 0;
        for (size_t i = b; i < b + block; i++) {
            lo = fminf(lo, src[i]), hi = fmaxf(hi, src[i]), amax = fmaxf(amax, fabsf(src[i]));
            worst = fmaxf(worst, fabsf(src[i] - got[i]));
        }
        /* Q8_0: half a step of d = amax / 127, plus d's own f16 rounding (2^-11 relative) times |q| <= 127 */
        float bound = type == KILN_QT_Q8_0 ? amax / 127 * (0.5f + 127 * 0x1p-11f) + 1e-7f
                                          : (hi - lo) / 15 * 0.5f + (hi - lo) / 63 * 16 + 1e-6f;
        *worst_out = worst;
        if (worst > bound) return false;
    }
    return true;
}

static void check_gguf(kiln_conv_format fmt, const char *name, int want_q4k) {
    char out[128];
    snprintf(out, sizeof out, "%s/%s", dir, name);
    kiln_conv_report rep;
    kiln_err err = {0};
    CHECK_EQ_INT(kiln_ckpt_convert(test_src_path(SRC), out, fmt, &rep, &err), KILN_OK);
    CHECK_MSG(rep.per_type[KILN_QT_Q4_K] == (size_t)want_q4k, "%zu Q4_K tensors", rep.per_type[KILN_QT_Q4_K]);
    kiln_st_file *src;
    kiln_gguf_file *g;
    CHECK_EQ_INT(kiln_st_open(test_src_path(SRC), &src, &err), KILN_OK);
    CHECK_EQ_INT(kiln_gguf_open(out, &g, &err), KILN_OK);
    if (!src || !g) {
        fprintf(stderr, "  %s\n", err.msg);
        kiln_st_close(src);
        kiln_gguf_close(g);
        return;
    }
    CHECK_EQ_INT(kiln_gguf_count(g), kiln_st_count(src));
    CHECK_EQ_STR(kiln_gguf_architecture(g), "flux2");
    for (size_t i = 0; i < kiln_st_count(src); i++) {
        const kiln_st_tensor *s = kiln_st_at(src, i);
        const kiln_gguf_tensor *t = kiln_gguf_find(g, s->name);
        CHECK_MSG(t != NULL, "%s missing", s->name);
        if (!t) continue;
        CHECK(t->ndim == s->ndim && t->shape[0] == s->shape[0] && (s->ndim < 2 || t->shape[1] == s->shape[1]));
        size_t n = numel(s);
        float *a = widen(s, n), *b = kiln_malloc(n * 4);
        CHECK_EQ_INT(kiln_dequant(b, t->type, t->data, n, &err), KILN_OK);
        float worst = 0;
        if (t->type == KILN_QT_Q8_0 || t->type == KILN_QT_Q4_K)
            CHECK_MSG(within(t->type, a, b, n, kiln_qtype_get(t->type)->block, &worst), "%s (%s): error %g",
                      s->name, kiln_qtype_get(t->type)->name, worst);
        else
            for (size_t k = 0; k < n; k++) {
                float want = t->type == KILN_QT_F16 ? kiln_f16_to_f32(kiln_f32_to_f16(a[k])) : a[k];
                if (b[k] != want) {
                    CHECK_MSG(0, "%s (%s) value %zu: %g vs %g", s->name, kiln_qtype_get(t->type)->name, k, b[k], want);
                    break;
                }
            }
        kiln_free(a);
        kiln_free(b);
    }
    kiln_gguf_close(g);
    kiln_st_close(src);
    unlink(out);
}

static void test_gguf_q8_0(void) { check_gguf(KILN_CONV_GGUF_Q8_0, "o8.gguf", 0); }
/* rows of 256 (linear2, time_in.in_layer) get Q4_K, shorter ones fall back to Q8_0 */
static void test_gguf_q4_k(void) { check_gguf(KILN_CONV_GGUF_Q4_K, "o4.gguf", 4); }
static void test_gguf_f16(void) { check_gguf(KILN_CONV_GGUF_F16, "o16.gguf", 0); }

static void test_fp8(void) {
    char out[128];
    snprintf(out, sizeof out, "%s/o.safetensors", dir);
    kiln_conv_report rep;
    kiln_err err = {0};
    CHECK_EQ_INT(kiln_ckpt_convert(test_src_path(SRC), out, KILN_CONV_FP8_E4M3, &rep, &err), KILN_OK);
    kiln_st_file *src, *o;
    CHECK_EQ_INT(kiln_st_open(test_src_path(SRC), &src, &err), KILN_OK);
    CHECK_EQ_INT(kiln_st_open(out, &o, &err), KILN_OK);
    if (!src || !o) {
        kiln_st_close(src);
        kiln_st_close(o);
        return;
    }
    kiln_fp8_info q;
    CHECK_EQ_INT(kiln_fp8_scan(o, &q, &err), KILN_OK);
    CHECK(q.scheme == KILN_FP8_COMFY_QUANT && q.n_e4m3 == 31 && q.n_weight_scales == 31 && q.n_meta_layers == 31);
    for (size_t i = 0; i < kiln_st_count(src); i++) {
        const kiln_st_tensor *s = kiln_st_at(src, i), *t = kiln_st_find(o, s->name);
        CHECK(t != NULL);
        if (!t) continue;
        size_t n = numel(s);
        float *a = widen(s, n);
        if (t->dtype == KILN_DT_F8_E4M3) {
            float scale = 0, amax = 0;
            CHECK_EQ_INT(kiln_fp8_weight_scale(o, s->name, &scale, &err), KILN_OK);
            for (size_t k = 0; k < n; k++) amax = fmaxf(amax, fabsf(a[k]));
            CHECK_MSG(scale == amax / 448.0f, "%s: scale %g, max|w| / 448 = %g", s->name, scale, amax / 448.0f);
            for (size_t k = 0; k < n; k++) {
                float got = kiln_e4m3_to_f32(((const uint8_t *)t->data)[k]) * scale;
                /* e4m3 keeps 3 mantissa bits: half an ulp is 1/16 of the value; below 2^-6 (scaled) it is subnormal */
                float tol = fabsf(a[k]) / 16 + 0x1p-10f * scale;
                if (fabsf(got - a[k]) > tol) {
                    CHECK_MSG(0, "%s value %zu: %g vs %g", s->name, k, got, a[k]);
                    break;
                }
            }
        } else CHECK(t->dtype == s->dtype && t->nbytes == s->nbytes && !memcmp(t->data, s->data, s->nbytes));
        kiln_free(a);
    }
    kiln_st_close(src);
    kiln_st_close(o);
    unlink(out);
}

static void test_failures_leave_nothing(void) {
    char out[128], tmp[140], fp8[128];
    kiln_conv_report rep;
    kiln_err err = {0};
    snprintf(fp8, sizeof fp8, "%s/in.safetensors", dir);
    CHECK_EQ_INT(kiln_ckpt_convert(test_src_path(SRC), fp8, KILN_CONV_FP8_E4M3, &rep, &err), KILN_OK);
    snprintf(out, sizeof out, "%s/again.safetensors", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    CHECK_EQ_INT(kiln_ckpt_convert(fp8, out, KILN_CONV_FP8_E4M3, &rep, &err), KILN_E_INVALID);
    CHECK_ERR_CONTAINS(&err, "is already fp8");
    CHECK(access(out, F_OK) != 0 && access(tmp, F_OK) != 0);
    snprintf(out, sizeof out, "%s/again.gguf", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    CHECK_EQ_INT(kiln_ckpt_convert(fp8, out, KILN_CONV_GGUF_Q8_0, &rep, &err), KILN_E_UNSUPPORTED);
    CHECK_ERR_CONTAINS(&err, "is f8_e4m3, which GGUF cannot hold");
    CHECK(access(out, F_OK) != 0 && access(tmp, F_OK) != 0);
    CHECK_EQ_INT(kiln_ckpt_convert(test_src_path(SRC), "/nonexistent/dir/x.gguf", KILN_CONV_GGUF_Q8_0, &rep, &err),
                 KILN_E_NOT_FOUND);
    unlink(fp8);
}

/* A ComfyUI-prefixed checkpoint: GGUF output drops the prefix (the names GGUF files of diffusion models use); fp8
 * output keeps the stored names and declares the layers by their canonical names, which the fp8 scan accepts. */
static void test_prefixed_source(void) {
    char in[128], out[128];
    snprintf(in, sizeof in, "%s/prefixed.safetensors", dir);
    kiln_st_spec sp[2] = {{"model.diffusion_model.img_in.weight", KILN_DT_BF16, 2, {32, 64}},
                          {"model.diffusion_model.img_in.bias", KILN_DT_BF16, 1, {32}}};
    kiln_st_writer *w;
    kiln_err err = {0};
    CHECK_EQ_INT(kiln_st_writer_open(in, sp, 2, NULL, NULL, 0, &w, &err), KILN_OK);
    if (!w) return;
    uint16_t v[32 * 64];
    for (int i = 0; i < 32 * 64; i++) v[i] = kiln_f32_to_bf16((float)(i % 61 - 30) / 64.0f);
    kiln_st_writer_write(w, v, sizeof v, &err);
    kiln_st_writer_write(w, v, 64, &err);
    CHECK_EQ_INT(kiln_st_writer_finish(w, &err), KILN_OK);
    kiln_conv_report rep;
    snprintf(out, sizeof out, "%s/p.gguf", dir);
    CHECK_EQ_INT(kiln_ckpt_convert(in, out, KILN_CONV_GGUF_Q8_0, &rep, &err), KILN_OK);
    kiln_gguf_file *g;
    CHECK_EQ_INT(kiln_gguf_open(out, &g, &err), KILN_OK);
    if (g) {
        const kiln_gguf_tensor *t = kiln_gguf_find(g, "img_in.weight");
        CHECK(t && t->type == KILN_QT_Q8_0 && kiln_gguf_find(g, "img_in.bias"));
        CHECK(kiln_gguf_find(g, "model.diffusion_model.img_in.weight") == NULL);
        kiln_gguf_close(g);
    }
    unlink(out);
    snprintf(out, sizeof out, "%s/p.safetensors", dir);
    CHECK_EQ_INT(kiln_ckpt_convert(in, out, KILN_CONV_FP8_E4M3, &rep, &err), KILN_OK);
    kiln_st_file *f;
    CHECK_EQ_INT(kiln_st_open(out, &f, &err), KILN_OK);
    if (f) {
        kiln_fp8_info q;
        CHECK_EQ_INT(kiln_fp8_scan(f, &q, &err), KILN_OK);
        CHECK(q.n_meta_layers == 1 && q.n_e4m3 == 1);
        CHECK(strstr(kiln_st_metadata(f, "_quantization_metadata"), "\"img_in\": {\"format\": \"float8_e4m3fn\"}"));
        CHECK(kiln_st_find(f, "model.diffusion_model.img_in.weight_scale") != NULL);
        kiln_st_close(f);
    }
    unlink(out);
    unlink(in);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/kiln-conv-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    RUN(test_gguf_q8_0);
    RUN(test_gguf_q4_k);
    RUN(test_gguf_f16);
    RUN(test_fp8);
    RUN(test_failures_leave_nothing);
    RUN(test_prefixed_source);
    rmdir(dir);
    return test_summary();
}

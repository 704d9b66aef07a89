/* test_io_fp8.c - fp8 checkpoint layouts (io/fp8_layout.h): each layout detected from small safetensors files
 * written here, and each malformed or unimplemented variant refused with a message naming the tensor/layer. */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "io/fp8_layout.h"
#include "io/safetensors.h"
#include "test.h"

typedef struct spec {
    const char *name;
    kiln_dtype dt;
    int ndim;
    int64_t d0, d1;
} spec;

static char dir[64];

/* Writes the tensors (contents: scales 0.5, other bytes 0x38 = e4m3 1.0 / JSON for comfy_quant) and opens them. */
static kiln_status build(const spec *sp, size_t n, const char *qmeta, const char *comfy_json, kiln_st_file **out,
                         kiln_err *err) {
    kiln_st_spec specs[16];
    for (size_t i = 0; i < n; i++) {
        memset(&specs[i], 0, sizeof specs[i]);
        specs[i].name = sp[i].name;
        specs[i].dtype = sp[i].dt;
        specs[i].ndim = sp[i].ndim;
        specs[i].shape[0] = sp[i].d0;
        specs[i].shape[1] = sp[i].d1;
    }
    char path[128];
    snprintf(path, sizeof path, "%s/t.safetensors", dir);
    const char *k[1] = {"_quantization_metadata"}, *v[1] = {qmeta};
    kiln_st_writer *w;
    kiln_status s = kiln_st_writer_open(path, specs, n, k, v, qmeta ? 1 : 0, &w, err);
    if (s != KILN_OK) return s;
    for (size_t i = 0; i < n; i++) {
        size_t bytes = kiln_dtype_size(sp[i].dt);
        for (int d = 0; d < sp[i].ndim; d++) bytes *= (size_t)(d ? sp[i].d1 : sp[i].d0);
        uint8_t *b = malloc(bytes + 1);
        if (strstr(sp[i].name, "comfy_quant")) memcpy(b, comfy_json, bytes);
        else if (sp[i].dt == KILN_DT_F32) {
            float h = 0.5f;
            for (size_t j = 0; j < bytes / 4; j++) memcpy(b + 4 * j, &h, 4);
        } else memset(b, 0x38, bytes);
        s = kiln_st_writer_write(w, b, bytes, err);
        free(b);
        if (s != KILN_OK) {
            kiln_st_writer_abort(w);
            return s;
        }
    }
    KILN_TRY(kiln_st_writer_finish(w, err));
    return kiln_st_open(path, out, err);
}

/* Builds, scans, and checks the status and (if not OK) the message. */
static void scan_expect(const spec *sp, size_t n, const char *qmeta, const char *comfy, kiln_status want,
                        const char *needle, kiln_fp8_info *q) {
    kiln_st_file *f;
    kiln_err err = {0};
    CHECK_EQ_INT(build(sp, n, qmeta, comfy, &f, &err), KILN_OK);
    if (!f) {
        fprintf(stderr, "  %s\n", err.msg);
        return;
    }
    kiln_status s = kiln_fp8_scan(f, q, &err);
    CHECK_MSG(s == want, "status %d, want %d: %s", s, want, err.msg);
    if (needle) CHECK_ERR_CONTAINS(&err, needle);
    kiln_st_close(f);
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void test_comfy_quant_bfl(void) {
    /* BFL's release layout: fp8 linear weights, one-value float32 weight_scale, optional input_scale, layers
     * declared in _quantization_metadata; norms and biases stay bf16 */
    spec sp[] = {{"img_in.weight", KILN_DT_F8_E4M3, 2, 8, 16},   {"img_in.weight_scale", KILN_DT_F32, 0, 0, 0},
                 {"img_in.input_scale", KILN_DT_F32, 1, 1, 0},     {"img_in.bias", KILN_DT_BF16, 1, 8, 0},
                 {"txt_in.weight", KILN_DT_F8_E4M3, 2, 8, 16},   {"txt_in.weight_scale", KILN_DT_F32, 1, 1, 0},
                 {"final.norm.scale", KILN_DT_BF16, 1, 8, 0}};
    kiln_fp8_info q;
    const char *meta = "{\"format_version\":\"1.0\",\"layers\":{\"img_in\":{\"format\":\"float8_e4m3fn\"},"
                       "\"txt_in\":{\"format\":\"float8_e4m3fn\"}}}";
    scan_expect(sp, N(sp), meta, NULL, KILN_OK, NULL, &q);
    CHECK_EQ_INT(q.scheme, KILN_FP8_COMFY_QUANT);
    CHECK(q.n_e4m3 == 2 && q.n_e5m2 == 0 && q.n_weight_scales == 2 && q.n_input_scales == 1);
    CHECK(q.n_meta_layers == 2 && q.has_metadata_json && !q.has_comfy_quant_tensors);
    /* the scale a loader multiplies by */
    kiln_st_file *f;
    kiln_err err = {0};
    CHECK_EQ_INT(build(sp, N(sp), meta, NULL, &f, &err), KILN_OK);
    float s = 0;
    CHECK(f && kiln_fp8_weight_scale(f, "img_in.weight", &s, &err) == KILN_OK && s == 0.5f);
    CHECK(f && kiln_fp8_weight_scale(f, "img_in.bias", &s, &err) == KILN_E_NOT_FOUND);
    kiln_st_close(f);
    /* the same without metadata (scales alone say comfy-quant) */
    scan_expect(sp, N(sp), NULL, NULL, KILN_OK, NULL, &q);
    CHECK(q.scheme == KILN_FP8_COMFY_QUANT && q.n_meta_layers == 0);
}

static void test_comfy_quant_tensor(void) {
    const char *js = "{\"format\": \"float8_e4m3fn\"}";
    spec sp[] = {{"a.weight", KILN_DT_F8_E4M3, 2, 4, 4}, {"a.weight_scale", KILN_DT_F32, 0, 0, 0},
                 {"a.comfy_quant", KILN_DT_U8, 1, (int64_t)strlen(js), 0}};
    kiln_fp8_info q;
    scan_expect(sp, N(sp), NULL, js, KILN_OK, NULL, &q);
    CHECK(q.scheme == KILN_FP8_COMFY_QUANT && q.n_meta_layers == 1 && q.has_comfy_quant_tensors);
    const char *nv = "{\"format\": \"nvfp4\"}";
    spec sp2[] = {{"a.weight", KILN_DT_U8, 2, 4, 8}, {"a.comfy_quant", KILN_DT_U8, 1, (int64_t)strlen(nv), 0}};
    scan_expect(sp2, N(sp2), NULL, nv, KILN_E_UNSUPPORTED, "layer 'a' uses quantisation format 'nvfp4'", &q);
    spec sp3[] = {{"a.weight", KILN_DT_F8_E4M3, 2, 4, 4}, {"a.comfy_quant", KILN_DT_U8, 1, 5, 0}};
    scan_expect(sp3, N(sp3), NULL, "{oops", KILN_E_FORMAT, "'a.comfy_quant' is not valid JSON", &q);
}

static void test_scaled_and_unscaled(void) {
    spec sp[] = {{"scaled_fp8", KILN_DT_F8_E4M3, 1, 0, 0},       {"a.weight", KILN_DT_F8_E4M3, 2, 4, 4},
                 {"a.scale_weight", KILN_DT_F32, 0, 0, 0},         {"a.scale_input", KILN_DT_F32, 0, 0, 0},
                 {"b.weight", KILN_DT_F8_E5M2, 2, 4, 4},          {"b.scale_weight", KILN_DT_F32, 1, 1, 0}};
    kiln_fp8_info q;
    scan_expect(sp, N(sp), NULL, NULL, KILN_OK, NULL, &q);
    CHECK(q.scheme == KILN_FP8_SCALED && q.n_e4m3 == 1 && q.n_e5m2 == 1 && q.n_weight_scales == 2 && q.n_input_scales == 1);
    spec un[] = {{"a.weight", KILN_DT_F8_E4M3, 2, 4, 4}, {"a.bias", KILN_DT_BF16, 1, 4, 0}};
    scan_expect(un, N(un), NULL, NULL, KILN_OK, NULL, &q);
    CHECK_EQ_INT(q.scheme, KILN_FP8_UNSCALED);
    spec none[] = {{"a.weight", KILN_DT_BF16, 2, 4, 4}};
    scan_expect(none, N(none), NULL, NULL, KILN_OK, NULL, &q);
    CHECK_EQ_INT(q.scheme, KILN_FP8_NONE);
    /* scaled_fp8 file missing one scale */
    spec miss[] = {{"scaled_fp8", KILN_DT_F8_E4M3, 1, 0, 0}, {"a.weight", KILN_DT_F8_E4M3, 2, 4, 4},
                   {"a.scale_weight", KILN_DT_F32, 0, 0, 0}, {"b.weight", KILN_DT_F8_E4M3, 2, 4, 4}};
    scan_expect(miss, N(miss), NULL, NULL, KILN_E_FORMAT, "fp8 weight 'b.weight' has no 'b.scale_weight'", &q);
}

static void test_refusals(void) {
    kiln_fp8_info q;
    spec wide[] = {{"a.weight", KILN_DT_F8_E4M3, 2, 4, 4}, {"a.weight_scale", KILN_DT_F32, 2, 2, 3}};
    scan_expect(wide, N(wide), NULL, NULL, KILN_E_FORMAT, "scale 'a.weight_scale' has shape [2, 3]; a per-tensor scale holds one value", &q);
    spec chan[] = {{"a.weight", KILN_DT_F8_E4M3, 2, 4, 4}, {"a.weight_scale", KILN_DT_F32, 1, 4, 0}};
    scan_expect(chan, N(chan), NULL, NULL, KILN_E_UNSUPPORTED, "is per output channel", &q);
    spec bf[] = {{"a.weight", KILN_DT_F8_E4M3, 2, 4, 4}, {"a.weight_scale", KILN_DT_BF16, 0, 0, 0}};
    scan_expect(bf, N(bf), NULL, NULL, KILN_E_FORMAT, "scale 'a.weight_scale' is bf16; a per-tensor fp8 scale is float32", &q);
    spec orphan[] = {{"a.weight", KILN_DT_BF16, 2, 4, 4}, {"a.weight_scale", KILN_DT_F32, 0, 0, 0}};
    scan_expect(orphan, N(orphan), NULL, NULL, KILN_E_FORMAT, "scale 'a.weight_scale' has no fp8 weight 'a.weight' (that tensor is not fp8)", &q);
    spec nvfp4[] = {{"a.weight", KILN_DT_U8, 2, 4, 8}, {"a.weight_scale", KILN_DT_F8_E4M3, 2, 4, 1},
                    {"a.input_scale", KILN_DT_F32, 0, 0, 0}};
    scan_expect(nvfp4, N(nvfp4), NULL, NULL, KILN_E_UNSUPPORTED, "'a.weight_scale' holds NVFP4 block scales", &q);
    spec nv2[] = {{"a.weight", KILN_DT_U8, 2, 4, 8}, {"a.input_scale", KILN_DT_F32, 0, 0, 0},
                  {"a.weight_scale_2", KILN_DT_F32, 0, 0, 0}};
    scan_expect(nv2, N(nv2), NULL, NULL, KILN_E_UNSUPPORTED, "'a.weight_scale_2' is NVFP4's second-level scale", &q);
    spec ok[] = {{"a.weight", KILN_DT_F8_E4M3, 2, 4, 4}, {"a.weight_scale", KILN_DT_F32, 0, 0, 0}};
    scan_expect(ok, N(ok), "{\"layers\":{\"a\":{\"format\":\"int8_blockwise\",\"group_size\":128}}}", NULL,
                KILN_E_UNSUPPORTED, "layer 'a' uses quantisation format 'int8_blockwise'", &q);
    scan_expect(ok, N(ok), "{\"layers\":{\"b\":{\"format\":\"float8_e4m3fn\"}}}", NULL, KILN_E_FORMAT,
                "declares layer 'b' as float8_e4m3fn, but 'b.weight' does not exist", &q);
    scan_expect(ok, N(ok), "{\"layers\":{\"a\":{\"format\":\"float8_e5m2\"}}}", NULL, KILN_E_FORMAT,
                "declares layer 'a' as float8_e5m2, but 'a.weight' is f8_e4m3", &q);
    scan_expect(ok, N(ok), "[1,2]", NULL, KILN_E_FORMAT, "_quantization_metadata is not a JSON object", &q);
    scan_expect(ok, N(ok), "{\"layers\":{\"a\":{}}}", NULL, KILN_E_FORMAT, "layer 'a' has no \"format\" string", &q);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/kiln-fp8-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    RUN(test_comfy_quant_bfl);
    RUN(test_comfy_quant_tensor);
    RUN(test_scaled_and_unscaled);
    RUN(test_refusals);
    char p[128];
    snprintf(p, sizeof p, "%s/t.safetensors", dir);
    unlink(p);
    rmdir(dir);
    return test_summary();
}

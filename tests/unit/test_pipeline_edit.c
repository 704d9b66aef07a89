/* test_pipeline_edit.c - editing with reference images and image-to-image against the official pipeline
 * (goldens edit_r1, img2img_s030, img2img_s080 from tools/reference/make_edit_goldens.py, pipeline_9b; the
 * three-reference edit_r3 with its large reference is test_pipeline_edit_large.c; the tiny
 * klein models): the references and the init image are decoded from tests/data/images with kiln's own PNG
 * reader, prepared (check, LANCZOS over the 1024^2 cap, multiple-of-16 crop), encoded, appended with their
 * position ids; every step's velocity and latents, the reference tokens, the init latent, the sigmas, the
 * float and uint8 images are compared with the golden's tolerances, and the uint8 image by PSNR: >= 60 dB with
 * exact (f32) matmuls against the fp32 run, >= 40 dB in the default precision. Both layouts (the diffusers
 * folder and the ComfyUI single files). Also: PIL's LANCZOS resize bit for bit (resize_lanczos), the output
 * size default, and the refusals (a reference under 64 pixels, aspect over 8, bad strength). */
#include "edit_harness.h"

static void test_edit_r1(void) {
    run_case("edit_r1", false, true);
    run_case("edit_r1", false, false);
    run_case("edit_r1", true, true);
}
static void test_img2img(void) {
    run_case("img2img_s030", false, true);
    run_case("img2img_s030", true, false);
    run_case("img2img_s080", false, true);
    run_case("img2img_s080", false, false);
}

/* PIL's LANCZOS, bit for bit: the pipeline's resize of the large reference. */
static void test_resize_lanczos(void) {
    golden g;
    if (!golden_open(&g, "resize_lanczos")) return;
    loaded l = {0};
    if (!load_image(&l, "ref-1100x1000")) goto out;
    int ow = atoi(golden_meta(&g, "width")), oh = atoi(golden_meta(&g, "height"));
    uint8_t *o = kiln_malloc((size_t)ow * oh * 3);
    kiln_err err = {0};
    CHECK_MSG(kiln_resize_lanczos(l.px[0], l.im[0].width, l.im[0].height, o, ow, oh, &err) == KILN_OK, "%s", err.msg);
    char hex[65] = "";
    CHECK(kiln_sha256_buffer(o, (size_t)ow * oh * 3, hex));
    CHECK_EQ_STR(hex, golden_meta(&g, "sha256"));
    size_t n;
    float *rows = golden_f32(&g, "rows", &n);
    const int pick[] = {0, 1, 2, 3, oh - 1, 480, 481, 482, 483};
    int worst = 0;
    if (rows && n == 9 * (size_t)ow * 3)
        for (int r = 0; r < 9; r++)
            for (int i = 0; i < ow * 3; i++) {
                int d = abs((int)o[(size_t)pick[r] * ow * 3 + i] - (int)rows[(size_t)r * ow * 3 + i]);
                if (d > worst) worst = d;
            }
    printf("  LANCZOS 1100x1000 -> %dx%d: max |kiln - PIL| over the stored rows %d\n", ow, oh, worst);
    CHECK(rows && worst == 0);
    free(rows);
    /* and the whole preparation: 1073x976 cropped to 1072x976 */
    uint8_t *p = NULL;
    int pw = 0, ph = 0;
    CHECK(kiln_ref_prepare(l.px[0], l.im[0].width, l.im[0].height, &p, &pw, &ph, &err) == KILN_OK);
    CHECK_EQ_INT(pw, 1072);
    CHECK_EQ_INT(ph, 976);
    if (p) CHECK(memcmp(p, o, 1072 * 3) == 0); /* left = (1073 - 1072) / 2 = 0, top = 0 */
    kiln_free(p);
    kiln_free(o);
out:
    for (int i = 0; i < l.n; i++) kiln_free(l.px[i]);
    golden_close(&g);
}

static void test_refusals(void) {
    kiln_err err = {0};
    uint8_t *px = kiln_calloc(600 * 70 * 3, 1), *p = NULL;
    int w, h;
    CHECK(kiln_ref_prepare(px, 63, 70, &p, &w, &h, &err) == KILN_E_INVALID);
    CHECK_ERR_CONTAINS(&err, "at least 64");
    CHECK(kiln_ref_prepare(px, 600, 70, &p, &w, &h, &err) == KILN_E_INVALID); /* 8.6:1 */
    CHECK_ERR_CONTAINS(&err, "aspect");
    CHECK(kiln_ref_prepare(px, 100, 70, &p, &w, &h, &err) == KILN_OK);
    CHECK_EQ_INT(w, 96);
    CHECK_EQ_INT(h, 64);
    kiln_free(p);
    kiln_engine *eng = open_engine(false, false);
    if (eng) {
        kiln_request req = kiln_request_default();
        kiln_image_in im = {px, 63, 70};
        req.refs = &im;
        req.n_refs = 1;
        kiln_result *res = NULL;
        CHECK(kiln_generate(eng, &req, &res, &err) == KILN_E_INVALID);
        CHECK_ERR_CONTAINS(&err, "reference image 1");
        req.n_refs = KILN_MAX_REFS + 1;
        CHECK(kiln_generate(eng, &req, &res, &err) == KILN_E_INVALID);
        kiln_image_in init = {px, 96, 64};
        req.refs = NULL;
        req.n_refs = 0;
        req.init_image = &init;
        req.width = req.height = 0;
        req.strength = 0;
        CHECK(kiln_generate(eng, &req, &res, &err) == KILN_E_INVALID);
        CHECK_ERR_CONTAINS(&err, "strength");
        req.strength = 1.5;
        CHECK(kiln_generate(eng, &req, &res, &err) == KILN_E_INVALID);
        req.strength = 0.5;
        req.width = 64;
        req.height = 64;
        CHECK(kiln_generate(eng, &req, &res, &err) == KILN_E_INVALID); /* init 96x64, output 64x64 */
        CHECK_ERR_CONTAINS(&err, "resize the init image");
        req.init_image = NULL;
        CHECK(kiln_generate(eng, &req, &res, &err) == KILN_E_INVALID); /* strength without init */
        req.strength = 0.01;
        req.init_image = &init;
        req.width = req.height = 0;
        req.steps = 4; /* int(4 - 0.04) = 3: one step runs */
        CHECK_MSG(kiln_generate(eng, &req, &res, &err) == KILN_OK, "%s", err.msg);
        if (res) CHECK_EQ_INT(res->n_steps, 1);
        kiln_result_free(res);
        res = NULL;
        req.strength = 0.001; /* int(4 - 0.004) = 3 too */
        CHECK(kiln_generate(eng, &req, &res, &err) == KILN_OK);
        kiln_result_free(res);
        res = NULL;
        req.steps = 2;
        req.strength = 0.4; /* int(2 - 0.8) = 1: one of two */
        CHECK(kiln_generate(eng, &req, &res, &err) == KILN_OK);
        if (res) CHECK_EQ_INT(res->n_steps, 1);
        kiln_result_free(res);
        /* the memory estimate counts the references (tokens, encoder) - three, so that the denoising, not the
         * decode, is the peak phase of these tiny models - and takes the size from the first */
        size_t b0 = 0, b1 = 0, b2 = 0;
        kiln_request q2 = kiln_request_default();
        q2.width = 96;
        q2.height = 64;
        CHECK(kiln_estimate_memory(eng, &q2, &b0, &err) == KILN_OK);
        kiln_image_in r100 = {px, 100, 70}, refs3[3] = {r100, r100, r100};
        q2.refs = refs3;
        q2.n_refs = 3;
        CHECK_MSG(kiln_estimate_memory(eng, &q2, &b1, &err) == KILN_OK, "%s", err.msg);
        CHECK_MSG(b1 > b0, "estimate with a reference %zu, without %zu", b1, b0);
        q2.refs = &r100;
        q2.n_refs = 1;
        CHECK(kiln_estimate_memory(eng, &q2, &b1, &err) == KILN_OK);
        q2.width = q2.height = 0;
        CHECK_MSG(kiln_estimate_memory(eng, &q2, &b2, &err) == KILN_OK, "%s", err.msg);
        CHECK_MSG(b2 == b1, "estimate with the size from the reference %zu, with its 96x64 given %zu", b2, b1);
        r100.width = 40; /* refused as kiln_generate refuses it */
        CHECK(kiln_estimate_memory(eng, &q2, &b1, &err) == KILN_E_INVALID);
        kiln_engine_close(eng);
    }
    kiln_free(px);
}

/* klein 9B-shaped text-to-image (make_tiny9b.py: untied lm_head ignored, q_proj out = hidden), both layouts. */
static void test_klein9b(void) {
    g_size = "9b";
    run_case("pipeline_9b", false, true);
    run_case("pipeline_9b", true, true);
    run_case("pipeline_9b", false, false);
    run_case("pipeline_9b", true, false);
    g_size = "4b";
}

int main(void) {
    RUN(test_resize_lanczos);
    RUN(test_refusals);
    RUN(test_edit_r1);
    RUN(test_img2img);
    RUN(test_klein9b);
    return test_summary();
}

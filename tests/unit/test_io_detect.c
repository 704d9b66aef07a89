/* test_io_detect.c - family/layout detection on checkpoints with the real names and FULL shapes (written as
 * sparse files: the header is real, the data is a hole, so a 7.7 GB klein DiT costs no disk), plus prefixed
 * ComfyUI names, tiny sizes, and the unknown case. */
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#include "io/detect.h"
#include "test.h"

typedef struct spec {
    char name[128];
    int ndim;
    int64_t shape[4];
} spec;

static spec specs[2048];
static int n_specs;

static void add(const char *name, int ndim, int64_t a, int64_t b, int64_t c, int64_t d) {
    spec *s = &specs[n_specs++];
    snprintf(s->name, sizeof s->name, "%s", name);
    s->ndim = ndim;
    s->shape[0] = a, s->shape[1] = b, s->shape[2] = c, s->shape[3] = d;
}

static char path[] = "/tmp/kiln-detect-XXXXXX";

/* Writes specs as a bf16 checkpoint: header, then a hole of the right size. Opens it into *f. */
static kiln_status write_sparse(const char *prefix, kiln_st_file **f, kiln_err *err) {
    size_t cap = (size_t)n_specs * 256 + 64, used = 0;
    char *h = malloc(cap);
    uint64_t off = 0;
    used += (size_t)snprintf(h + used, cap - used, "{");
    for (int i = 0; i < n_specs; i++) {
        uint64_t bytes = 2;
        char shape[96] = "";
        size_t sl = 0;
        for (int k = 0; k < specs[i].ndim; k++) {
            bytes *= (uint64_t)specs[i].shape[k];
            sl += (size_t)snprintf(shape + sl, sizeof shape - sl, "%s%lld", k ? "," : "", (long long)specs[i].shape[k]);
        }
        used += (size_t)snprintf(h + used, cap - used, "%s\"%s%s\":{\"dtype\":\"BF16\",\"shape\":[%s],"
                                 "\"data_offsets\":[%llu,%llu]}", i ? "," : "", prefix, specs[i].name, shape,
                                 (unsigned long long)off, (unsigned long long)(off + bytes));
        off += bytes;
    }
    used += (size_t)snprintf(h + used, cap - used, "}");
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    uint64_t hl = used;
    CHECK(fd >= 0 && write(fd, &hl, 8) == 8 && write(fd, h, used) == (ssize_t)used);
    CHECK(ftruncate(fd, (off_t)(8 + used + off)) == 0);
    close(fd);
    free(h);
    return kiln_st_open(path, f, err);
}

static void klein_bfl(void) {
    n_specs = 0;
    add("img_in.weight", 2, 3072, 128, 0, 0);
    add("txt_in.weight", 2, 3072, 7680, 0, 0);
    add("time_in.in_layer.weight", 2, 3072, 256, 0, 0);
    add("time_in.out_layer.weight", 2, 3072, 3072, 0, 0);
    add("double_stream_modulation_img.lin.weight", 2, 18432, 3072, 0, 0);
    add("double_stream_modulation_txt.lin.weight", 2, 18432, 3072, 0, 0);
    add("single_stream_modulation.lin.weight", 2, 9216, 3072, 0, 0);
    char n[128];
    for (int b = 0; b < 5; b++) {
        const char *st[] = {"img", "txt"};
        for (int s = 0; s < 2; s++) {
            snprintf(n, sizeof n, "double_blocks.%d.%s_attn.qkv.weight", b, st[s]);
            add(n, 2, 9216, 3072, 0, 0);
            snprintf(n, sizeof n, "double_blocks.%d.%s_attn.norm.query_norm.scale", b, st[s]);
            add(n, 1, 128, 0, 0, 0);
            snprintf(n, sizeof n, "double_blocks.%d.%s_attn.norm.key_norm.scale", b, st[s]);
            add(n, 1, 128, 0, 0, 0);
            snprintf(n, sizeof n, "double_blocks.%d.%s_attn.proj.weight", b, st[s]);
            add(n, 2, 3072, 3072, 0, 0);
            snprintf(n, sizeof n, "double_blocks.%d.%s_mlp.0.weight", b, st[s]);
            add(n, 2, 18432, 3072, 0, 0);
            snprintf(n, sizeof n, "double_blocks.%d.%s_mlp.2.weight", b, st[s]);
            add(n, 2, 3072, 9216, 0, 0);
        }
    }
    for (int b = 0; b < 20; b++) {
        snprintf(n, sizeof n, "single_blocks.%d.linear1.weight", b);
        add(n, 2, 27648, 3072, 0, 0);
        snprintf(n, sizeof n, "single_blocks.%d.linear2.weight", b);
        add(n, 2, 3072, 12288, 0, 0);
        snprintf(n, sizeof n, "single_blocks.%d.norm.query_norm.scale", b);
        add(n, 1, 128, 0, 0, 0);
        snprintf(n, sizeof n, "single_blocks.%d.norm.key_norm.scale", b);
        add(n, 1, 128, 0, 0, 0);
    }
    add("final_layer.adaLN_modulation.1.weight", 2, 6144, 3072, 0, 0);
    add("final_layer.linear.weight", 2, 128, 3072, 0, 0);
}

static void test_klein_4b_bfl_and_comfy_prefix(void) {
    klein_bfl();
    CHECK_EQ_INT(n_specs, 149); /* spec 1.6 */
    const char *prefixes[] = {"", "model.diffusion_model."};
    for (int p = 0; p < 2; p++) {
        kiln_err err = {0};
        kiln_st_file *f;
        CHECK_EQ_INT(write_sparse(prefixes[p], &f, &err), KILN_OK);
        if (!f) continue;
        kiln_detect_result d;
        kiln_detect(f, &d);
        CHECK_EQ_STR(d.id, "flux2-klein-4b");
        CHECK_EQ_INT(d.family, KILN_FAMILY_FLUX2_DIT);
        CHECK_EQ_INT(d.layout, KILN_LAYOUT_BFL);
        CHECK(d.n_double == 5 && d.n_single == 20 && d.hidden == 3072 && d.context == 7680);
        CHECK_EQ_STR(kiln_st_prefix(f), prefixes[p]);
        kiln_st_close(f);
    }
}

static void test_tiny_diffusers_dit(void) {
    n_specs = 0;
    add("x_embedder.weight", 2, 64, 128, 0, 0);
    add("context_embedder.weight", 2, 64, 48, 0, 0);
    add("double_stream_modulation_img.linear.weight", 2, 384, 64, 0, 0);
    add("transformer_blocks.0.attn.to_q.weight", 2, 64, 64, 0, 0);
    add("transformer_blocks.1.attn.to_q.weight", 2, 64, 64, 0, 0);
    add("single_transformer_blocks.0.attn.to_qkv_mlp_proj.weight", 2, 576, 64, 0, 0);
    kiln_err err = {0};
    kiln_st_file *f;
    CHECK_EQ_INT(write_sparse("", &f, &err), KILN_OK);
    if (!f) return;
    kiln_detect_result d;
    kiln_detect(f, &d);
    CHECK_EQ_STR(d.id, "flux2-dit");
    CHECK_EQ_INT(d.layout, KILN_LAYOUT_DIFFUSERS);
    CHECK(d.n_double == 2 && d.n_single == 1 && d.hidden == 64 && d.context == 48);
    kiln_st_close(f);
}

static void test_qwen3_4b(void) {
    n_specs = 0;
    add("model.embed_tokens.weight", 2, 151936, 2560, 0, 0);
    char n[128];
    for (int l = 0; l < 36; l++) {
        snprintf(n, sizeof n, "model.layers.%d.input_layernorm.weight", l);
        add(n, 1, 2560, 0, 0, 0);
        snprintf(n, sizeof n, "model.layers.%d.self_attn.q_norm.weight", l);
        add(n, 1, 128, 0, 0, 0);
    }
    add("model.norm.weight", 1, 2560, 0, 0, 0);
    kiln_err err = {0};
    kiln_st_file *f;
    CHECK_EQ_INT(write_sparse("", &f, &err), KILN_OK);
    if (!f) return;
    kiln_detect_result d;
    kiln_detect(f, &d);
    CHECK_EQ_STR(d.id, "qwen3-4b");
    CHECK_EQ_INT(d.layout, KILN_LAYOUT_HF);
    CHECK_EQ_INT(d.n_layers, 36);
    kiln_st_close(f);
}

static void test_vae_both_namings(void) {
    for (int bfl = 0; bfl < 2; bfl++) {
        n_specs = 0;
        add("bn.running_mean", 1, 128, 0, 0, 0);
        add("decoder.conv_in.weight", 4, 512, 32, 3, 3);
        add(bfl ? "decoder.mid.block_1.conv1.weight" : "decoder.mid_block.resnets.0.conv1.weight", 4, 512, 512, 3, 3);
        kiln_err err = {0};
        kiln_st_file *f;
        CHECK_EQ_INT(write_sparse("", &f, &err), KILN_OK);
        if (!f) continue;
        kiln_detect_result d;
        kiln_detect(f, &d);
        CHECK_EQ_STR(d.id, "flux2-vae");
        CHECK_EQ_INT(d.layout, bfl ? KILN_LAYOUT_BFL : KILN_LAYOUT_DIFFUSERS);
        CHECK(d.has_decoder && !d.has_encoder);
        kiln_st_close(f);
    }
}

static void test_flux1_and_unknown(void) {
    n_specs = 0;
    add("img_in.weight", 2, 3072, 64, 0, 0);
    add("txt_in.weight", 2, 3072, 4096, 0, 0);
    add("guidance_in.in_layer.weight", 2, 3072, 256, 0, 0);
    add("double_blocks.0.img_mod.lin.weight", 2, 18432, 3072, 0, 0);
    kiln_err err = {0};
    kiln_st_file *f;
    CHECK_EQ_INT(write_sparse("", &f, &err), KILN_OK);
    if (f) {
        kiln_detect_result d;
        kiln_detect(f, &d);
        CHECK_EQ_INT(d.family, KILN_FAMILY_FLUX1_DIT);
        CHECK_EQ_STR(d.id, "flux1-dit");
        CHECK(strstr(d.desc, "guidance-distilled") != NULL);
        kiln_st_close(f);
    }
    n_specs = 0;
    add("encoder.layer.0.weight", 2, 4, 4, 0, 0);
    CHECK_EQ_INT(write_sparse("", &f, &err), KILN_OK);
    if (f) {
        kiln_detect_result d;
        kiln_detect(f, &d);
        CHECK_EQ_INT(d.family, KILN_FAMILY_UNKNOWN);
        CHECK_EQ_STR(d.id, "unknown");
        CHECK_EQ_STR(kiln_layout_name(d.layout), "unknown");
        kiln_st_close(f);
    }
}

int main(void) {
    int fd = mkstemp(path);
    if (fd < 0) return 1;
    close(fd);
    RUN(test_klein_4b_bfl_and_comfy_prefix);
    RUN(test_tiny_diffusers_dit);
    RUN(test_qwen3_4b);
    RUN(test_vae_both_namings);
    RUN(test_flux1_and_unknown);
    unlink(path);
    return test_summary();
}

/* test_fidelity.c - kiln in every config it accepts gives what the official Flux2KleinPipeline gives,
 * and refuses by name every config it cannot honour (issue 16, "Fidelity").
 *
 * Accepted: the variant goldens of tools/reference/variants.py (Flux2KleinPipeline.from_pretrained in fp32 on
 * tests/data/tiny/variants/<name> or a tiny folder with other call arguments: static shift, linear time shift,
 * nested / top-level rope_theta, VAE with 16 norm groups and BatchNorm eps 0.1, model_index.json without
 * is_distilled, base at guidance 0.5, a 27-layer Qwen3, a 681-token prompt, a negative prompt on base and on the
 * distilled model). Each must match the official uint8 image at >= 60 dB PSNR with exact (f32) matmuls and
 * >= 40 dB in the default (FAST, bf16 matmul) precision; the sigmas and the text features are compared too.
 * Refused: folders written here (configs edited, weights symlinked), each error must name the key. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "golden.h"
#include "kiln.h"
#include "pipeline/trace.h"
#include "server/engine_select.h"
#include "test.h"
#include "trace_capture.h"

/* only the stages compared here: the schedule and the text features */
static void on_trace(void *ctx, const char *name, const float *data, size_t n) {
    if (strcmp(name, "sigmas") && strcmp(name, "features") && strcmp(name, "negative_features")) return;
    trace_capture(ctx, name, data, n);
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

/* One variant golden in one precision: the image's PSNR against the official one, plus its sigmas, features
 * and warnings. Returns the PSNR (0 when the run failed). */
static double run_variant(const char *name, bool exact) {
    char gname[128];
    snprintf(gname, sizeof gname, "variant_%s_f32", name);
    golden g;
    if (!golden_open(&g, gname)) return 0;
    char folder[1024];
    snprintf(folder, sizeof folder, "%s", test_src_path("tests/data/tiny/"));
    snprintf(folder + strlen(folder), sizeof folder - strlen(folder), "%s", golden_meta(&g, "folder"));
    int W = atoi(golden_meta(&g, "width")), H = atoi(golden_meta(&g, "height"));
    size_t n_noise, n_ref;
    float *noise = golden_f32(&g, "noise", &n_noise), *ref = golden_f32(&g, "image_u8", &n_ref);
    double psnr = 0;
    kiln_err err = {0};
    kiln_engine_config cfg = kiln_engine_config_default();
    cfg.model_dir = folder;
    cfg.exact = exact;
    cfg.n_threads = 1; /* tiny models: a thread pool only adds wake-ups (2x slower on a loaded 2-core CI) */
    kiln_engine *eng = NULL;
    CHECK_MSG(kiln_engine_open(&cfg, &eng, &err) == KILN_OK, "%s: %s", name, err.msg);
    kiln_result *res = NULL;
    traces tr = {0};
    if (eng && noise && ref) {
        /* the variant the official pipeline ran (model_index.json read by kiln, not told) */
        int distilled = atoi(golden_meta(&g, "is_distilled"));
        CHECK_MSG(kiln_engine_variant(eng) == (distilled ? KILN_VARIANT_DISTILLED : KILN_VARIANT_BASE),
                  "%s: kiln opened the %s variant, the official pipeline ran is_distilled %d", name,
                  kiln_engine_variant(eng) == KILN_VARIANT_BASE ? "base" : "distilled", distilled);
        kiln_request req = kiln_request_default();
        req.prompt = golden_meta(&g, "prompt");
        req.negative_prompt = golden_meta(&g, "negative_prompt");
        req.width = W;
        req.height = H;
        req.steps = atoi(golden_meta(&g, "steps"));
        req.guidance = (float)atof(golden_meta(&g, "guidance_scale"));
        req.noise = noise;
        req.noise_count = n_noise;
        CHECK_MSG(kiln_generate_traced(eng, &req, on_trace, &tr, &res, &err) == KILN_OK, "%s: %s", name, err.msg);
    }
    if (res && ref && n_ref == (size_t)W * H * 3 && res->n_images == 1) {
        psnr = psnr_u8(res->images[0].pixels, ref, n_ref);
        const char *mode = exact ? "exact" : "fast";
        double bar = exact ? 60.0 : 40.0;
        printf("  %-20s %-5s image PSNR %6.1f dB (bar %.0f)\n", name, mode, psnr, bar);
        CHECK_MSG(psnr >= bar, "%s (%s): PSNR %.1f dB < %.0f against the official pipeline", name, mode, psnr, bar);
        /* the schedule is the same arithmetic in both precisions: f32 values within 1 ulp */
        size_t n_sig;
        float *sig = golden_f32(&g, "sigmas", &n_sig);
        trace_buf *ks = trace_find(&tr, "sigmas");
        CHECK_MSG(ks && sig && ks->n == n_sig && max_abs_diff(ks->data, sig, n_sig) <= 1.2e-7,
                  "%s: sigmas differ from the official scheduler's (max %g)", name,
                  ks && sig && ks->n == n_sig ? max_abs_diff(ks->data, sig, n_sig) : -1.0);
        free(sig);
        /* text features: with CFG the unconditional branch is the negative prompt's (or ""'s) encoding */
        bool cfg_on = atoi(golden_meta(&g, "cfg")) != 0;
        CHECK_MSG((trace_find(&tr, "negative_features") != NULL) == cfg_on, "%s: CFG %s, the official pipeline %s", name,
                  trace_find(&tr, "negative_features") ? "ran" : "did not run", cfg_on ? "ran it" : "did not");
        const char *feats[] = {"features", "negative_features"};
        for (int i = 0; i < 2 && exact; i++) {
            if (!kiln_st_find(g.f, feats[i])) continue;
            size_t n;
            float *want = golden_f32(&g, feats[i], &n);
            trace_buf *got = trace_find(&tr, feats[i]);
            double m = got && want && got->n == n ? max_abs_diff(got->data, want, n) : 1e30;
            /* fp32 vs fp32 on unit-scale features up to ~20: the qwen3 golden's own bound is 5.3e-4 */
            CHECK_MSG(m <= 1e-3, "%s: %s differ from the official ones by %g", name, feats[i], m);
            free(want);
        }
        /* a prompt over the template: truncated as the official tokenizer does, and the user is told how much */
        int dropped = atoi(golden_meta(&g, "dropped_tokens"));
        if (dropped > 0) {
            char want[64];
            snprintf(want, sizeof want, "%d tokens dropped", dropped);
            CHECK_MSG(res->warnings && strstr(res->warnings, want), "%s: warnings '%s' lack '%s'", name,
                      res->warnings ? res->warnings : "(none)", want);
        }
        if (golden_meta(&g, "negative_prompt") && !cfg_on)
            CHECK_MSG(res->warnings && strstr(res->warnings, "negative prompt ignored"),
                      "%s: an unused negative prompt gave no warning", name);
        if (dropped == 0 && (cfg_on || !golden_meta(&g, "negative_prompt")))
            CHECK_MSG(!res->warnings, "%s: unexpected warnings '%s'", name, res->warnings);
    }
    kiln_result_free(res);
    traces_free(&tr);
    kiln_engine_close(eng);
    free(noise);
    free(ref);
    golden_close(&g);
    return psnr;
}

static const char *const VARIANTS[] = {"static-shift",  "linear-shift",      "rope-nested", "rope-toplevel",
                                       "vae-groups16",  "no-is-distilled",   "qwen3-27-layers",
                                       "base-guidance-0.5", "long-prompt",   "negative-base",
                                       "negative-distilled"};

static void test_variants_exact(void) {
    for (size_t i = 0; i < sizeof VARIANTS / sizeof VARIANTS[0]; i++) run_variant(VARIANTS[i], true);
}

static void test_variants_fast(void) {
    for (size_t i = 0; i < sizeof VARIANTS / sizeof VARIANTS[0]; i++) run_variant(VARIANTS[i], false);
}

/* ---- refusals ------------------------------------------------------------------------------------------- */

static char tmp_root[256];

static void link_to(const char *target, const char *link) { CHECK_MSG(symlink(target, link) == 0, "symlink %s", link); }

/* tmp/<case>/: model_index.json and the subfolders of the tiny diffusers folder as symlinks, except `sub`, which
 * gets symlinks to its files and its config `file` with key set to the JSON `value` ("DELETE" removes it; key
 * "*": value is an object whose members are all set).
 * sub "" edits model_index.json. Returns the folder (static buffer). */
static const char *edited_folder(const char *name, const char *sub, const char *file, const char *key,
                                 const char *value) {
    static char dir[512];
    char src[1024], p[1024], q[1200];
    snprintf(src, sizeof src, "%s", test_src_path("tests/data/tiny/diffusers"));
    snprintf(dir, sizeof dir, "%s/%s", tmp_root, name);
    CHECK(mkdir(dir, 0755) == 0);
    const char *subs[] = {"transformer", "text_encoder", "vae", "tokenizer", "scheduler"};
    for (int i = 0; i < 5; i++) {
        snprintf(p, sizeof p, "%s/%s", src, subs[i]);
        snprintf(q, sizeof q, "%s/%s", dir, subs[i]);
        if (strcmp(subs[i], sub)) {
            link_to(p, q);
            continue;
        }
        CHECK(mkdir(q, 0755) == 0);
        const char *files[] = {"diffusion_pytorch_model.safetensors", "model-00001-of-00002.safetensors",
                               "model-00002-of-00002.safetensors", "model.safetensors.index.json"};
        for (int f = 0; f < 4; f++) {
            char a[1400], b[1400];
            snprintf(a, sizeof a, "%s/%s", p, files[f]);
            snprintf(b, sizeof b, "%s/%s", q, files[f]);
            if (access(a, F_OK) == 0) link_to(a, b);
        }
    }
    char cfg_src[1400], cfg_dst[1400];
    snprintf(cfg_src, sizeof cfg_src, "%s/%s%s%s", src, sub, *sub ? "/" : "", file);
    snprintf(cfg_dst, sizeof cfg_dst, "%s/%s%s%s", dir, sub, *sub ? "/" : "", file);
    if (*sub) { /* model_index.json of the folder itself */
        snprintf(p, sizeof p, "%s/model_index.json", src);
        snprintf(q, sizeof q, "%s/model_index.json", dir);
        link_to(p, q);
    }
    json_error_t je;
    json_t *c = json_load_file(cfg_src, 0, &je);
    CHECK_MSG(c != NULL, "%s: %s", cfg_src, je.text);
    if (!strcmp(key, "*")) { /* several keys at once */
        json_t *u = json_loads(value, 0, &je);
        json_object_update(c, u);
        json_decref(u);
    } else if (!strcmp(value, "DELETE")) json_object_del(c, key);
    else json_object_set_new(c, key, json_loads(value, JSON_DECODE_ANY, &je));
    CHECK(json_dump_file(c, cfg_dst, JSON_INDENT(2)) == 0);
    json_decref(c);
    return dir;
}

typedef struct refusal {
    const char *name, *sub, *file, *key, *value;
    const char *must_say; /* the key as the error names it */
} refusal;

#define SCHED "scheduler", "scheduler_config.json"
#define TE "text_encoder", "config.json"
#define VAE "vae", "config.json"
static const refusal REFUSALS[] = {
    {"shift-terminal", SCHED, "shift_terminal", "0.1", "shift_terminal"},
    {"karras", SCHED, "use_karras_sigmas", "true", "use_karras_sigmas"},
    {"exp-sigmas", SCHED, "use_exponential_sigmas", "true", "use_exponential_sigmas"},
    {"beta-sigmas", SCHED, "use_beta_sigmas", "true", "use_beta_sigmas"},
    {"invert", SCHED, "invert_sigmas", "true", "invert_sigmas"},
    {"stochastic", SCHED, "stochastic_sampling", "true", "stochastic_sampling"},
    {"flow-sigmas", SCHED, "use_flow_sigmas", "true", "use_flow_sigmas"},
    {"shift-type", SCHED, "time_shift_type", "\"cosine\"", "time_shift_type"},
    {"train-steps", SCHED, "num_train_timesteps", "500", "num_train_timesteps"},
    {"rope-yarn", TE, "rope_parameters", "{\"rope_type\": \"yarn\", \"rope_theta\": 1e6, \"factor\": 2.0}",
     "rope_type \"yarn\""},
    {"rope-scaling", TE, "rope_scaling", "{\"rope_type\": \"linear\", \"factor\": 2.0}", "rope_scaling"},
    {"qwen-26-layers", TE, "num_hidden_layers", "26", "num_hidden_layers 26"},
    {"qwen-gelu", TE, "hidden_act", "\"gelu\"", "hidden_act"},
    {"qwen-bias", TE, "attention_bias", "true", "attention_bias"},
    {"qwen-window", TE, "*", "{\"use_sliding_window\": true, \"sliding_window\": 128, \"max_window_layers\": 0, "
     "\"layer_types\": null}", "sliding_window 128"},
    {"vae-relu", VAE, "act_fn", "\"relu\"", "act_fn"},
    {"vae-no-pq", VAE, "use_post_quant_conv", "false", "use_post_quant_conv"},
    {"vae-no-attn", VAE, "mid_block_add_attention", "false", "mid_block_add_attention"},
    {"vae-patch", VAE, "patch_size", "[1, 1]", "patch_size"},
    {"vae-blocks", VAE, "up_block_types", "[\"AttnUpDecoderBlock2D\"]", "up_block_types"},
    {"vae-groups24", VAE, "norm_num_groups", "24", "norm_num_groups 24"},
    {"vae-latent", VAE, "latent_channels", "16", "latent_channels 16"},
    {"dit-axes", "transformer", "config.json", "axes_dims_rope", "[16, 8, 8]", "axes_dims_rope has 3 axes"},
    {"dit-patch", "transformer", "config.json", "patch_size", "2", "patch_size 2"},
    {"dit-guidance", "transformer", "config.json", "guidance_embeds", "true", "guidance_embeds"},
    {"dit-layers", "transformer", "config.json", "num_layers", "3", "num_layers 3"},
    {"dit-in", "transformer", "config.json", "in_channels", "64", "in_channels 64"},
    {"index-scheduler", "", "model_index.json", "scheduler", "[\"diffusers\", \"DDIMScheduler\"]", "scheduler"},
    {"index-pipeline", "", "model_index.json", "_class_name", "\"Flux2Pipeline\"", "_class_name"},
};

static void test_refusals(void) {
    snprintf(tmp_root, sizeof tmp_root, "/tmp/kiln-test-configs-%d", (int)getpid());
    CHECK(mkdir(tmp_root, 0755) == 0 || errno == EEXIST);
    for (size_t i = 0; i < sizeof REFUSALS / sizeof REFUSALS[0]; i++) {
        const refusal *r = &REFUSALS[i];
        const char *dir = edited_folder(r->name, r->sub, r->file, r->key, r->value);
        kiln_err err = {0};
        kiln_engine_config cfg = kiln_engine_config_default();
        cfg.model_dir = dir;
        kiln_engine *eng = NULL;
        kiln_status s = kiln_engine_open(&cfg, &eng, &err);
        CHECK_MSG(s != KILN_OK && eng == NULL, "%s: %s %s was accepted", r->name, r->key, r->value);
        CHECK_MSG(s == KILN_OK || strstr(err.msg, r->must_say), "%s: error '%s' does not name '%s'", r->name,
                  err.msg, r->must_say);
        if (s != KILN_OK) printf("  refused %-16s %s\n", r->name, err.msg);
        kiln_engine_close(eng);
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_root);
    CHECK(system(cmd) == 0);
}

/* Values that leave the maths alone are accepted: shift_terminal 0 (diffusers tests `if shift_terminal:`),
 * a long sliding window (>= the 512 tokens) and flags set to their defaults. */
static void test_harmless_values(void) {
    snprintf(tmp_root, sizeof tmp_root, "/tmp/kiln-test-configs-ok-%d", (int)getpid());
    CHECK(mkdir(tmp_root, 0755) == 0 || errno == EEXIST);
    const refusal ok[] = {
        {"terminal-0", SCHED, "shift_terminal", "0", ""},
        {"karras-false", SCHED, "use_karras_sigmas", "false", ""},
        {"window-4096", TE, "use_sliding_window", "true", ""},
        {"no-is-distilled-key", "", "model_index.json", "is_distilled", "DELETE", ""},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        const char *dir = edited_folder(ok[i].name, ok[i].sub, ok[i].file, ok[i].key, ok[i].value);
        kiln_err err = {0};
        kiln_engine_config cfg = kiln_engine_config_default();
        cfg.model_dir = dir;
        kiln_engine *eng = NULL;
        CHECK_MSG(kiln_engine_open(&cfg, &eng, &err) == KILN_OK, "%s: %s", ok[i].name, err.msg);
        if (eng && !strcmp(ok[i].name, "no-is-distilled-key")) CHECK_EQ_INT(kiln_engine_variant(eng), KILN_VARIANT_BASE);
        kiln_engine_close(eng);
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_root);
    CHECK(system(cmd) == 0);
}

/* A negative guidance is a caller's mistake, refused before any work. */
static void test_guidance_validation(void) {
    kiln_err err = {0};
    kiln_engine_config cfg = kiln_engine_config_default();
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", test_src_path("tests/data/tiny/diffusers-base"));
    cfg.model_dir = dir;
    kiln_engine *eng = NULL;
    CHECK_MSG(kiln_engine_open(&cfg, &eng, &err) == KILN_OK, "%s", err.msg);
    if (!eng) return;
    kiln_request req = kiln_request_default();
    req.width = req.height = 32;
    req.steps = 1;
    req.guidance = -1.0f;
    kiln_result *res = NULL;
    CHECK(kiln_generate(eng, &req, &res, &err) == KILN_E_INVALID && !res);
    CHECK_ERR_CONTAINS(&err, "guidance -1");
    kiln_engine_close(eng);
}

/* The server's engine (graph/engine.h, what a ComfyUI graph's VAEDecode calls) passes the negative CLIPTextEncode
 * text on and hands the engine's warnings back (the worker puts them in the job's messages): single files are the
 * distilled klein, so a negative prompt is reported unused, and a long prompt truncated. */
static void test_server_engine_warnings(void) {
    kiln_gen_engine *e = kiln_server_engine_new("cpu");
    CHECK(e != NULL);
    if (!e) return;
    static char u[1024], c[1024], v[1024];
    snprintf(u, sizeof u, "%s", test_src_path("tests/data/tiny/comfy/flux-2-klein-4b.safetensors"));
    snprintf(c, sizeof c, "%s", test_src_path("tests/data/tiny/comfy/qwen_3_4b.safetensors"));
    snprintf(v, sizeof v, "%s", test_src_path("tests/data/tiny/comfy/flux2-vae.safetensors"));
    char *longp = malloc(700 * 5 + 1);
    for (int i = 0; i < 700; i++) memcpy(longp + 5 * i, "word ", 5);
    longp[700 * 5] = 0;
    kiln_gen_params p = {.unet_path = u, .clip_path = c, .vae_path = v, .prompt = longp,
                         .negative_prompt = "blurry", .width = 32, .height = 32, .steps = 1, .batch = 1, .seed = 1,
                         .cfg = 1.0f, .sampler = "euler", .request_id = "t"};
    kiln_gen_images out = {0};
    kiln_err err = {0};
    CHECK_MSG(e->generate(e->self, &p, NULL, NULL, &out, &err) == KILN_OK, "%s", err.msg);
    CHECK_MSG(strstr(out.warnings, "negative prompt ignored") && strstr(out.warnings, "tokens dropped"),
              "warnings: '%s'", out.warnings);
    kiln_free(out.pixels);
    kiln_server_engine_free(e);
    free(longp);
}

int main(void) {
    RUN(test_refusals);
    RUN(test_harmless_values);
    RUN(test_guidance_validation);
    RUN(test_server_engine_warnings);
    RUN(test_variants_exact);
    RUN(test_variants_fast);
    return test_summary();
}

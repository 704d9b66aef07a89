/* cmd_generate.c - `kiln generate`: text to PNG with FLUX.2 [klein].
 *
 *   kiln generate -p PROMPT (--model DIR | --unet F --clip F [--clip2 F] --vae F) [-W 512] [-H 512] [--steps N] [--seed S]
 *                 [-n N] [-o out.png] [--perf-dump F] [--noise F] [--guidance G] [--negative-prompt TEXT]
 *                 [--base] [--exact] [--ref A.png [--ref B.png ...]] [--init X.png [--strength S]] [--tp N]
 *
 * n > 1 writes out.png, out-1.png, out-2.png ... (or fills a %d in the name with 0, 1, 2 ...). Every PNG
 * carries its parameters in text chunks. Exit codes: kiln_status_exit_code (2 bad input, 3 missing file,
 * 4 bad file, 6 out of memory / over a limit, ...).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "compute/cuda/cuda_device.h"
#include "io/image_load.h"
#include "io/image_png.h"
#include "kiln.h"
#include "models/lora.h"
#include "pipeline/noise.h"
#include "pipeline/torch_randn.h"
#include "pipeline/progress_bar.h"

/* Output name of image i of n. */
static void out_name(const char *pattern, int i, int n, char *buf, size_t cap) {
    const char *pct = strstr(pattern, "%d");
    if (pct && !strchr(pct + 2, '%') && !memchr(pattern, '%', (size_t)(pct - pattern))) {
        snprintf(buf, cap, "%.*s%d%s", (int)(pct - pattern), pattern, i, pct + 2);
        return;
    }
    if (n == 1 || i == 0) {
        snprintf(buf, cap, "%s", pattern);
        return;
    }
    const char *dot = strrchr(pattern, '.');
    const char *slash = strrchr(pattern, '/');
    if (!dot || (slash && dot < slash)) snprintf(buf, cap, "%s-%d", pattern, i);
    else snprintf(buf, cap, "%.*s-%d%s", (int)(dot - pattern), pattern, i, dot);
}

static uint64_t random_seed(void) {
    uint64_t s = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)kiln_clock_ns();
    FILE *f = fopen("/dev/urandom", "rb");
    if (f) {
        if (fread(&s, sizeof s, 1, f) != 1) s ^= 0x9E3779B97F4A7C15ull;
        fclose(f);
    }
    return s % 4294967296ull; /* 32-bit seeds are easier to type back */
}

typedef struct cli_images {
    const char *ref_path[KILN_MAX_REFS], *init_path;
    int n_refs;
    kiln_image_in refs[KILN_MAX_REFS], init;
    uint8_t *px[KILN_MAX_REFS + 1];
} cli_images;

static void images_free(cli_images *im) {
    for (int i = 0; i <= KILN_MAX_REFS; i++) kiln_free(im->px[i]);
}

/* Decodes --ref and --init files (strictly: io/image_load.h) into the request. */
static kiln_status images_load(cli_images *im, kiln_request *req, kiln_err *err) {
    for (int k = 0; k < im->n_refs; k++) {
        kiln_image_in *r = &im->refs[k];
        KILN_TRY(kiln_image_load(im->ref_path[k], NULL, &im->px[k], &r->width, &r->height, err));
        r->pixels = im->px[k];
    }
    if (im->n_refs) {
        req->refs = im->refs;
        req->n_refs = im->n_refs;
    }
    if (im->init_path) {
        KILN_TRY(kiln_image_load(im->init_path, NULL, &im->px[KILN_MAX_REFS], &im->init.width, &im->init.height, err));
        im->init.pixels = im->px[KILN_MAX_REFS];
        req->init_image = &im->init;
    }
    return KILN_OK;
}

static const char synopsis[] =
    "usage: kiln generate -p PROMPT (--model DIR | --unet F --clip F [--clip2 F] --vae F) [options]\n\n";

/* What the table's callbacks fill: the repeatable and the composite options. */
typedef struct gen_cli {
    kiln_engine_config *cfg;
    kiln_request *req;
    cli_images *images;
    char lora_paths[16][4096];
    kiln_lora loras[16];
    int n_loras;
    bool keep_te;
    float sigmas[1001]; /* --sigmas: the schedule, 1000 steps at most */
} gen_cli;

static bool opt_guidance(void *ctx, const char *v, char *why, size_t cap) {
    char *end;
    float g = strtof(v, &end);
    if (!*v || *end || !(g > 0 && g < 100)) return snprintf(why, cap, "needs a number in (0, 100)"), false;
    ((gen_cli *)ctx)->req->guidance = g;
    return true;
}

static bool opt_device(void *ctx, const char *v, char *why, size_t cap) {
    kiln_engine_config *cfg = ((gen_cli *)ctx)->cfg;
    kiln_err derr = {0};
    kiln_backend_kind kind;
    if (kiln_device_parse(v, &kind, &cfg->device_index, &derr) != KILN_OK)
        return snprintf(why, cap, "%s", derr.msg), false;
    cfg->device = kind == KILN_BACKEND_CUDA ? KILN_DEVICE_CUDA : KILN_DEVICE_CPU;
    return true;
}

static bool opt_memory_limit(void *ctx, const char *v, char *why, size_t cap) {
    char *end;
    double gb = strtod(v, &end);
    if (!*v || *end || !(gb > 0 && gb < 1e9)) return snprintf(why, cap, "needs a positive number of GB"), false;
    ((gen_cli *)ctx)->cfg->memory_limit = (size_t)(gb * 1e9);
    return true;
}

static bool opt_vae_tile(void *ctx, const char *v, char *why, size_t cap) {
    char *end;
    long n = strtol(v, &end, 10);
    if (!strcmp(v, "off")) n = -1;
    else if (!*v || *end || n < 8 || n > 4096 || n % 4)
        return snprintf(why, cap, "needs 'off' or a multiple of 4 in 8..4096"), false;
    ((gen_cli *)ctx)->cfg->vae_tile = (int)n;
    return true;
}

static bool opt_variant(kiln_engine_config *cfg, kiln_variant v) {
    cfg->variant = v;
    return true;
}
static bool opt_base(void *ctx, const char *v, char *why, size_t cap) {
    (void)v, (void)why, (void)cap;
    return opt_variant(((gen_cli *)ctx)->cfg, KILN_VARIANT_BASE);
}
static bool opt_distilled(void *ctx, const char *v, char *why, size_t cap) {
    (void)v, (void)why, (void)cap;
    return opt_variant(((gen_cli *)ctx)->cfg, KILN_VARIANT_DISTILLED);
}

static bool opt_strength(void *ctx, const char *v, char *why, size_t cap) {
    char *end;
    double x = strtod(v, &end);
    if (!*v || *end || !(x > 0 && x <= 1)) return snprintf(why, cap, "must be a number in (0, 1]"), false;
    ((gen_cli *)ctx)->req->strength = x; /* a double: get_timesteps' int(steps - steps * strength) is Python maths */
    return true;
}

static bool opt_sigmas(void *ctx, const char *v, char *why, size_t cap) {
    gen_cli *g = ctx;
    int n = 0;
    for (const char *p = v; *p; n++) {
        char *end;
        if (n == (int)KILN_N(g->sigmas)) return snprintf(why, cap, "has more than %d values", n), false;
        g->sigmas[n] = strtof(p, &end);
        if (end == p || (*end && *end != ',')) return snprintf(why, cap, "needs a comma-separated list of numbers"), false;
        p = *end ? end + 1 : end;
    }
    g->req->sigmas = g->sigmas; /* kiln_generate checks the schedule itself */
    g->req->n_sigmas = n;
    return true;
}

static bool opt_ref(void *ctx, const char *v, char *why, size_t cap) {
    cli_images *im = ((gen_cli *)ctx)->images;
    if (im->n_refs == KILN_MAX_REFS) return snprintf(why, cap, "takes at most %d reference images", KILN_MAX_REFS), false;
    im->ref_path[im->n_refs++] = v;
    return true;
}

static bool opt_lora(void *ctx, const char *v, char *why, size_t cap) {
    gen_cli *g = ctx;
    int n = g->n_loras;
    if (n == (int)KILN_N(g->loras)) return snprintf(why, cap, "takes at most %d adapters", n), false;
    kiln_err lerr = {0};
    if (kiln_lora_parse_arg(v, g->lora_paths[n], sizeof g->lora_paths[n], &g->loras[n].strength, &lerr) != KILN_OK)
        return snprintf(why, cap, "is not valid: %s", lerr.msg), false;
    g->loras[n].path = g->lora_paths[n];
    g->n_loras++;
    return true;
}

int kiln_cmd_generate(int argc, char **argv) {
    cli_images images = {0};
    bool have_w = false, have_h = false, have_strength = false;
    kiln_engine_config cfg = kiln_engine_config_default();
    kiln_request req = kiln_request_default();
    const char *prompt = NULL, *output = "out.png", *perf = NULL, *noise_path = NULL;
    bool have_seed = false, quiet = false, comfy_noise = false, comfy_text = false;
    static gen_cli g; /* the LoRA paths are large */
    g = (gen_cli){.cfg = &cfg, .req = &req, .images = &images};
    char ref_help[160];
    snprintf(ref_help, sizeof ref_help,
             "a reference image to edit from (PNG, JPEG or WebP; repeat for up to %d);\n"
             "without -W/-H the output takes the first reference's size (as diffusers)", KILN_MAX_REFS);
    const kiln_opt opts[] = {
        KILN_OPT_STR("--prompt", "-p", "TEXT", "what to draw (UTF-8)", &prompt),
        KILN_OPT_STR("--model", NULL, "DIR",
                     "a diffusers FLUX.2 [klein] or FLUX.1 [dev]/[schnell] folder (model_index.json,\n"
                     "transformer/, ...): the family comes from the files", &cfg.model_dir),
        KILN_OPT_STR("--unet", NULL, "F",
                     "ComfyUI single files: --unet flux-2-klein-4b --clip qwen_3_4b --vae flux2-vae\n"
                     "(.safetensors); FLUX.1: --unet flux1-dev (or -schnell) --clip clip_l --clip2 t5xxl_fp16\n"
                     "--vae ae", &cfg.unet_path),
        KILN_OPT_STR("--clip", NULL, "F", "the text encoder file (FLUX.1: CLIP-L)", &cfg.clip_path),
        KILN_OPT_STR("--clip2", "--t5", "F", "FLUX.1: the T5 encoder file", &cfg.clip2_path),
        KILN_OPT_STR("--vae", NULL, "F", "the VAE file", &cfg.vae_path),
        {.name = "--width", .alias = "-W", .arg = "N", .help = "image width, a multiple of 16 (default 512)",
         .kind = KILN_OPT_KIND_INT, .dst = &req.width, .lo = 1, .hi = 1 << 20, .seen = &have_w},
        {.name = "--height", .alias = "-H", .arg = "N", .help = "image height, a multiple of 16 (default 512)",
         .kind = KILN_OPT_KIND_INT, .dst = &req.height, .lo = 1, .hi = 1 << 20, .seen = &have_h},
        KILN_OPT_INT("--steps", NULL, "N", "denoising steps (default 4 distilled, 50 base; FLUX.1 28 dev, 4 schnell)",
                     &req.steps, 1, 1000),
        {.name = "--seed", .arg = "S", .help = "seed of image 0; image i uses S + i (default: random, printed)",
         .kind = KILN_OPT_KIND_U64, .dst = &req.seed, .lo = 0, .hi = (double)UINT64_MAX, .seen = &have_seed},
        KILN_OPT_INT("--batch", "-n", "N", "images in one batch (default 1)", &req.batch, 1, 16),
        KILN_OPT_STR("--output", "-o", "F", "PNG path (default out.png); n > 1: F, F-1, F-2... or a %d pattern",
                     &output),
        KILN_OPT_STR("--perf-dump", NULL, "F", "write the per-stage timings as JSON", &perf),
        KILN_OPT_CALL("--lora", NULL, "FILE[:S]", "apply a LoRA adapter to the DiT at strength S (default 1); repeatable",
                      opt_lora, &g),
        KILN_OPT_FLAG("--lora-merge", NULL, "merge the adapters into copies of the weights they adapt (faster steps)",
                      &req.lora_merge),
        KILN_OPT_STR("--noise", NULL, "F",
                     "inject the initial noise [n,128,H/16,W/16] (FLUX.1: [n,64,H/16,W/16], the\n"
                     "packed latent; safetensors or raw f32)", &noise_path),
        KILN_OPT_FLAG("--comfy-noise", NULL,
                      "draw ComfyUI's noise: one torch.randn of the batch's latent from --seed (what\n"
                      "kiln serve's ComfyUI graphs draw), not kiln's seed + i", &comfy_noise),
        KILN_OPT_FLAG("--comfy-text", NULL,
                      "FLUX.1: tokenise as ComfyUI's graphs do ((word:1.2) weights, T5 padded to 256\n"
                      "and never cut), not as diffusers' FluxPipeline", &comfy_text),
        KILN_OPT_CALL("--guidance", NULL, "G",
                      "CFG scale for klein base (default 4.0; 1 or less: no CFG, as diffusers);\n"
                      "FLUX.1 [dev]: the distilled guidance (default 3.5); schnell ignores it", opt_guidance, &g),
        KILN_OPT_STR("--negative-prompt", NULL, "TEXT", "klein base with CFG: the unconditional branch's text (default \"\")",
                     &req.negative_prompt),
        KILN_OPT_CALL("--base", NULL, NULL, "single files are klein base (true CFG, 50 steps); folders say it themselves",
                      opt_base, &g),
        KILN_OPT_CALL("--distilled", NULL, NULL, "force the distilled variant", opt_distilled, &g),
        KILN_OPT_STR("--tokenizer", NULL, "DIR", "folder holding tokenizer.json (default: the model's, else kiln's copy)",
                     &cfg.tokenizer_dir),
        KILN_OPT_CALL("--device", NULL, "D", "cpu (default), cuda or cuda:N", opt_device, &g),
        KILN_OPT_INT("--threads", NULL, "N", "CPU threads (default KILN_THREADS or all cores)", &cfg.n_threads, 1, 256),
        KILN_OPT_FLAG("--exact", NULL, "f32 matmuls (matches fp32 references; slower)", &cfg.exact),
        KILN_OPT_CALL("--memory-limit", NULL, "GB", "refuse requests that need more (default: available memory)",
                      opt_memory_limit, &g),
        KILN_OPT_CALL("--vae-tile", NULL, "N|off",
                      "VAE decode in N x N latent tiles (N multiple of 4, >= 8; default: tiled\n"
                      "only when the untiled decode would not fit memory)", opt_vae_tile, &g),
        KILN_OPT_INT("--tp", NULL, "N",
                     "under mpirun: tensor parallelism over groups of N ranks (DiT and text\n"
                     "encoder; the groups split the image tokens when they can; docs/parallel.md)", &cfg.tp, 1, 1024),
        KILN_OPT_FLAG("--keep-text-encoder", NULL,
                      "keep the text encoder mapped while the DiT runs (default: release it;\n"
                      "one request per process, so releasing only lowers the peak)", &g.keep_te),
        KILN_OPT_CALL("--ref", NULL, "F", ref_help, opt_ref, &g),
        KILN_OPT_STR("--init", NULL, "F", "image-to-image from this picture (its size, cropped to multiples of 16)",
                     &images.init_path),
        {.name = "--strength", .arg = "S", .help = "with --init: 0 < S <= 1, how much is redrawn (default 0.8)",
         .kind = KILN_OPT_KIND_CALL, .call = opt_strength, .ctx = &g, .seen = &have_strength},
        KILN_OPT_CALL("--sigmas", NULL, "S0,S1,...,0", "the sigma schedule itself (e.g. ComfyUI's; steps follow from it)",
                      opt_sigmas, &g),
        KILN_OPT_STR("--prompt-2", NULL, "TEXT", "FLUX.1: the T5 text when it differs from the CLIP text (diffusers' prompt_2)",
                     &req.prompt_2),
        KILN_OPT_STR("--tag", NULL, "TEXT", "recorded in the perf dump", &req.tag),
        KILN_OPT_FLAG("--quiet", "-q", "no progress output", &quiet),
    };
    const kiln_opts spec = {
        .cmd = "kiln generate", .synopsis = synopsis, .opts = opts, .n = KILN_N(opts),
        .epilogue = "\nn > 1 writes out.png, out-1.png, out-2.png ... Every PNG carries its parameters in text chunks.\n"};
    int prc = kiln_opts_parse(&spec, argc, argv, NULL, NULL);
    if (prc != KILN_OPTS_CONTINUE) return prc;
    if (g.keep_te) cfg.te_policy = KILN_TE_AUTO;
    bool keep_te = g.keep_te;
    if (!prompt) {
        fprintf(stderr, "kiln generate: -p PROMPT is required (kiln generate --help)\n");
        return 2;
    }
    if (!cfg.model_dir && !(cfg.unet_path || cfg.clip_path || cfg.clip2_path || cfg.vae_path)) {
        fprintf(stderr, "kiln generate: give --model DIR or --unet F --clip F [--clip2 F] --vae F\n");
        return 2;
    }
    if (cfg.model_dir && (cfg.unet_path || cfg.clip_path || cfg.clip2_path || cfg.vae_path)) {
        fprintf(stderr, "kiln generate: give either --model or the single files, not both\n");
        return 2;
    }
    if (have_strength && !images.init_path) {
        fprintf(stderr, "kiln generate: --strength needs --init IMAGE\n");
        return 2;
    }
    /* diffusers' img2img default; a given schedule says itself where the image is noised to */
    if (images.init_path && !have_strength && !req.sigmas) req.strength = 0.8;
    if ((images.n_refs || images.init_path) && !have_w && !have_h) {
        if (noise_path || comfy_noise) {
            fprintf(stderr, "kiln generate: --noise/--comfy-noise with --ref/--init needs -W and -H\n");
            return 2;
        }
        req.width = req.height = 0; /* the size comes from the first reference (or the init image) */
    } else if (have_w != have_h && (images.n_refs || images.init_path)) {
        fprintf(stderr, "kiln generate: give both -W and -H, or neither (the image's size)\n");
        return 2;
    }
    if (!have_seed) req.seed = random_seed();
    if (!keep_te) cfg.te_policy = KILN_TE_RELEASE;
    req.prompt = prompt;
    req.text_rule = comfy_text ? KILN_TEXT_COMFY : KILN_TEXT_DIFFUSERS;
    req.loras = g.loras;
    req.n_loras = g.n_loras;

    kiln_err err = {0};
    float *noise = NULL;
    if (noise_path && comfy_noise) {
        fprintf(stderr, "kiln generate: give --noise or --comfy-noise, not both\n");
        return 2;
    }
    if ((noise_path || comfy_noise) && (req.width % 16 || req.height % 16)) {
        fprintf(stderr, "kiln generate: image size %dx%d: width and height must be multiples of 16\n", req.width,
                req.height);
        return 2;
    }

    if (images_load(&images, &req, &err) != KILN_OK) {
        fprintf(stderr, "kiln generate: %s\n", err.msg);
        images_free(&images);
        kiln_free(noise);
        return kiln_status_exit_code(err.code);
    }
    kiln_engine *eng = NULL;
    double t_open = kiln_clock_s();
    if (kiln_engine_open(&cfg, &eng, &err) != KILN_OK) {
        fprintf(stderr, "kiln generate: %s\n", err.msg);
        kiln_free(noise);
        images_free(&images);
        return kiln_status_exit_code(err.code);
    }
    if (!quiet) fprintf(stderr, "kiln: %s (opened in %.2fs)\n", kiln_engine_describe(eng), kiln_clock_s() - t_open);
    if (noise_path || comfy_noise) { /* its size depends on the model: 128 channels for FLUX.2, the DiT's in_channels for FLUX.1 */
        int ch = kiln_engine_latent_channels(eng);
        size_t count = (size_t)req.batch * (size_t)ch * (size_t)(req.width / 16) * (size_t)(req.height / 16);
        kiln_status ns = KILN_OK;
        if (noise_path) ns = kiln_noise_load(noise_path, count, &noise, &err);
        else if (!(noise = kiln_malloc(count * sizeof *noise))) ns = KILN_FAIL(&err, KILN_E_NOMEM, "out of memory");
        else ns = kiln_comfy_noise(noise, req.batch, ch, req.height / 16, req.width / 16,
                                   kiln_engine_variant(eng) >= KILN_VARIANT_FLUX1_DEV, req.seed, &err);
        if (ns != KILN_OK) {
            kiln_free(noise);
            fprintf(stderr, "kiln generate: %s: %s\n", noise_path ? "--noise" : "--comfy-noise", err.msg);
            images_free(&images);
            kiln_engine_close(eng);
            return kiln_status_exit_code(err.code);
        }
        req.noise = noise;
        req.noise_count = count;
    }

    kiln_progress_bar bar;
    kiln_progress_bar_init(&bar, stderr);
    bar.quiet = quiet;
    req.progress = kiln_progress_bar_update;
    req.progress_ctx = &bar;
    kiln_result *res = NULL;
    kiln_status s = kiln_generate(eng, &req, &res, &err);
    kiln_progress_bar_finish(&bar);
    /* warnings (a truncated prompt, an ignored negative prompt) are printed even with -q */
    for (const char *wl = s == KILN_OK ? res->warnings : NULL; wl && *wl;) {
        const char *nl = strchr(wl, '\n');
        int len = nl ? (int)(nl - wl) : (int)strlen(wl);
        fprintf(stderr, "kiln generate: warning: %.*s\n", len, wl);
        wl += len + (nl ? 1 : 0);
    }
    if (s != KILN_OK) {
        fprintf(stderr, "kiln generate: %s\n", err.msg);
        kiln_engine_close(eng);
        kiln_free(noise);
        images_free(&images);
        return kiln_status_exit_code(s);
    }

    double t_out = kiln_clock_s();
    char w[16], h[16], steps[16], guid[32], seedbuf[32];
    snprintf(w, sizeof w, "%d", res->width);
    snprintf(h, sizeof h, "%d", res->height);
    snprintf(steps, sizeof steps, "%d", res->steps);
    snprintf(guid, sizeof guid, "%g", res->guidance);
    const char *model = cfg.model_dir ? cfg.model_dir : cfg.unet_path;
    int rc = 0;
    /* under mpirun only rank 0 holds the images (kiln_engine_rank); the other ranks write nothing */
    int n_out = kiln_engine_rank(eng) == 0 ? res->n_images : 0;
    for (int i = 0; i < n_out && rc == 0; i++) {
        char path[4096];
        out_name(output, i, res->n_images, path, sizeof path);
        snprintf(seedbuf, sizeof seedbuf, "%llu", (unsigned long long)res->images[i].seed);
        kiln_png_text text[] = {
            {"prompt", prompt},   {"seed", seedbuf},   {"width", w},
            {"height", h},        {"steps", steps},    {"guidance", guid},
            {"negative_prompt", req.negative_prompt ? req.negative_prompt : ""},
            {"variant", res->variant == KILN_VARIANT_BASE           ? "klein-base"
                        : res->variant == KILN_VARIANT_FLUX1_DEV     ? "flux1-dev"
                        : res->variant == KILN_VARIANT_FLUX1_SCHNELL ? "flux1-schnell"
                                                                     : "klein"},
            {"model", model},     {"noise", noise_path    ? noise_path
                                 : comfy_noise ? "comfyui-torch-randn"
                                               : "kiln-xoshiro256-boxmuller"},
            {"Software", "kiln " KILN_VERSION},
        };
        if (kiln_png_write(path, res->images[i].pixels, res->images[i].width, res->images[i].height, text,
                           sizeof text / sizeof text[0], &err) != KILN_OK) {
            fprintf(stderr, "kiln generate: %s\n", err.msg);
            rc = kiln_status_exit_code(err.code);
            break;
        }
        if (!quiet) printf("%s (seed %s)\n", path, seedbuf);
    }
    kiln_result_set_output_ms(res, (kiln_clock_s() - t_out) * 1e3);
    if (rc == 0 && !quiet) {
        fprintf(stderr, "kiln: %.2fs total:", res->total_ms / 1e3);
        for (int st = 0; st < KILN_STAGE_COUNT; st++)
            fprintf(stderr, " %s %.2fs", kiln_stage_name((kiln_stage)st), res->stage_ms[st] / 1e3);
        fprintf(stderr, "; peak RSS %.2f GB\n", res->peak_memory_bytes / 1e9);
    }
    if (rc == 0 && perf && kiln_engine_rank(eng) == 0) {
        char *json = kiln_result_perf_json(res, NULL);
        FILE *f = json ? fopen(perf, "w") : NULL;
        if (!f || fputs(json, f) < 0 || fputc('\n', f) < 0 || fclose(f) != 0) {
            fprintf(stderr, "kiln generate: --perf-dump %s: %s\n", perf, json ? strerror(errno) : "out of memory");
            rc = json ? 5 : 6;
        }
        free(json);
    }
    kiln_result_free(res);
    kiln_engine_close(eng);
    kiln_free(noise);
    images_free(&images);
    return rc;
}

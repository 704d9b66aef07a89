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
#include "compute/cuda/cuda_device.h"
#include "io/image_load.h"
#include "io/image_png.h"
#include "kiln.h"
#include "models/lora.h"
#include "pipeline/noise.h"
#include "pipeline/progress_bar.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: kiln generate -p PROMPT (--model DIR | --unet F --clip F [--clip2 F] --vae F) [options]\n"
            "\n"
            "  -p, --prompt TEXT     what to draw (UTF-8)\n"
            "  --model DIR           a diffusers FLUX.2 [klein] or FLUX.1 [dev]/[schnell] folder (model_index.json,\n"
            "                        transformer/, ...): the family comes from the files\n"
            "  --unet F --clip F --vae F\n"
            "                        ComfyUI single files: flux-2-klein-4b, qwen_3_4b, flux2-vae .safetensors\n"
            "  --unet F --clip F --clip2 F --vae F\n"
            "                        FLUX.1 single files: flux1-dev (or -schnell), clip_l, t5xxl_fp16, ae .safetensors\n"
            "  -W, --width N         image width, a multiple of 16 (default 512)\n"
            "  -H, --height N        image height, a multiple of 16 (default 512)\n"
            "  --steps N             denoising steps (default 4 distilled, 50 base; FLUX.1 28 dev, 4 schnell)\n"
            "  --seed S              seed of image 0; image i uses S + i (default: random, printed)\n"
            "  -n, --batch N         images in one batch (default 1)\n"
            "  -o, --output F        PNG path (default out.png); n > 1: F, F-1, F-2... or a %%d pattern\n"
            "  --perf-dump F         write the per-stage timings as JSON\n"
            "  --lora FILE[:S]       apply a LoRA adapter to the DiT at strength S (default 1); repeatable\n"
            "  --lora-merge          merge the adapters into copies of the weights they adapt (faster steps)\n"
            "  --noise F             inject the initial noise [n,128,H/16,W/16] (FLUX.1: [n,64,H/16,W/16], the\n"
            "                        packed latent; safetensors or raw f32)\n"
            "  --guidance G          CFG scale for klein base (default 4.0; 1 or less: no CFG, as diffusers);\n"
            "                        FLUX.1 [dev]: the distilled guidance (default 3.5); schnell ignores it\n"
            "  --negative-prompt TEXT\n"
            "                        klein base with CFG: the unconditional branch's text (default \"\")\n"
            "  --base                single files are klein base (true CFG, 50 steps); folders say it themselves\n"
            "  --distilled           force the distilled variant\n"
            "  --tokenizer DIR       folder holding tokenizer.json (default: the model's, else kiln's copy)\n"
            "  --device D            cpu (default), cuda or cuda:N\n"
            "  --threads N           CPU threads (default KILN_THREADS or all cores)\n"
            "  --exact               f32 matmuls (matches fp32 references; slower)\n"
            "  --memory-limit GB     refuse requests that need more (default: available memory)\n"
            "  --vae-tile N|off      VAE decode in N x N latent tiles (N multiple of 4, >= 8; default: tiled\n"
            "                        only when the untiled decode would not fit memory)\n"
            "  --tp N                under mpirun: tensor parallelism over groups of N ranks (DiT and text\n"
            "                        encoder; the groups split the image tokens when they can; docs/parallel.md)\n"
            "  --keep-text-encoder   keep Qwen3 mapped while the DiT runs (default: release it; one request\n"
            "                        per process, so releasing only lowers the peak)\n"
            "  --ref F               a reference image to edit from (PNG, JPEG or WebP; repeat for up to %d);\n"
            "                        without -W/-H the output takes the first reference's size (as diffusers)\n"
            "  --init F              image-to-image from this picture (its size, cropped to multiples of 16)\n"
            "  --strength S          with --init: 0 < S <= 1, how much is redrawn (default 0.8)\n"
            "  --tag TEXT            recorded in the perf dump\n"
            "  -q, --quiet           no progress output\n", KILN_MAX_REFS);
}

static int parse_int(const char *flag, const char *v, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long x = strtol(v ? v : "", &end, 10);
    if (!v || !*v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "kiln generate: %s needs an integer in %ld..%ld (got '%s')\n", flag, lo, hi, v ? v : "");
        return 0;
    }
    *out = x;
    return 1;
}

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

int kiln_cmd_generate(int argc, char **argv) {
    cli_images images = {0};
    bool have_w = false, have_h = false, have_strength = false;
    kiln_engine_config cfg = kiln_engine_config_default();
    kiln_request req = kiln_request_default();
    const char *prompt = NULL, *output = "out.png", *perf = NULL, *noise_path = NULL;
    bool have_seed = false, quiet = false, keep_te = false;
    long v;
    static char lora_paths[16][4096];
    static kiln_lora loras[16];
    int n_loras = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
#define TAKES_VALUE                                                                                           \
    do {                                                                                                      \
        if (!val) {                                                                                           \
            fprintf(stderr, "kiln generate: %s needs a value\n", a);                                          \
            return 2;                                                                                         \
        }                                                                                                     \
        i++;                                                                                                  \
    } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            TAKES_VALUE;
            prompt = val;
        } else if (!strcmp(a, "--model")) {
            TAKES_VALUE;
            cfg.model_dir = val;
        } else if (!strcmp(a, "--unet")) {
            TAKES_VALUE;
            cfg.unet_path = val;
        } else if (!strcmp(a, "--clip")) {
            TAKES_VALUE;
            cfg.clip_path = val;
        } else if (!strcmp(a, "--clip2") || !strcmp(a, "--t5")) {
            TAKES_VALUE;
            cfg.clip2_path = val;
        } else if (!strcmp(a, "--vae")) {
            TAKES_VALUE;
            cfg.vae_path = val;
        } else if (!strcmp(a, "--tokenizer")) {
            TAKES_VALUE;
            cfg.tokenizer_dir = val;
        } else if (!strcmp(a, "-W") || !strcmp(a, "--width")) {
            TAKES_VALUE;
            if (!parse_int(a, val, 1, 1 << 20, &v)) return 2;
            req.width = (int)v;
            have_w = true;
        } else if (!strcmp(a, "-H") || !strcmp(a, "--height")) {
            TAKES_VALUE;
            if (!parse_int(a, val, 1, 1 << 20, &v)) return 2;
            req.height = (int)v;
            have_h = true;
        } else if (!strcmp(a, "--steps")) {
            TAKES_VALUE;
            if (!parse_int(a, val, 1, 1000, &v)) return 2;
            req.steps = (int)v;
        } else if (!strcmp(a, "--seed")) {
            TAKES_VALUE;
            char *end;
            errno = 0;
            unsigned long long s = strtoull(val, &end, 10);
            if (!*val || *end || errno || val[0] == '-') {
                fprintf(stderr, "kiln generate: --seed needs a non-negative integer (got '%s')\n", val);
                return 2;
            }
            req.seed = s;
            have_seed = true;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--batch")) {
            TAKES_VALUE;
            if (!parse_int(a, val, 1, 16, &v)) return 2;
            req.batch = (int)v;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            TAKES_VALUE;
            output = val;
        } else if (!strcmp(a, "--perf-dump")) {
            TAKES_VALUE;
            perf = val;
        } else if (!strcmp(a, "--noise")) {
            TAKES_VALUE;
            noise_path = val;
        } else if (!strcmp(a, "--guidance")) {
            TAKES_VALUE;
            char *end;
            req.guidance = strtof(val, &end);
            if (!*val || *end || !(req.guidance > 0 && req.guidance < 100)) {
                fprintf(stderr, "kiln generate: --guidance needs a number in (0, 100) (got '%s')\n", val);
                return 2;
            }
        } else if (!strcmp(a, "--negative-prompt")) {
            TAKES_VALUE;
            req.negative_prompt = val;
        } else if (!strcmp(a, "--base")) {
            cfg.variant = KILN_VARIANT_BASE;
        } else if (!strcmp(a, "--distilled")) {
            cfg.variant = KILN_VARIANT_DISTILLED;
        } else if (!strcmp(a, "--device")) {
            TAKES_VALUE;
            kiln_err derr = {0};
            kiln_backend_kind kind;
            if (kiln_device_parse(val, &kind, &cfg.device_index, &derr) != KILN_OK) {
                fprintf(stderr, "kiln generate: %s\n", derr.msg);
                return 2;
            }
            cfg.device = kind == KILN_BACKEND_CUDA ? KILN_DEVICE_CUDA : KILN_DEVICE_CPU;
        } else if (!strcmp(a, "--threads")) {
            TAKES_VALUE;
            if (!parse_int(a, val, 1, 256, &v)) return 2;
            cfg.n_threads = (int)v;
        } else if (!strcmp(a, "--exact")) {
            cfg.exact = true;
        } else if (!strcmp(a, "--memory-limit")) {
            TAKES_VALUE;
            char *end;
            double gb = strtod(val, &end);
            if (!*val || *end || !(gb > 0)) {
                fprintf(stderr, "kiln generate: --memory-limit needs a positive number of GB\n");
                return 2;
            }
            cfg.memory_limit = (size_t)(gb * 1e9);
        } else if (!strcmp(a, "--vae-tile")) {
            TAKES_VALUE;
            if (!strcmp(val, "off")) cfg.vae_tile = -1;
            else if (!parse_int(a, val, 8, 4096, &v)) return 2;
            else if (v % 4) {
                fprintf(stderr, "kiln generate: --vae-tile %ld is not a multiple of 4\n", v);
                return 2;
            } else cfg.vae_tile = (int)v;
        } else if (!strcmp(a, "--tp")) {
            TAKES_VALUE;
            if (!parse_int(a, val, 1, 1024, &v)) return 2;
            cfg.tp = (int)v;
        } else if (!strcmp(a, "--keep-text-encoder")) {
            cfg.te_policy = KILN_TE_AUTO;
            keep_te = true;
        } else if (!strcmp(a, "--ref")) {
            TAKES_VALUE;
            if (images.n_refs == KILN_MAX_REFS) {
                fprintf(stderr, "kiln generate: at most %d --ref images\n", KILN_MAX_REFS);
                return 2;
            }
            images.ref_path[images.n_refs++] = val;
        } else if (!strcmp(a, "--init")) {
            TAKES_VALUE;
            images.init_path = val;
        } else if (!strcmp(a, "--strength")) {
            TAKES_VALUE;
            char *end;
            req.strength = strtod(val, &end);
            if (!*val || *end || !(req.strength > 0 && req.strength <= 1)) {
                fprintf(stderr, "kiln generate: --strength %s: must be a number in (0, 1]\n", val);
                return 2;
            }
            have_strength = true;
        } else if (!strcmp(a, "--lora")) {
            TAKES_VALUE;
            if (n_loras == (int)(sizeof loras / sizeof *loras)) {
                fprintf(stderr, "kiln generate: at most %d --lora adapters\n", n_loras);
                return 2;
            }
            kiln_err lerr = {0};
            if (kiln_lora_parse_arg(val, lora_paths[n_loras], sizeof lora_paths[n_loras], &loras[n_loras].strength,
                                    &lerr) != KILN_OK) {
                fprintf(stderr, "kiln generate: %s\n", lerr.msg);
                return 2;
            }
            loras[n_loras].path = lora_paths[n_loras];
            n_loras++;
        } else if (!strcmp(a, "--lora-merge")) {
            req.lora_merge = true;
        } else if (!strcmp(a, "--tag")) {
            TAKES_VALUE;
            req.tag = val;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = true;
        } else {
            fprintf(stderr, "kiln generate: unknown option '%s' (kiln generate --help)\n", a);
            return 2;
        }
#undef TAKES_VALUE
    }
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
    if (images.init_path && !have_strength) req.strength = 0.8; /* diffusers' img2img default */
    if ((images.n_refs || images.init_path) && !have_w && !have_h) {
        if (noise_path) {
            fprintf(stderr, "kiln generate: --noise with --ref/--init needs -W and -H\n");
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
    req.loras = loras;
    req.n_loras = n_loras;

    kiln_err err = {0};
    float *noise = NULL;
    if (noise_path && (req.width % 16 || req.height % 16)) {
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
    if (noise_path) { /* its size depends on the model: 128 channels for FLUX.2, the DiT's in_channels for FLUX.1 */
        size_t count = (size_t)req.batch * (size_t)kiln_engine_latent_channels(eng) * (size_t)(req.width / 16) *
                       (size_t)(req.height / 16);
        if (kiln_noise_load(noise_path, count, &noise, &err) != KILN_OK) {
            fprintf(stderr, "kiln generate: --noise: %s\n", err.msg);
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
            {"model", model},     {"noise", noise_path ? noise_path : "kiln-xoshiro256-boxmuller"},
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

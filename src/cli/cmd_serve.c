/* cmd_serve.c - `kiln serve`: the ComfyUI- and OpenAI-compatible server (src/server/server.h). */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/log.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "compute/comm.h"
#include "server/engine_ranks.h"
#include "server/engine_select.h"
#include "server/server.h"

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) { stop_requested = sig; }

static const char synopsis[] =
    "usage: kiln serve --output DIR [--models DIR] [options]\n\n"
    "Serves the ComfyUI API (/prompt, /history, /view, /ws, ... also under /api) and the OpenAI images API\n"
    "(/v1/images/generations, /v1/models) from one durable job queue.\n\n";
static const char epilogue[] =
    "\nThe queue: SQLite by default (--database, default <user-dir>/kiln-jobs.sqlite, outside the output folder);\n"
    "--queue postgresql://USER@HOST:PORT/DB: one queue shared by many kiln serve processes.\n"
    "The web frontend: by default the `static` folder of the comfyui-frontend-package that PY (--python) imports,\n"
    "and the templates of its comfyui-workflow-templates packages at /templates/; 'none' or no package: kiln's\n"
    "own page at /. kiln's own page is always at /kiln/.\n"
    "SIGTERM drains: the running job finishes (up to --drain-timeout), the queue stays for the next start or the\n"
    "other nodes; SIGINT stops at once. GET /metrics: Prometheus text format.\n"
    "Several ranks (docs/parallel.md): mpirun -np N kiln serve ... [--sp S] [--tp T]: rank 0 serves, the other\n"
    "ranks run each engine call with it (sequence parallelism over S ranks, tensor parallelism over T; N = S x T).\n";

/* "WxH", each side 64..2048 and a multiple of 16. */
static bool size_arg(const char *v, int *w, int *h) {
    int a = 0, b = 0, used = 0;
    if (sscanf(v, "%4dx%4d%n", &a, &b, &used) != 2 || v[used] || a < 64 || b < 64 || a > 2048 || b > 2048 || a % 16 ||
        b % 16)
        return false;
    *w = a;
    *h = b;
    return true;
}

/* Asks python for the installed frontend's static folder and the workflow templates' folders, found the way
 * ComfyUI finds them (the importable packages comfyui_frontend_package and comfyui_workflow_templates_*).
 * Lines "F dir" and "T dir"; nothing when python or the packages are missing. */
static const char locate_py[] =
    "import importlib.util as u, os, pkgutil\n"
    "def d(n):\n"
    "    try: s = u.find_spec(n)\n"
    "    except Exception: return None\n"
    "    return list(s.submodule_search_locations)[0] if s and s.submodule_search_locations else None\n"
    "f = d('comfyui_frontend_package')\n"
    "if f and os.path.isdir(os.path.join(f, 'static')): print('F', os.path.join(f, 'static'))\n"
    "names = sorted(m.name for m in pkgutil.iter_modules() if m.name.startswith('comfyui_workflow_templates_'))\n"
    "for n in sorted(names, key=lambda n: n != 'comfyui_workflow_templates_json')[:8]:\n"
    "    p = d(n)\n"
    "    if p and os.path.isdir(os.path.join(p, 'templates')): print('T', os.path.join(p, 'templates'))\n";

typedef struct located {
    char front[2048];
    char templates[8][2048];
    int n_templates;
} located;

static void locate_frontend(const char *python, located *out) {
    memset(out, 0, sizeof *out);
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return;
    }
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execlp(python, python, "-c", locate_py, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    FILE *f = fdopen(fds[0], "r");
    char line[2100];
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!strncmp(line, "F ", 2)) snprintf(out->front, sizeof out->front, "%s", line + 2);
        else if (!strncmp(line, "T ", 2) && out->n_templates < 8)
            snprintf(out->templates[out->n_templates++], sizeof out->templates[0], "%s", line + 2);
    }
    if (f) fclose(f);
    else close(fds[0]);
    int st;
    waitpid(pid, &st, 0);
}

/* A status line: plain on stderr, or a JSON log line with --log-format json (log collectors parse every line). */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (kiln_log_json()) {
        size_t n = strlen(msg);
        if (n && msg[n - 1] == '\n') msg[n - 1] = 0;
        kiln_log_at(KILN_LOG_INFO, __FILE__, __LINE__, "%s", msg);
    } else {
        fputs(msg, stderr);
    }
}

/* What the table's callbacks fill beside the server config. */
typedef struct serve_cli {
    kiln_server_config *cfg;
    int n_templates;
    bool front_given;
} serve_cli;

static bool opt_front_end(void *ctx, const char *v, char *why, size_t cap) {
    (void)why, (void)cap;
    serve_cli *c = ctx;
    c->cfg->front_end_root = strcmp(v, "none") ? v : NULL;
    c->front_given = true;
    return true;
}

static bool opt_templates(void *ctx, const char *v, char *why, size_t cap) {
    serve_cli *c = ctx;
    if (c->n_templates == 8) return snprintf(why, cap, "is given more than 8 times"), false;
    c->cfg->templates_dirs[c->n_templates++] = v;
    return true;
}

static bool opt_log_format(void *ctx, const char *v, char *why, size_t cap) {
    (void)ctx;
    if (strcmp(v, "json") && strcmp(v, "text")) return snprintf(why, cap, "takes text or json"), false;
    kiln_log_set_json(!strcmp(v, "json"));
    return true;
}

static bool opt_preview(void *ctx, const char *v, char *why, size_t cap) {
    if (strcmp(v, "none") && strcmp(v, "latent2rgb")) return snprintf(why, cap, "takes none or latent2rgb"), false;
    ((kiln_server_config *)ctx)->preview_method = strcmp(v, "none") ? KILN_PREVIEW_LATENT2RGB : KILN_PREVIEW_NONE;
    return true;
}

static bool opt_default_size(void *ctx, const char *v, char *why, size_t cap) {
    kiln_server_config *cfg = ctx;
    if (size_arg(v, &cfg->default_width, &cfg->default_height)) return true;
    snprintf(why, cap, "takes WxH, each side 64..2048 and a multiple of 16");
    return false;
}

/* --sp / --tp against the ranks mpirun started: refused by name when they do not fit (0: fine, else the exit code). */
static int check_ranks(const kiln_comm *world, int sp, int tp) {
    int t = tp ? tp : 1;
    if (world->size % t) {
        fprintf(stderr, "kiln serve: --tp %d: the %d ranks are not a multiple of it\n", t, world->size);
        return 2;
    }
    if (sp && sp * t != world->size) {
        fprintf(stderr, "kiln serve: --sp %d x --tp %d = %d ranks, but %d were started (mpirun -np %d)\n", sp, t, sp * t,
                world->size, sp * t);
        return 2;
    }
    return 0;
}

/* A rank other than 0: no server, only rank 0's engine calls, until its STOP. */
static int follow(kiln_comm *world, kiln_gen_engine *engine) {
    kiln_err err = {0};
    say("kiln serve: rank %d of %d: running rank 0's engine calls (no server on this rank)\n", world->rank,
        world->size);
    /* a signal reaches every rank under mpirun; only rank 0 decides, and tells the others (STOP) */
    signal(SIGINT, SIG_IGN);
    signal(SIGTERM, SIG_IGN);
    kiln_status s = kiln_ranks_follow(world, engine, &err);
    if (s != KILN_OK) fprintf(stderr, "kiln serve: rank %d: %s\n", world->rank, err.msg);
    kiln_server_engine_free(engine);
    if (s != KILN_OK) return kiln_status_exit_code(s); /* non-zero: mpirun ends the job (MPI cannot finalise) */
    kiln_comm_close(world);
    return 0;
}

int kiln_cmd_serve(int argc, char **argv) {
    kiln_server_config cfg = kiln_server_config_default();
    const char *port_file = NULL, *device = NULL, *python = "python3";
    long drain_s = 600;
    serve_cli sc = {.cfg = &cfg};
    int lease_s = 0, max_body = (int)cfg.max_body, sp = 0, tp = 0;
    bool exact = false;
    double memory_gb = 0; /* 0: not given (the engine's default, the memory available per request) */
    const kiln_opt opts[] = {
        KILN_OPT_STR("--listen", NULL, "ADDR", "address to bind (default 127.0.0.1)", &cfg.listen),
        KILN_OPT_INT("--port", NULL, "N", "port (default 8188; 0 picks a free one, see --port-file)", &cfg.port, 0,
                     65535),
        KILN_OPT_STR("--port-file", NULL, "FILE", "write the port listened on to FILE", &port_file),
        KILN_OPT_STR("--models", NULL, "DIR", "the model folders (diffusion_models/, text_encoders/, vae/, loras/)",
                     &cfg.models_dir),
        KILN_OPT_STR("--output", NULL, "DIR", "where images are saved (required)", &cfg.output_dir),
        KILN_OPT_STR("--input", NULL, "DIR", "uploads (default: input/ beside the output folder)", &cfg.input_dir),
        KILN_OPT_STR("--user-dir", NULL, "DIR",
                     "the web frontend's settings and saved workflows (default user/ beside the output folder)",
                     &cfg.user_dir),
        KILN_OPT_STR("--database", "--db", "FILE", "the SQLite job queue (default <user-dir>/kiln-jobs.sqlite)",
                     &cfg.db_path),
        KILN_OPT_STR("--queue", NULL, "URL", "postgresql://USER@HOST:PORT/DB: a queue shared by many nodes",
                     &cfg.db_path),
        KILN_OPT_INT("--lease", NULL, "S", "shared queue: a dead node's job is taken over after S seconds (default 30)",
                     &lease_s, 1, 3600),
        KILN_OPT_LONG("--drain-timeout", NULL, "S",
                      "SIGTERM: how long the running job may take to finish (default 600; 0 = stop at once)", &drain_s, 0,
                      86400),
        KILN_OPT_CALL("--log-format", NULL, "text|json", "json: one JSON object per log line", opt_log_format, NULL),
        KILN_OPT_CALL("--front-end-root", NULL, "DIR|none", "serve ComfyUI's web frontend from DIR (none: kiln's page)",
                      opt_front_end, &sc),
        KILN_OPT_CALL("--templates-root", NULL, "DIR", "a folder /templates/ is served from (up to 8)", opt_templates,
                      &sc),
        KILN_OPT_STR("--python", NULL, "PY", "the python that finds the frontend packages (default python3)", &python),
        KILN_OPT_CALL("--preview-method", NULL, "none|latent2rgb",
                      "latent2rgb: a JPEG preview of the latent after each step on /ws (default none)", opt_preview,
                      &cfg),
        KILN_OPT_STR("--token", NULL, "T", "every route except / and /health needs 'Authorization: Bearer T'",
                     &cfg.token),
        KILN_OPT_STR("--unet", NULL, "NAME", "the OpenAI route's diffusion model (default: the first found)",
                     &cfg.default_unet),
        KILN_OPT_STR("--clip", NULL, "NAME", "the OpenAI route's text encoder", &cfg.default_clip),
        KILN_OPT_STR("--vae", NULL, "NAME", "the OpenAI route's VAE", &cfg.default_vae),
        KILN_OPT_STR("--device", NULL, "D", "cpu (default), cuda or cuda:N", &device),
        KILN_OPT_INT("--sp", NULL, "N", "under mpirun: the sequence-parallel degree; checks ranks = N x --tp", &sp, 1,
                     1024),
        KILN_OPT_FLAG("--exact", NULL, "f32 matmuls (match fp32 references) instead of bf16", &exact),
        KILN_OPT_INT("--tp", NULL, "N", "under mpirun: tensor parallelism over groups of N ranks (FLUX.2)", &tp, 1,
                     1024),
        /* 1 MB .. 1 PB: below, not even the tiny test models fit; above, a typo (the size_t product stays exact) */
        KILN_OPT_DOUBLE("--memory-limit", NULL, "GB",
                        "refuse requests that need more (default: available memory); under mpirun\n"
                        "each rank's own, and every rank plans with the tightest", &memory_gb, 0.001, 1e6),
        KILN_OPT_INT("--max-queue", NULL, "N", "pending jobs at most (default 256)", &cfg.max_queue, 1, 1000000),
        KILN_OPT_INT("--max-body", NULL, "BYTES", "request body size at most (default 8 MiB)", &max_body, 1024, 1 << 30),
        KILN_OPT_INT("--max-side", NULL, "N", "image side at most", &cfg.limits.max_side, 64, 2048),
        KILN_OPT_INT("--max-batch", NULL, "N", "images per request at most", &cfg.limits.max_batch, 1, 16),
        KILN_OPT_INT("--max-steps", NULL, "N", "steps per request at most", &cfg.limits.max_steps, 1, 4096),
        KILN_OPT_INT("--timeout", NULL, "S", "idle connection time-out (default 30)", &cfg.conn_timeout_s, 1, 86400),
        KILN_OPT_INT("--batch-images", NULL, "N",
                     "compatible queued jobs share one forward of up to N images (default 4; 1 = off)",
                     &cfg.batch_images, 1, 16),
        KILN_OPT_INT("--request-timeout", NULL, "S",
                     "how long an OpenAI request waits for its image (default 600; then 504,\n"
                     "retry with the same Idempotency-Key)", &cfg.request_timeout_s, 1, 86400),
        KILN_OPT_CALL("--default-size", NULL, "WxH", "the OpenAI size \"auto\" (default 1024x1024)", opt_default_size,
                      &cfg),
    };
    const kiln_opts spec = {.cmd = "kiln serve", .synopsis = synopsis, .epilogue = epilogue, .opts = opts,
                            .n = KILN_N(opts)};
    int prc = kiln_opts_parse(&spec, argc, argv, NULL, NULL);
    if (prc != KILN_OPTS_CONTINUE) return prc;
    if (lease_s) cfg.lease_s = lease_s;
    cfg.max_body = (size_t)max_body;
    int n_templates = sc.n_templates;
    bool front_given = sc.front_given;
    if (!cfg.output_dir) {
        fprintf(stderr, "kiln serve: --output DIR is required (kiln serve --help)\n");
        return 2;
    }
    if (cfg.token && !*cfg.token) {
        fprintf(stderr, "kiln serve: --token must not be empty\n");
        return 2;
    }
    located found;
    memset(&found, 0, sizeof found);
    /* rank 0 only, and before MPI starts (a fork under MPI is best avoided) */
    if (kiln_comm_launcher_rank() == 0 && (!front_given || !n_templates)) locate_frontend(python, &found);
    if (!front_given && found.front[0]) cfg.front_end_root = found.front;
    for (int i = 0; !n_templates && i < found.n_templates; i++) cfg.templates_dirs[i] = found.templates[i];
    kiln_err err = {0};
    kiln_comm *world = NULL;
    if (kiln_comm_open(&world, &err) != KILN_OK) {
        fprintf(stderr, "kiln serve: %s\n", err.msg);
        return kiln_status_exit_code(err.code);
    }
    int rc = check_ranks(world, sp, tp);
    kiln_gen_engine *engine = rc ? NULL : kiln_server_engine_new(device);
    if (!rc && !engine) {
        fprintf(stderr, "kiln serve: --device must be cpu, cuda or cuda:N (or out of memory)\n");
        rc = 2;
    }
    if (rc) {
        kiln_comm_close(world);
        return rc;
    }
    kiln_server_engine_set_tp(engine, tp);
    kiln_server_engine_set_exact(engine, exact);
    kiln_server_engine_set_memory_limit(engine, (size_t)(memory_gb * 1e9));
    if (world->rank != 0) return follow(world, engine);
    kiln_gen_engine *lead = world->size > 1 ? kiln_ranks_lead_new(world, engine) : NULL;
    if (world->size > 1 && !lead) {
        fprintf(stderr, "kiln serve: out of memory\n");
        return 1; /* the other ranks wait for a STOP that cannot be sent: exiting non-zero makes mpirun end them */
    }
    cfg.engine = lead ? lead : engine;
    kiln_server *srv;
    if (kiln_server_start(&cfg, &srv, &err) != KILN_OK) {
        fprintf(stderr, "kiln serve: %s\n", err.msg);
        kiln_ranks_lead_stop(lead);
        kiln_ranks_lead_free(lead);
        kiln_server_engine_free(engine);
        kiln_comm_close(world);
        return kiln_status_exit_code(err.code);
    }
    if (world->size > 1)
        say("kiln serve: rank 0 of %d serves; every engine call runs on all %d ranks (%s)\n", world->size, world->size,
            tp > 1 ? "tensor parallel groups, the groups sequence parallel" : "sequence parallel");
    int port = kiln_server_port(srv);
    say("kiln serve: listening on http://%s:%d (models %s, output %s, device %s)\n", cfg.listen, port,
            cfg.models_dir ? cfg.models_dir : "(none)", cfg.output_dir, device ? device : "cpu");
    say("kiln serve: web frontend %s%s\n", cfg.front_end_root ? cfg.front_end_root : "kiln's own page",
            cfg.front_end_root ? " (kiln's page at /kiln/)" : "");
    if (port_file) {
        FILE *f = fopen(port_file, "w");
        if (f) {
            fprintf(f, "%d\n", port);
            fclose(f);
        }
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    while (!stop_requested) pause();
    if (stop_requested == SIGTERM && drain_s > 0) { /* graceful: the running job ends, the queue stays */
        int first = stop_requested;
        stop_requested = 0;
        sigaction(SIGTERM, &sa, NULL);
        say("kiln serve: SIGTERM: draining (finishing the running job, up to %ld s; SIGTERM again to stop now)\n",
                drain_s);
        /* the drain returns when the worker is idle; a second signal stops at once */
        bool idle = false;
        for (long waited = 0; !idle && !stop_requested && waited < drain_s * 10; waited++)
            idle = kiln_server_drain(srv, 0.1);
        stop_requested = first;
        if (!idle) say("kiln serve: drain cut short; the running job goes back to the queue\n");
    }
    say("kiln serve: stopping\n");
    kiln_server_stop(srv);
    kiln_ranks_lead_stop(lead); /* the worker has stopped: the other ranks leave their loop and exit */
    kiln_ranks_lead_free(lead);
    kiln_server_engine_free(engine);
    kiln_comm_close(world);
    return 0;
}

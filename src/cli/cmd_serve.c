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
#include "server/engine_select.h"
#include "server/server.h"

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) { stop_requested = sig; }

static void usage(FILE *out) {
    fprintf(out,
            "usage: kiln serve [--listen ADDR] [--port N] --models DIR --output DIR [--token T]\n"
            "                  [--database FILE] [--user-dir DIR] [--input DIR] [--unet NAME] [--clip NAME] [--vae NAME]\n"
            "                  [--front-end-root DIR|none] [--templates-root DIR]... [--python PY]\n"
            "                  [--preview-method none|latent2rgb]\n"
            "                  [--max-queue N] [--max-body BYTES] [--max-side N] [--max-batch N] [--max-steps N]\n"
            "                  [--timeout S] [--port-file FILE] [--device cpu|cuda|cuda:N] [--batch-images N]\n\n"
            "Serves the ComfyUI API (/prompt, /history, /view, /ws, ... also under /api) and the OpenAI images API\n"
            "(/v1/images/generations, /v1/models) from one durable job queue (SQLite; --database, default\n"
            "<user-dir>/kiln-jobs.sqlite, outside the output folder; --queue postgresql://USER@HOST:PORT/DB: one\n"
            "queue shared by many kiln serve processes, --lease S a dead node's job is taken over after, default 30).\n"
            "--user-dir (default user/ beside the output\n"
            "folder) holds the web frontend's settings and saved workflows (user/default/).\n"
            "The web frontend: --front-end-root DIR serves ComfyUI's frontend from DIR; by default the `static`\n"
            "folder of the comfyui-frontend-package that PY (--python, default python3) imports, and the templates of\n"
            "its comfyui-workflow-templates packages at /templates/; 'none' or no package: kiln's own page at /.\n"
            "kiln's own page is always at /kiln/.\n"
            "--preview-method latent2rgb: a JPEG preview of the latent after each step on /ws (default none).\n"
            "Binds 127.0.0.1:8188 by default; --port 0 picks a free port (written to --port-file if given).\n"
            "--token T: every route except / and /health needs 'Authorization: Bearer T'.\n"
            "--batch-images N: compatible queued jobs share one forward of up to N images (default 4; 1 = off).\n"
            "--request-timeout S: how long an OpenAI request waits for its image (default 600; then 504, retry\n"
            "with the same Idempotency-Key). --default-size WxH: the OpenAI size \"auto\" (default 1024x1024).\n"
            "SIGTERM drains: the running job finishes (up to --drain-timeout S, default 600; 0 = stop at once), the\n"
            "queue stays for the next start or the other nodes; SIGINT stops at once. --log-format json: one JSON\n"
            "object per log line. GET /metrics: Prometheus text format.\n");
}

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

static bool int_arg(const char *s, long lo, long hi, long *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

int kiln_cmd_serve(int argc, char **argv) {
    kiln_server_config cfg = kiln_server_config_default();
    const char *port_file = NULL, *device = NULL, *python = "python3";
    long drain_s = 600;
    int n_templates = 0;
    bool front_given = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "kiln serve: %s needs a value (or is unknown)\n", a);
            usage(stderr);
            return 2;
        }
        const char *v = argv[++i];
        long n;
        if (!strcmp(a, "--listen")) cfg.listen = v;
        else if (!strcmp(a, "--port") && int_arg(v, 0, 65535, &n)) cfg.port = (int)n;
        else if (!strcmp(a, "--models")) cfg.models_dir = v;
        else if (!strcmp(a, "--output")) cfg.output_dir = v;
        else if (!strcmp(a, "--input")) cfg.input_dir = v;
        else if (!strcmp(a, "--db") || !strcmp(a, "--database") || !strcmp(a, "--queue")) cfg.db_path = v;
        else if (!strcmp(a, "--lease") && int_arg(v, 1, 3600, &n)) cfg.lease_s = (double)n;
        else if (!strcmp(a, "--drain-timeout") && int_arg(v, 0, 86400, &n)) drain_s = n;
        else if (!strcmp(a, "--log-format") && (!strcmp(v, "json") || !strcmp(v, "text"))) kiln_log_set_json(!strcmp(v, "json"));
        else if (!strcmp(a, "--user-dir")) cfg.user_dir = v;
        else if (!strcmp(a, "--front-end-root")) {
            cfg.front_end_root = strcmp(v, "none") ? v : NULL;
            front_given = true;
        } else if (!strcmp(a, "--templates-root") && n_templates < 8) cfg.templates_dirs[n_templates++] = v;
        else if (!strcmp(a, "--python")) python = v;
        else if (!strcmp(a, "--preview-method") && (!strcmp(v, "none") || !strcmp(v, "latent2rgb")))
            cfg.preview_method = strcmp(v, "none") ? KILN_PREVIEW_LATENT2RGB : KILN_PREVIEW_NONE;
        else if (!strcmp(a, "--token")) cfg.token = v;
        else if (!strcmp(a, "--unet")) cfg.default_unet = v;
        else if (!strcmp(a, "--clip")) cfg.default_clip = v;
        else if (!strcmp(a, "--vae")) cfg.default_vae = v;
        else if (!strcmp(a, "--port-file")) port_file = v;
        else if (!strcmp(a, "--device")) device = v;
        else if (!strcmp(a, "--max-queue") && int_arg(v, 1, 1000000, &n)) cfg.max_queue = (int)n;
        else if (!strcmp(a, "--max-body") && int_arg(v, 1024, 1L << 30, &n)) cfg.max_body = (size_t)n;
        else if (!strcmp(a, "--max-side") && int_arg(v, 64, 2048, &n)) cfg.limits.max_side = (int)n;
        else if (!strcmp(a, "--max-batch") && int_arg(v, 1, 16, &n)) cfg.limits.max_batch = (int)n;
        else if (!strcmp(a, "--max-steps") && int_arg(v, 1, 4096, &n)) cfg.limits.max_steps = (int)n;
        else if (!strcmp(a, "--timeout") && int_arg(v, 1, 86400, &n)) cfg.conn_timeout_s = (int)n;
        else if (!strcmp(a, "--batch-images") && int_arg(v, 1, 16, &n)) cfg.batch_images = (int)n;
        else if (!strcmp(a, "--request-timeout") && int_arg(v, 1, 86400, &n)) cfg.request_timeout_s = (int)n;
        else if (!strcmp(a, "--default-size") && size_arg(v, &cfg.default_width, &cfg.default_height)) continue;
        else {
            fprintf(stderr, "kiln serve: bad option or value: %s %s\n", a, v);
            usage(stderr);
            return 2;
        }
    }
    if (!cfg.output_dir) {
        fprintf(stderr, "kiln serve: --output DIR is required\n");
        usage(stderr);
        return 2;
    }
    if (cfg.token && !*cfg.token) {
        fprintf(stderr, "kiln serve: --token must not be empty\n");
        return 2;
    }
    located found;
    memset(&found, 0, sizeof found);
    if (!front_given || !n_templates) locate_frontend(python, &found);
    if (!front_given && found.front[0]) cfg.front_end_root = found.front;
    for (int i = 0; !n_templates && i < found.n_templates; i++) cfg.templates_dirs[i] = found.templates[i];
    kiln_err err = {0};
    kiln_gen_engine *engine = kiln_server_engine_new(device);
    if (!engine) {
        fprintf(stderr, "kiln serve: --device must be cpu, cuda or cuda:N (or out of memory)\n");
        return 2;
    }
    cfg.engine = engine;
    kiln_server *srv;
    if (kiln_server_start(&cfg, &srv, &err) != KILN_OK) {
        fprintf(stderr, "kiln serve: %s\n", err.msg);
        kiln_server_engine_free(engine);
        return kiln_status_exit_code(err.code);
    }
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
    kiln_server_engine_free(engine);
    return 0;
}

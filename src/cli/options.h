/* options.h - a command's options as one table: the same rows give the parser and the help text, so an option
 * can never be parsed without being documented (or documented without being parsed).
 *
 *     bool quiet = false; const char *out = "out.png"; int steps = 0;
 *     const kiln_opt opts[] = {
 *         KILN_OPT_STR("--output", "-o", "F", "PNG path (default out.png)", &out),
 *         KILN_OPT_INT("--steps", NULL, "N", "denoising steps", &steps, 1, 1000),
 *         KILN_OPT_FLAG("--quiet", "-q", "no progress output", &quiet),
 *     };
 *     const kiln_opts spec = {.cmd = "kiln generate", .synopsis = "...", .opts = opts, .n = KILN_N(opts)};
 *     int rc = kiln_opts_parse(&spec, argc, argv, NULL);
 *     if (rc != KILN_OPTS_CONTINUE) return rc;   (0 after --help, 2 after a bad option or value)
 *
 * --help / -h is always understood. Values are checked here (integer syntax and range, numbers), so a command
 * sees only valid ones; an error names the option and what it needs. "--" ends the options.
 */
#ifndef KILN_CLI_OPTIONS_H
#define KILN_CLI_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum kiln_opt_kind {
    KILN_OPT_KIND_FLAG,   /* no value; dst is bool*, set to true */
    KILN_OPT_KIND_STR,    /* dst is const char** */
    KILN_OPT_KIND_INT,    /* dst is int*, value in [lo, hi] */
    KILN_OPT_KIND_LONG,   /* dst is long*, value in [lo, hi] */
    KILN_OPT_KIND_U64,    /* dst is uint64_t*, a non-negative integer in [lo, hi] */
    KILN_OPT_KIND_DOUBLE, /* dst is double*, a finite number in [lo, hi] */
    KILN_OPT_KIND_CALL,   /* the value (NULL for a flag: arg NULL) goes to call(); it returns false and fills
                             why to refuse it */
} kiln_opt_kind;

typedef struct kiln_opt {
    const char *name;  /* "--steps" */
    const char *alias; /* "-s" or NULL */
    const char *arg;   /* the value's name in the help ("N"); NULL: the option takes no value */
    const char *help;  /* one line; '\n' continues it on the next help line */
    kiln_opt_kind kind;
    void *dst;
    double lo, hi;
    bool (*call)(void *ctx, const char *value, char *why, size_t why_cap);
    void *ctx;
    bool *seen; /* optional: set to true when the option is given (for defaults that depend on it) */
} kiln_opt;

#define KILN_OPT_FLAG(n, a, h, d) {.name = (n), .alias = (a), .help = (h), .kind = KILN_OPT_KIND_FLAG, .dst = (d)}
#define KILN_OPT_STR(n, a, v, h, d)                                                                           \
    {.name = (n), .alias = (a), .arg = (v), .help = (h), .kind = KILN_OPT_KIND_STR, .dst = (d)}
#define KILN_OPT_INT(n, a, v, h, d, l, u)                                                                     \
    {.name = (n), .alias = (a), .arg = (v), .help = (h), .kind = KILN_OPT_KIND_INT, .dst = (d), .lo = (l), .hi = (u)}
#define KILN_OPT_LONG(n, a, v, h, d, l, u)                                                                    \
    {.name = (n), .alias = (a), .arg = (v), .help = (h), .kind = KILN_OPT_KIND_LONG, .dst = (d), .lo = (l), .hi = (u)}
#define KILN_OPT_U64(n, a, v, h, d, l, u)                                                                     \
    {.name = (n), .alias = (a), .arg = (v), .help = (h), .kind = KILN_OPT_KIND_U64, .dst = (d), .lo = (l), .hi = (u)}
#define KILN_OPT_DOUBLE(n, a, v, h, d, l, u)                                                                  \
    {.name = (n), .alias = (a), .arg = (v), .help = (h), .kind = KILN_OPT_KIND_DOUBLE, .dst = (d), .lo = (l),   \
     .hi = (u)}
#define KILN_OPT_CALL(n, a, v, h, fn, c)                                                                      \
    {.name = (n), .alias = (a), .arg = (v), .help = (h), .kind = KILN_OPT_KIND_CALL, .call = (fn), .ctx = (c)}
#define KILN_N(arr) (sizeof(arr) / sizeof((arr)[0]))

typedef struct kiln_opts {
    const char *cmd;      /* "kiln generate": prefixes every error */
    const char *synopsis; /* the usage line(s) printed first, with their own newlines */
    const char *epilogue; /* printed after the options (NULL: nothing) */
    const kiln_opt *opts;
    size_t n;
    const char *pos_name; /* positional arguments' name in errors ("FILE"); NULL: none are accepted */
    int max_pos;          /* at most this many positional arguments */
} kiln_opts;

#define KILN_OPTS_CONTINUE (-1)

/* Parses argv[1..argc-1]. Positional arguments go to pos[0..] (*n_pos of them; pos may be NULL when max_pos is
 * 0). Returns KILN_OPTS_CONTINUE, or the exit code to return now: 0 after --help (usage on stdout), 2 after an
 * unknown option, a missing or bad value or too many positional arguments (the error and a hint on stderr). */
int kiln_opts_parse(const kiln_opts *spec, int argc, char **argv, const char **pos, int *n_pos);

/* The synopsis, one line per option (name, alias, value, help) and the epilogue. */
void kiln_opts_usage(const kiln_opts *spec, FILE *out);

#endif

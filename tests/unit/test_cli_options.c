/* test_cli_options.c - the option table (cli/options.h): values stored and checked, errors exit 2, --help 0,
 * positional arguments, '--name=value', '--' and the help text generated from the same rows. */
#include <stdint.h>
#include <unistd.h>

#include "cli/options.h"
#include "test.h"

typedef struct vals {
    bool flag, seen_n;
    const char *str;
    int n;
    long l;
    uint64_t u;
    double d;
    int calls;
    const char *pos[3];
    int n_pos;
} vals;

static bool even_only(void *ctx, const char *v, char *why, size_t cap) {
    vals *x = ctx;
    if (atoi(v) % 2) return snprintf(why, cap, "must be even"), false;
    x->calls++;
    return true;
}

/* Parses a NULL-terminated argument list (argv[0] included) with a fixed table; stderr is thrown away. */
static int parse(vals *x, const char *const *args) {
    memset(x, 0, sizeof *x);
    x->n = -7;
    const kiln_opt opts[] = {
        KILN_OPT_FLAG("--flag", "-f", "a flag", &x->flag),
        KILN_OPT_STR("--str", "-s", "TEXT", "a string", &x->str),
        {.name = "--n", .arg = "N", .help = "an int", .kind = KILN_OPT_KIND_INT, .dst = &x->n, .lo = -3, .hi = 10,
         .seen = &x->seen_n},
        KILN_OPT_LONG("--long", NULL, "L", "a long", &x->l, 0, 1e12),
        KILN_OPT_U64("--u64", NULL, "U", "a u64", &x->u, 0, (double)UINT64_MAX),
        KILN_OPT_DOUBLE("--d", NULL, "X", "a double", &x->d, 0.5, 2.0),
        KILN_OPT_CALL("--even", NULL, "E", "an even number", even_only, x),
    };
    const kiln_opts spec = {.cmd = "t", .opts = opts, .n = KILN_N(opts), .pos_name = "files", .max_pos = 3,
                            .synopsis = "usage: t\n"};
    char *argv[32];
    int argc = 0;
    while (args[argc]) {
        argv[argc] = (char *)args[argc];
        argc++;
    }
    fflush(stderr);
    FILE *saved = stderr;
    FILE *null = fopen("/dev/null", "w");
    stderr = null;
    int rc = kiln_opts_parse(&spec, argc, argv, x->pos, &x->n_pos);
    stderr = saved;
    fclose(null);
    return rc;
}

#define ARGS(...) ((const char *const[]){"t", __VA_ARGS__, NULL})

static void test_values_stored(void) {
    vals x;
    CHECK_EQ_INT(parse(&x, ARGS("-f", "--str", "hi", "--n", "-3", "--long", "123456789012", "--u64",
                                "18446744073709551615", "--d", "1.25", "--even", "4")), KILN_OPTS_CONTINUE);
    CHECK(x.flag);
    CHECK(x.str && !strcmp(x.str, "hi"));
    CHECK_EQ_INT(x.n, -3);
    CHECK(x.seen_n);
    CHECK_EQ_INT(x.l, 123456789012L);
    CHECK(x.u == UINT64_MAX);
    CHECK(x.d == 1.25);
    CHECK_EQ_INT(x.calls, 1);
    CHECK_EQ_INT(parse(&x, ARGS("--n=10", "--str=a=b", "-s", "")), KILN_OPTS_CONTINUE);
    CHECK_EQ_INT(x.n, 10);
    CHECK(x.str && !strcmp(x.str, "")); /* the last one wins; an empty value is a value */
    CHECK_EQ_INT(parse(&x, ARGS("--flag")), KILN_OPTS_CONTINUE);
    CHECK(!x.seen_n);
    CHECK_EQ_INT(x.n, -7); /* untouched when not given */
}

static void test_bad_values_refused(void) {
    vals x;
    const char *const *bad[] = {
        ARGS("--n", "11"),         ARGS("--n", "-4"),     ARGS("--n", "3x"),      ARGS("--n", ""),
        ARGS("--n", " 3"),         ARGS("--n", "+3"),     ARGS("--n", "0x10"),    ARGS("--long", "-1"),
        ARGS("--u64", "-1"),       ARGS("--u64", "18446744073709551616"),         ARGS("--d", "0.49"),
        ARGS("--d", "nan"),        ARGS("--d", "inf"),    ARGS("--d", "1.0z"),    ARGS("--even", "3"),
        ARGS("--n"),               ARGS("--nope"),        ARGS("-x"),             ARGS("--flag=1"),
        ARGS("a", "b", "c", "d"),  ARGS("--n", "99999999999999999999"),
    };
    for (size_t i = 0; i < KILN_N(bad); i++) CHECK_MSG(parse(&x, bad[i]) == 2, "case %zu (%s)", i, bad[i][1]);
}

static void test_positional_and_help(void) {
    vals x;
    CHECK_EQ_INT(parse(&x, ARGS("a", "-f", "-", "--", "--n")), KILN_OPTS_CONTINUE);
    CHECK_EQ_INT(x.n_pos, 3);
    CHECK(!strcmp(x.pos[0], "a") && !strcmp(x.pos[1], "-") && !strcmp(x.pos[2], "--n"));
    CHECK(x.flag && !x.seen_n);
    int out = dup(1);
    FILE *null = freopen("/dev/null", "w", stdout);
    int rc = parse(&x, ARGS("--n", "3", "--help", "--nope"));
    fflush(stdout);
    dup2(out, 1);
    close(out);
    (void)null;
    CHECK_EQ_INT(rc, 0); /* --help wins over what follows it */
}

static void test_usage_lists_every_row(void) {
    int v = 0;
    bool f = false;
    const kiln_opt opts[] = {
        KILN_OPT_INT("--count", "-c", "N", "how many\nsecond line", &v, 0, 9),
        KILN_OPT_FLAG("--a-rather-long-option-name", NULL, "long", &f),
        KILN_OPT_STR("--clip2", "--t5", "F", "two long names", NULL),
    };
    const kiln_opts spec = {.cmd = "t", .opts = opts, .n = KILN_N(opts), .synopsis = "usage: t\n", .epilogue = "END\n"};
    char buf[4096] = {0};
    FILE *m = fmemopen(buf, sizeof buf - 1, "w");
    kiln_opts_usage(&spec, m);
    fclose(m);
    CHECK(strstr(buf, "usage: t\n") == buf);
    CHECK(strstr(buf, "  -c, --count N           how many\n                          second line\n"));
    CHECK(strstr(buf, "  --a-rather-long-option-name\n                          long\n"));
    CHECK(strstr(buf, "  --clip2, --t5 F         two long names\n"));
    CHECK(strstr(buf, "-h, --help"));
    CHECK(strstr(buf, "END\n"));
}

int main(void) {
    RUN(test_values_stored);
    RUN(test_bad_values_refused);
    RUN(test_positional_and_help);
    RUN(test_usage_lists_every_row);
    return test_summary();
}

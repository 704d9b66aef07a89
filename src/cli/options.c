/* options.c - one table gives a command's parser and its help (options.h). */
#include "cli/options.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const kiln_opt *find(const kiln_opts *s, const char *a, size_t len) {
    for (size_t i = 0; i < s->n; i++) {
        const kiln_opt *o = &s->opts[i];
        if ((strlen(o->name) == len && !strncmp(a, o->name, len)) ||
            (o->alias && strlen(o->alias) == len && !strncmp(a, o->alias, len)))
            return o;
    }
    return NULL;
}

/* "-3" is not a count; strto* would also skip leading blanks and accept "+5": a strict integer is [-]digits. */
static bool integer_syntax(const char *v, bool allow_minus) {
    if (*v == '-' && allow_minus) v++;
    if (!isdigit((unsigned char)*v)) return false;
    while (isdigit((unsigned char)*v)) v++;
    return *v == 0;
}

static void range_text(const kiln_opt *o, char *buf, size_t cap) {
    if (o->kind == KILN_OPT_KIND_DOUBLE) snprintf(buf, cap, "a number in %g..%g", o->lo, o->hi);
    else snprintf(buf, cap, "an integer in %.0f..%.0f", o->lo, o->hi);
}

/* Stores v into o's destination; false (why filled) when it is not a valid value for o. */
static bool store(const kiln_opt *o, const char *v, char *why, size_t cap) {
    char want[96];
    range_text(o, want, sizeof want);
    errno = 0;
    switch (o->kind) {
    case KILN_OPT_KIND_FLAG: *(bool *)o->dst = true; return true;
    case KILN_OPT_KIND_STR: *(const char **)o->dst = v; return true;
    case KILN_OPT_KIND_CALL: return o->call(o->ctx, v, why, cap);
    case KILN_OPT_KIND_INT:
    case KILN_OPT_KIND_LONG: {
        long long x = integer_syntax(v, true) ? strtoll(v, NULL, 10) : 0;
        if (!integer_syntax(v, true) || errno || (double)x < o->lo || (double)x > o->hi) break;
        if (o->kind == KILN_OPT_KIND_INT) *(int *)o->dst = (int)x;
        else *(long *)o->dst = (long)x;
        return true;
    }
    case KILN_OPT_KIND_U64: {
        unsigned long long x = integer_syntax(v, false) ? strtoull(v, NULL, 10) : 0;
        if (!integer_syntax(v, false) || errno || (double)x < o->lo || (double)x > o->hi) break;
        *(uint64_t *)o->dst = (uint64_t)x;
        return true;
    }
    case KILN_OPT_KIND_DOUBLE: {
        char *end;
        double x = strtod(v, &end);
        if (!*v || isspace((unsigned char)*v) || *end || errno || !isfinite(x) || x < o->lo || x > o->hi) break;
        *(double *)o->dst = x;
        return true;
    }
    }
    snprintf(why, cap, "needs %s", want);
    return false;
}

static void hint(const kiln_opts *s) { fprintf(stderr, "(%s --help lists the options)\n", s->cmd); }

int kiln_opts_parse(const kiln_opts *s, int argc, char **argv, const char **pos, int *n_pos) {
    int np = 0;
    bool options_done = false;
    if (n_pos) *n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool is_opt = !options_done && a[0] == '-' && a[1];
        if (is_opt && !strcmp(a, "--")) {
            options_done = true;
            continue;
        }
        if (is_opt && (!strcmp(a, "--help") || !strcmp(a, "-h"))) {
            kiln_opts_usage(s, stdout);
            return 0;
        }
        if (!is_opt) {
            if (np >= s->max_pos || !pos) {
                if (s->max_pos) fprintf(stderr, "%s: at most %d %s, not '%s' too\n", s->cmd, s->max_pos, s->pos_name, a);
                else fprintf(stderr, "%s: unexpected argument '%s'\n", s->cmd, a);
                hint(s);
                return 2;
            }
            pos[np++] = a;
            if (n_pos) *n_pos = np;
            continue;
        }
        const char *eq = a[1] == '-' ? strchr(a, '=') : NULL; /* --name=value */
        const kiln_opt *o = find(s, a, eq ? (size_t)(eq - a) : strlen(a));
        if (!o) {
            fprintf(stderr, "%s: unknown option '%s'\n", s->cmd, a);
            hint(s);
            return 2;
        }
        const char *v = NULL;
        if (o->arg) {
            if (eq) v = eq + 1;
            else if (i + 1 < argc) v = argv[++i];
            else {
                fprintf(stderr, "%s: %s needs a value (%s)\n", s->cmd, o->name, o->arg);
                return 2;
            }
        } else if (eq) {
            fprintf(stderr, "%s: %s takes no value\n", s->cmd, o->name);
            return 2;
        }
        char why[256] = "is not valid";
        if (!store(o, v, why, sizeof why)) {
            if (v) fprintf(stderr, "%s: %s %s (got '%s')\n", s->cmd, o->name, why, v);
            else fprintf(stderr, "%s: %s %s\n", s->cmd, o->name, why);
            return 2;
        }
        if (o->seen) *o->seen = true;
    }
    return KILN_OPTS_CONTINUE;
}

void kiln_opts_usage(const kiln_opts *s, FILE *out) {
    if (s->synopsis) fputs(s->synopsis, out);
    for (size_t i = 0; i < s->n; i++) {
        const kiln_opt *o = &s->opts[i];
        char head[96];
        bool short_alias = o->alias && o->alias[1] != '-'; /* "-o, --output F" but "--clip2, --t5 F" */
        snprintf(head, sizeof head, "%s%s%s%s%s%s%s", short_alias ? o->alias : "", short_alias ? ", " : "", o->name,
                 o->alias && !short_alias ? ", " : "", o->alias && !short_alias ? o->alias : "", o->arg ? " " : "",
                 o->arg ? o->arg : "");
        /* a long head gets its own line; the help starts in column 26 either way */
        const char *h = o->help ? o->help : "";
        if (strlen(head) > 21) fprintf(out, "  %s\n%26s", head, "");
        else fprintf(out, "  %-22s  ", head);
        for (; *h; h++) {
            fputc(*h, out);
            if (*h == '\n' && h[1]) fprintf(out, "%26s", "");
        }
        fputc('\n', out);
    }
    fprintf(out, "  %-22s  this text\n", "-h, --help");
    if (s->epilogue) fputs(s->epilogue, out);
}

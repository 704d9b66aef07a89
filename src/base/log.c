/* log.c - levelled logging (see log.h). */
#include "base/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/clock.h"

static atomic_int log_level = -1; /* -1: not yet read from KILN_LOG */

bool kiln_log_parse_level(const char *s, kiln_log_level *out) {
    static const char *const names[] = {"error", "warn", "info", "debug", "trace"};
    if (!s) return false;
    for (int i = 0; i < 5; i++) {
        if (strcasecmp(s, names[i]) == 0 || (s[0] == '0' + i && s[1] == '\0')) {
            *out = (kiln_log_level)i;
            return true;
        }
    }
    if (strcasecmp(s, "warning") == 0) {
        *out = KILN_LOG_WARN;
        return true;
    }
    return false;
}

kiln_log_level kiln_log_get_level(void) {
    int l = atomic_load_explicit(&log_level, memory_order_relaxed);
    if (l >= 0) return (kiln_log_level)l;
    kiln_log_level parsed = KILN_LOG_WARN;
    const char *env = getenv("KILN_LOG");
    if (env && *env && !kiln_log_parse_level(env, &parsed)) {
        fprintf(stderr, "kiln: KILN_LOG=%s is not one of error, warn, info, debug, trace; using warn\n", env);
        parsed = KILN_LOG_WARN;
    }
    atomic_store(&log_level, (int)parsed);
    return parsed;
}

void kiln_log_set_level(kiln_log_level level) { atomic_store(&log_level, (int)level); }

bool kiln_log_enabled(kiln_log_level level) { return (int)level <= (int)kiln_log_get_level(); }

void kiln_log_at(kiln_log_level level, const char *file, int line, const char *fmt, ...) {
    static const char letters[] = "EWIDT";
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    char buf[2048];
    int n = snprintf(buf, sizeof buf, "kiln %.3f %c %s:%d ", kiln_clock_since_start_s(),
                     letters[(int)level < 5 ? (int)level : 4], base, line);
    if (n < 0) return;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof buf - 2) len = sizeof buf - 2;
    buf[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, buf, len);
    (void)w;
}

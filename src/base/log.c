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

static atomic_int log_json = -1; /* -1: not yet read from KILN_LOG_FORMAT */

void kiln_log_set_json(bool on) { atomic_store(&log_json, on ? 1 : 0); }

bool kiln_log_json(void) {
    int v = atomic_load(&log_json);
    if (v < 0) {
        const char *env = getenv("KILN_LOG_FORMAT");
        v = env && !strcmp(env, "json");
        atomic_store(&log_json, v);
    }
    return v == 1;
}

/* The JSON line: the message escaped as a JSON string (control bytes as \u00XX; bytes >= 0x80 as given). */
static void log_json_line(kiln_log_level level, const char *src, int line, const char *msg) {
    static const char *const names[] = {"error", "warn", "info", "debug", "trace"};
    char buf[4200];
    int n = snprintf(buf, sizeof buf, "{\"ts\":%.3f,\"uptime_s\":%.3f,\"level\":\"%s\",\"src\":\"%s:%d\",\"msg\":\"",
                     kiln_clock_wall_s(), kiln_clock_since_start_s(), names[(int)level < 5 ? (int)level : 4], src, line);
    if (n < 0) return;
    size_t o = (size_t)n;
    for (const unsigned char *p = (const unsigned char *)msg; *p && o + 8 < sizeof buf - 4; p++) {
        if (*p == '"' || *p == '\\') {
            buf[o++] = '\\';
            buf[o++] = (char)*p;
        } else if (*p < 0x20) {
            o += (size_t)snprintf(buf + o, sizeof buf - o, "\\u%04x", *p);
        } else {
            buf[o++] = (char)*p;
        }
    }
    buf[o++] = '"';
    buf[o++] = '}';
    buf[o++] = '\n';
    ssize_t w = write(STDERR_FILENO, buf, o);
    (void)w;
}

void kiln_log_at(kiln_log_level level, const char *file, int line, const char *fmt, ...) {
    static const char letters[] = "EWIDT";
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    if (kiln_log_json()) {
        char msg[2048];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        log_json_line(level, base, line, msg);
        return;
    }
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

/* log.h - levelled logging to stderr.
 *
 * The level comes from the KILN_LOG environment variable (error, warn, info, debug, trace; default warn) read
 * once on first use, or from kiln_log_set_level(). Lines look like
 *     kiln 12.345 W safetensors.c:88 header padding is not spaces
 * (seconds since process start, level letter, source place). Thread-safe: one write(2) per line.
 */
#ifndef KILN_BASE_LOG_H
#define KILN_BASE_LOG_H

#include <stdbool.h>

typedef enum kiln_log_level {
    KILN_LOG_ERROR = 0,
    KILN_LOG_WARN,
    KILN_LOG_INFO,
    KILN_LOG_DEBUG,
    KILN_LOG_TRACE,
} kiln_log_level;

void kiln_log_set_level(kiln_log_level level);
/* One JSON object per line instead ({"ts":UNIX_SECONDS,"uptime_s":..,"level":"warn","src":"file.c:88","msg":".."});
 * also KILN_LOG_FORMAT=json. For log collectors (kiln serve --log-format json). */
void kiln_log_set_json(bool on);
bool kiln_log_json(void);
kiln_log_level kiln_log_get_level(void);
bool kiln_log_enabled(kiln_log_level level);
/* Parses "error|warn|info|debug|trace" (or 0..4). Returns false on anything else. */
bool kiln_log_parse_level(const char *s, kiln_log_level *out);

void kiln_log_at(kiln_log_level level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define KILN_LOG_AT(lvl, ...)                                                                                 \
    do {                                                                                                      \
        if (kiln_log_enabled(lvl)) kiln_log_at((lvl), __FILE__, __LINE__, __VA_ARGS__);                     \
    } while (0)
#define log_error(...) KILN_LOG_AT(KILN_LOG_ERROR, __VA_ARGS__)
#define log_warn(...) KILN_LOG_AT(KILN_LOG_WARN, __VA_ARGS__)
#define log_info(...) KILN_LOG_AT(KILN_LOG_INFO, __VA_ARGS__)
#define log_debug(...) KILN_LOG_AT(KILN_LOG_DEBUG, __VA_ARGS__)
#define log_trace(...) KILN_LOG_AT(KILN_LOG_TRACE, __VA_ARGS__)

#endif

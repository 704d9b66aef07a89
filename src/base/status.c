/* status.c - status names, exit codes and error records (see status.h). */
#include "base/status.h"

#include <stdio.h>
#include <string.h>

#include "base/log.h"

static const char *const status_names[KILN_STATUS_COUNT] = {
    [KILN_OK] = "ok",
    [KILN_E_INVALID] = "invalid",
    [KILN_E_IO] = "io",
    [KILN_E_FORMAT] = "format",
    [KILN_E_NOMEM] = "nomem",
    [KILN_E_UNSUPPORTED] = "unsupported",
    [KILN_E_NOT_FOUND] = "not-found",
    [KILN_E_LIMIT] = "limit",
    [KILN_E_CANCELLED] = "cancelled",
    [KILN_E_DEVICE] = "device",
    [KILN_E_INTERNAL] = "internal",
};

const char *kiln_status_name(kiln_status s) {
    if ((unsigned)s >= KILN_STATUS_COUNT) return "unknown";
    return status_names[s];
}

int kiln_status_exit_code(kiln_status s) {
    switch (s) {
    case KILN_OK: return 0;
    case KILN_E_INVALID: return 2;
    case KILN_E_NOT_FOUND: return 3;
    case KILN_E_FORMAT: return 4;
    case KILN_E_IO: return 5;
    case KILN_E_NOMEM: return 6;
    case KILN_E_LIMIT: return 6;
    case KILN_E_UNSUPPORTED: return 7;
    case KILN_E_DEVICE: return 8;
    case KILN_E_CANCELLED: return 9;
    default: return 70;
    }
}

kiln_status kiln_err_setv(kiln_err *err, kiln_status code, const char *file, int line, const char *fmt,
                          va_list ap) {
    if (!err) {
        if (kiln_log_enabled(KILN_LOG_DEBUG)) {
            char buf[1024];
            vsnprintf(buf, sizeof buf, fmt, ap);
            kiln_log_at(KILN_LOG_DEBUG, file, line, "dropped error (%s): %s", kiln_status_name(code), buf);
        }
        return code;
    }
    err->code = code;
    err->file = file;
    err->line = line;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    return code;
}

kiln_status kiln_err_set(kiln_err *err, kiln_status code, const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    kiln_status s = kiln_err_setv(err, code, file, line, fmt, ap);
    va_end(ap);
    return s;
}

kiln_status kiln_err_prefix(kiln_err *err, const char *fmt, ...) {
    if (!err) return KILN_E_INTERNAL;
    char prefix[512], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    snprintf(err->msg, sizeof err->msg, "%s: %s", prefix, old);
    return err->code;
}

void kiln_err_clear(kiln_err *err) {
    if (!err) return;
    err->code = KILN_OK;
    err->file = NULL;
    err->line = 0;
    err->msg[0] = '\0';
}

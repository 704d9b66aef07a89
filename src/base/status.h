/* status.h - status codes and error records.
 *
 * Every fallible kiln function returns a kiln_status and, on failure, fills a caller-owned kiln_err with a
 * human-readable message and the place the error was raised. There is no global "last error": the caller
 * owns the record, so two threads (or two requests) never see each other's messages.
 *
 *     kiln_err err = {0};
 *     kiln_st_file *f;
 *     if (kiln_st_open("model.safetensors", &f, &err) != KILN_OK) {
 *         fprintf(stderr, "kiln: %s\n", err.msg);      // "model.safetensors: header length 2^63 exceeds ..."
 *         return kiln_status_exit_code(err.code);
 *     }
 *
 * Raise errors with KILN_FAIL(err, code, fmt, ...), which records __FILE__/__LINE__ and returns the code, so a
 * failure path is one line:  if (n > max) return KILN_FAIL(err, KILN_E_LIMIT, "size %zu over %zu", n, max);
 * A NULL err is allowed everywhere: the message is then dropped (and logged at debug level).
 */
#ifndef KILN_BASE_STATUS_H
#define KILN_BASE_STATUS_H

#include <stdarg.h>
#include <stddef.h>

typedef enum kiln_status {
    KILN_OK = 0,
    KILN_E_INVALID,     /* a caller or user passed a bad argument, flag or request */
    KILN_E_IO,          /* a file or socket operation failed (errno in the message) */
    KILN_E_FORMAT,      /* a file or payload is malformed or corrupt */
    KILN_E_NOMEM,       /* an allocation failed */
    KILN_E_UNSUPPORTED, /* valid, but kiln does not do this (dtype, layout, CPU feature, ...) */
    KILN_E_NOT_FOUND,   /* a named file, tensor, model or job does not exist */
    KILN_E_LIMIT,       /* a size, count or time limit was exceeded */
    KILN_E_CANCELLED,   /* the work was interrupted or cancelled */
    KILN_E_DEVICE,      /* a GPU or other device failed or is absent */
    KILN_E_INTERNAL,    /* a bug in kiln: an invariant did not hold */
    KILN_STATUS_COUNT
} kiln_status;

typedef struct kiln_err {
    kiln_status code;
    const char *file; /* where the error was raised (static string) */
    int line;
    char msg[1024];
} kiln_err;

/* A short stable name, e.g. "format" for KILN_E_FORMAT. Never NULL. */
const char *kiln_status_name(kiln_status s);

/* Process exit code for a status: 0 ok, 2 invalid input/usage, 3 not found, 4 format, 5 io, 6 memory/limit,
 * 7 unsupported, 8 device, 9 cancelled, 70 internal. Documented in README. */
int kiln_status_exit_code(kiln_status s);

/* Records an error and returns code. err may be NULL. Use the KILN_FAIL macro. */
kiln_status kiln_err_set(kiln_err *err, kiln_status code, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
kiln_status kiln_err_setv(kiln_err *err, kiln_status code, const char *file, int line, const char *fmt,
                          va_list ap) __attribute__((format(printf, 5, 0)));

/* Prepends context to an existing message: "loading DiT: <old message>". Returns err->code. */
kiln_status kiln_err_prefix(kiln_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void kiln_err_clear(kiln_err *err);

#define KILN_FAIL(err, code, ...) kiln_err_set((err), (code), __FILE__, __LINE__, __VA_ARGS__)

/* Propagate a non-OK status unchanged. */
#define KILN_TRY(expr)                                                                                        \
    do {                                                                                                      \
        kiln_status kiln_try_s_ = (expr);                                                                     \
        if (kiln_try_s_ != KILN_OK) return kiln_try_s_;                                                       \
    } while (0)

#endif

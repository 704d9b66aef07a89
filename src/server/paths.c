/* paths.c - the server's path rules for every file it serves or writes on a client's behalf (static frontend
 * files, templates, userdata): a relative path of plain components, percent-decoded by kiln itself from the raw
 * request line, and a resolved result that stays inside its base folder (symlinks followed by realpath). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "server/server_internal.h"

bool kiln_rel_path_ok(const char *rel, bool allow_dot_names) {
    size_t n = rel ? strlen(rel) : 0;
    if (n == 0 || n > 1024 || rel[0] == '/') return false;
    const char *c = rel; /* start of the current component */
    for (const char *p = rel;; p++) {
        if (*p == '/' || *p == 0) {
            size_t len = (size_t)(p - c);
            if (len == 0 || len > 255) return false;                            /* "a//b", trailing '/' */
            if ((len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.')) return false;
            if (c[0] == '.' && !allow_dot_names) return false;
            if (*p == 0) return true;
            c = p + 1;
        } else if (*p == '\\' || (unsigned char)*p < 0x20 || (unsigned char)*p == 0x7f) {
            return false;
        }
    }
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

bool kiln_pct_decode(const char *s, size_t n, char *out, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];
        if (c == '%') {
            if (i + 2 >= n) return false;
            int a = hexval(s[i + 1]), b = hexval(s[i + 2]);
            if (a < 0 || b < 0) return false;
            c = a * 16 + b;
            i += 2;
        }
        if (c == 0 || o + 1 >= cap) return false;
        out[o++] = (char)c;
    }
    out[o] = 0;
    return true;
}

bool kiln_path_inside(const char *base, const char *path, bool may_not_exist) {
    char rb[PATH_MAX], rp[PATH_MAX];
    if (!realpath(base, rb)) return false;
    if (!realpath(path, rp)) {
        if (!may_not_exist || errno != ENOENT) return false;
        /* a file to be created: its folder must resolve inside base */
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (!slash) return false;
        *slash = 0;
        if (!realpath(dir, rp)) return false;
    }
    size_t bl = strlen(rb);
    return !strncmp(rp, rb, bl) && (rp[bl] == '/' || rp[bl] == 0);
}

bool kiln_mkdirs(const char *path) {
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) return false;
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return false;
        *p = '/';
    }
    return mkdir(tmp, 0755) == 0 || errno == EEXIST;
}

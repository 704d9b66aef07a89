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

/* A token is an absolute path when it starts with '/' after a non-path character and its first component is a
 * folder at the root of this machine (so "/v1/images" in a route message stays as it is). */
static bool path_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '/' || c == '.' ||
           c == '_' || c == '-' || c == '+' || c == '@' || c == '~' || c == '%' || c == ',';
}

void kiln_scrub_paths(const char *in, char *out, size_t cap) {
    size_t o = 0;
    if (!cap) return;
    for (size_t i = 0; in[i] && o + 1 < cap;) {
        bool start = in[i] == '/' && (i == 0 || !path_char(in[i - 1])) && in[i + 1] != '/';
        if (start) {
            size_t end = i + 1, first = 0;
            while (in[end] && path_char(in[end])) end++;
            while (i + 1 + first < end && in[i + 1 + first] != '/') first++;
            char root[300];
            struct stat sb;
            bool abs_path = first > 0 && first < sizeof root - 2 && i + 1 + first < end;
            if (abs_path) {
                snprintf(root, sizeof root, "/%.*s", (int)first, in + i + 1);
                abs_path = stat(root, &sb) == 0 && S_ISDIR(sb.st_mode);
            }
            if (abs_path) {
                size_t last = end;
                while (last > i && in[last - 1] == '/') last--;
                size_t b = last;
                while (b > i && in[b - 1] != '/') b--;
                for (size_t k = b; k < last && o + 1 < cap; k++) out[o++] = in[k];
                i = end;
                continue;
            }
        }
        out[o++] = in[i++];
    }
    out[o] = 0;
}

/* bytes.c - see bytes.h. */
#include "base/bytes.h"

#include <stdint.h>
#include <string.h>

#include "base/alloc.h"

bool kiln_bytes_append(char **p, size_t *len, size_t *cap, size_t first_cap, const void *src, size_t n) {
    if (n > SIZE_MAX - 1 - *len) return false;
    const size_t need = *len + n + 1; /* the NUL after the bytes */
    if (need > *cap) {
        size_t c = *cap ? *cap : (first_cap ? first_cap : 64);
        while (c < need) {
            if (c > SIZE_MAX / 2) return false;
            c *= 2;
        }
        char *np = kiln_realloc(*p, c);
        if (!np) return false;
        *p = np;
        *cap = c;
    }
    if (n) memcpy(*p + *len, src, n);
    *len += n;
    (*p)[*len] = 0;
    return true;
}

/* utf8.c - strict UTF-8 validation (see utf8.h), following the well-formed byte sequences table of
 * Unicode 15 section 3.9 (table 3-7). */
#include "base/utf8.h"

#include <stdint.h>

bool kiln_utf8_valid(const char *str, size_t n, size_t *bad_at) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
        if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c == 0xE0) len = 3, lo = 0xA0;
        else if (c >= 0xE1 && c <= 0xEC) len = 3;
        else if (c == 0xED) len = 3, hi = 0x9F; /* no surrogates */
        else if (c >= 0xEE && c <= 0xEF) len = 3;
        else if (c == 0xF0) len = 4, lo = 0x90;
        else if (c >= 0xF1 && c <= 0xF3) len = 4;
        else if (c == 0xF4) len = 4, hi = 0x8F; /* <= U+10FFFF */
        else goto bad;
        if (n - i < len) goto bad;
        if (s[i + 1] < lo || s[i + 1] > hi) goto bad;
        for (size_t k = 2; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80) goto bad;
        i += len;
    }
    return true;
bad:
    if (bad_at) *bad_at = i;
    return false;
}

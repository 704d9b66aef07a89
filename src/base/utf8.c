/* utf8.c - strict UTF-8 validation and decoding (see utf8.h), following the well-formed byte sequences table of
 * Unicode 15 section 3.9 (table 3-7). */
#include "base/utf8.h"

#include <stdint.h>

size_t kiln_utf8_invalid_at(const char *str, size_t n) {
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
    return n;
bad:
    return i;
}

bool kiln_utf8_valid(const char *s, size_t n, size_t *bad_at) {
    size_t bad = kiln_utf8_invalid_at(s, n);
    if (bad == n) return true;
    if (bad_at) *bad_at = bad;
    return false;
}

int kiln_utf8_decode(const unsigned char *s, uint32_t *cp) {
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c < 0xE0) {
        *cp = ((c & 0x1Fu) << 6) | (s[1] & 0x3Fu);
        return 2;
    }
    if (c < 0xF0) {
        *cp = ((c & 0x0Fu) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu);
        return 3;
    }
    *cp = ((c & 0x07u) << 18) | ((s[1] & 0x3Fu) << 12) | ((s[2] & 0x3Fu) << 6) | (s[3] & 0x3Fu);
    return 4;
}

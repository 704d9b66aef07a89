/* utf8.h - strict UTF-8 validation (no overlongs, no surrogates, nothing above U+10FFFF).
 *
 *     size_t bad;
 *     if (!kiln_utf8_valid(name, strlen(name), &bad)) fprintf(stderr, "not UTF-8 at byte %zu\n", bad);
 *
 * Why our own: file parsers want to name the offending byte before handing text to a JSON library, and the
 * check is 30 lines. Text processing (normalisation, classes) belongs to utf8proc in src/text.
 */
#ifndef KILN_BASE_UTF8_H
#define KILN_BASE_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* True if s[0..n) is valid UTF-8. On false, *bad_at (if not NULL) is the offset of the first invalid byte. */
bool kiln_utf8_valid(const char *s, size_t n, size_t *bad_at);
/* Offset of the first invalid UTF-8 byte in s[0..len), or len if s is valid. */
size_t kiln_utf8_invalid_at(const char *s, size_t len);
/* Decodes one code point of VALID UTF-8 at s; returns its length in bytes (1..4). */
int kiln_utf8_decode(const unsigned char *s, uint32_t *cp);

#endif

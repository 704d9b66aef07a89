/* utf8.c - the Unicode White_Space property. UTF-8 validation and decoding live in base/utf8.h: strict, i.e.
 * what a Rust &str (and so HF tokenizers) can hold: shortest form only, no surrogates, nothing above U+10FFFF. */
#include "text/tok_internal.h"

bool kiln_unicode_is_white_space(uint32_t cp) {
    /* PropList.txt White_Space: stable since Unicode 6.3 */
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

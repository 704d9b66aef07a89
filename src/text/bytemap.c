/* bytemap.c - GPT-2's byte-to-unicode map (spec 2.5): printable bytes 33-126, 161-172 and 174-255 stand for
 * themselves; the other 68 bytes (controls, space, DEL, NBSP, soft hyphen, ...) take code points 256, 257, ... in
 * increasing byte order. Byte-level BPE vocabularies spell every token in these stand-in characters ("Ġ" =
 * U+0120 = the space byte). */
#include "text/tok_internal.h"

static bool byte_is_self(unsigned b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174; }

uint32_t kiln_byte_to_cp(uint8_t b) {
    if (byte_is_self(b)) return b;
    /* count of non-self bytes below b: 0..32 (33 of them), 127..160 (34), 173 (1) */
    uint32_t k;
    if (b <= 32) k = b;
    else if (b <= 160) k = 33u + (uint32_t)(b - 127);
    else k = 67; /* b == 173 */
    return 256u + k;
}

int kiln_cp_to_byte(uint32_t cp) {
    if (cp < 256) return byte_is_self(cp) ? (int)cp : -1;
    if (cp >= 256 + 68) return -1;
    uint32_t k = cp - 256;
    if (k <= 32) return (int)k;
    if (k <= 66) return (int)(127 + (k - 33));
    return 173;
}

/* unicode_compat.h - Unicode tables that make PCRE2 and utf8proc behave as HF tokenizers does (its Oniguruma
 * regex classes and its older NFC tables). The data is generated into unicode_compat.c by
 * tools/reference/tokenizer/gen_unicode_compat.py from measurements of tokenizers itself. */
#ifndef KILN_TEXT_UNICODE_COMPAT_H
#define KILN_TEXT_UNICODE_COMPAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kiln_cp_range {
    uint32_t lo, hi; /* inclusive */
} kiln_cp_range;

/* one code point mapped to one (lowercase_table.c) */
typedef struct kiln_cp_map {
    uint32_t from, to;
} kiln_cp_map;

extern const kiln_cp_range kiln_onig_white_space[];
extern const size_t kiln_onig_white_space_count;
extern const kiln_cp_range kiln_onig_letter_extra[];
extern const size_t kiln_onig_letter_extra_count;
extern const kiln_cp_range kiln_onig_number_extra[];
extern const size_t kiln_onig_number_extra_count;
extern const kiln_cp_range kiln_hf_nfc_boundary[];
extern const size_t kiln_hf_nfc_boundary_count;
extern const kiln_cp_map kiln_hf_lowercase[]; /* lowercase_table.c, sorted by from */
extern const size_t kiln_hf_lowercase_count;

/* Binary search of sorted, disjoint ranges. */
static inline bool kiln_cp_in(const kiln_cp_range *r, size_t n, uint32_t cp) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < r[mid].lo) hi = mid;
        else if (cp > r[mid].hi) lo = mid + 1;
        else return true;
    }
    return false;
}

#endif

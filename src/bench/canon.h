/* canon.h - canonical JSON, the bytes a graph digest is computed over.
 *
 * Definition (docs/bench-report.md repeats it): the UTF-8 bytes Python writes for
 *     json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
 * that is: no whitespace; object keys sorted by code point (= by UTF-8 bytes); strings escape only '"', '\\'
 * and control characters below 0x20 (\b \f \n \r \t, others as \u00xx with lowercase hex), everything else raw
 * UTF-8; integers in decimal; reals as the shortest text that reads back to the same double, fixed notation with
 * at least one digit after the point when the decimal exponent is in [-4, 16), else d[.ddd]e+XX / e-XX with at
 * least two exponent digits (Python's repr: 1.0, 0.0001, 1e-05, 1e+16, -0.0). So anyone can recompute a digest
 * with two lines of Python, and whitespace or key order in a graph file never changes its identity.
 *
 *     char *s; size_t n;
 *     if (kiln_json_canonical(graph, &s, &n, &err) != KILN_OK) ...;   // s is NUL-terminated, free with kiln_free
 */
#ifndef KILN_BENCH_CANON_H
#define KILN_BENCH_CANON_H

#include <jansson.h>
#include <stddef.h>

#include "base/status.h"

/* Writes v canonically into a fresh buffer (*out, NUL-terminated, *len bytes without the NUL; kiln_free it).
 * Fails with KILN_E_NOMEM, or KILN_E_INVALID for a non-finite real (jansson cannot hold one; belt and braces). */
kiln_status kiln_json_canonical(const json_t *v, char **out, size_t *len, kiln_err *err);

/* Formats a finite double the way Python's repr does (see above) into buf (>= 32 bytes). Returns buf. */
char *kiln_json_format_real(double d, char *buf, size_t cap);

#endif

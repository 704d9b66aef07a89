/* bytes.h - a growable byte buffer kept NUL-terminated: HTTP bodies, uploads, canonical JSON, prompt text.
 *
 *     char *p = NULL; size_t len = 0, cap = 0;
 *     if (!kiln_bytes_append(&p, &len, &cap, 4096, data, n)) ... out of memory (p, len unchanged)
 *     ... p[len] == 0; kiln_free(p)
 *
 * The caller keeps its own limits (a body's maximum, an upload's cap); this only grows, by doubling from
 * first_cap, with every size checked for overflow. */
#ifndef KILN_BASE_BYTES_H
#define KILN_BASE_BYTES_H

#include <stdbool.h>
#include <stddef.h>

bool kiln_bytes_append(char **p, size_t *len, size_t *cap, size_t first_cap, const void *src, size_t n);

#endif

/* sha256.h - SHA-256 through OpenSSL's libcrypto (EVP), streaming, for checkpoints of many GB.
 *
 *     char hex[65];
 *     uint64_t bytes;
 *     if (kiln_sha256_path("flux-2-klein-4b.safetensors", hex, &bytes, &err) != KILN_OK) ...
 *
 *     kiln_sha256 *h = kiln_sha256_new(&err);          // incremental
 *     kiln_sha256_update(h, buf, n);  ...
 *     kiln_sha256_final(h, hex);                          // also frees h
 *
 * Digests are 64 lowercase hex characters plus NUL. The file is read sequentially in 8 MiB blocks with
 * read(2) (not mmap), so hashing a 16 GB file costs 8 MiB of memory and tells the kernel to read ahead.
 */
#ifndef KILN_BASE_SHA256_H
#define KILN_BASE_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct kiln_sha256 kiln_sha256;

/* NULL with KILN_E_NOMEM (or KILN_E_INTERNAL if libcrypto refuses SHA-256) in err. */
kiln_sha256 *kiln_sha256_new(kiln_err *err);
void kiln_sha256_update(kiln_sha256 *h, const void *data, size_t n);
/* Writes the digest and frees h. */
void kiln_sha256_final(kiln_sha256 *h, char hex[65]);
/* Frees h without a digest (error paths). NULL allowed. */
void kiln_sha256_free(kiln_sha256 *h);

/* One-shot over a buffer. Returns false only if libcrypto fails (hex is then ""). */
bool kiln_sha256_buffer(const void *data, size_t n, char hex[65]);
/* Streams a file. bytes (may be NULL) receives its size. KILN_E_NOT_FOUND / KILN_E_IO name the path. */
kiln_status kiln_sha256_path(const char *path, char hex[65], uint64_t *bytes, kiln_err *err);

#endif

/* digest.h - the identities a report carries: sha256 of bytes, of files, of graphs (canonical JSON, see canon.h)
 * and of model files through a cache keyed by path + size + mtime, so a 16 GB checkpoint is hashed once.
 *
 *     char hex[65];
 *     kiln_sha256_file("graph.json", hex, &err);          // file_digest: the bytes as stored
 *     kiln_graph_digest(graph, hex, &err);                // graph_digest: what the graph means
 *     kiln_digest_cache *c = kiln_digest_cache_open("~/.cache/kiln/digests.json", &err);
 *     kiln_digest_cache_file(c, "flux-2-klein-4b.safetensors", hex, &cached, &err);
 *     kiln_digest_cache_close(c);                         // writes the cache back (atomically) when it changed
 *
 * Digests are 64 lowercase hex characters plus NUL.
 */
#ifndef KILN_BENCH_DIGEST_H
#define KILN_BENCH_DIGEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/status.h"

void kiln_sha256_hex(const void *data, size_t len, char hex[65]);
/* Streams the file; KILN_E_IO / KILN_E_NOT_FOUND with the path in the message. */
kiln_status kiln_sha256_file(const char *path, char hex[65], kiln_err *err);
/* sha256 of kiln_json_canonical(graph). */
kiln_status kiln_graph_digest(const json_t *graph, char hex[65], kiln_err *err);

typedef struct kiln_digest_cache kiln_digest_cache;

/* Opens (or starts) a cache file. A missing file is an empty cache; a corrupt one is ignored with a warning
 * (a cache is never a reason to fail a run). path NULL = an in-memory cache that is never written. */
kiln_digest_cache *kiln_digest_cache_open(const char *path, kiln_err *err);
/* sha256 of the file at path, from the cache when an entry has the same absolute path, size and mtime (ns);
 * otherwise hashed and recorded. *from_cache tells which (may be NULL). */
kiln_status kiln_digest_cache_file(kiln_digest_cache *c, const char *path, char hex[65], bool *from_cache,
                                   kiln_err *err);
/* Writes the cache back when it changed (temp file + rename) and frees it. NULL allowed. */
void kiln_digest_cache_close(kiln_digest_cache *c);

#endif

/* fuzz_manifest.c - libFuzzer target over the kiln-manifest/1 reader (kiln_ckpt_manifest_parse): any input
 * gives KILN_OK or a clean error, no crash, no leak; an accepted manifest's totals add up. Seeds:
 * tests/fuzz/corpus/fuzz_manifest/ (the test manifest, a cut of a real one, and malformed cases). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "io/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    kiln_err err = {0};
    kiln_ckpt_manifest *m = NULL;
    if (kiln_ckpt_manifest_parse((const char *)data, size, "fuzz", &m, &err) != KILN_OK) {
        if (m != NULL || err.msg[0] == '\0') abort();
        return 0;
    }
    uint64_t bytes = 0;
    size_t tensors = 0;
    for (size_t f = 0; f < m->n_files; f++) {
        if (!kiln_ckpt_manifest_path_ok(m->files[f].path)) abort();
        for (size_t i = 0; i < m->files[f].n_tensors; i++) bytes += m->files[f].tensors[i].bytes;
        tensors += m->files[f].n_tensors;
    }
    if (bytes != m->total_bytes || tensors != m->total_tensors) abort();
    kiln_ckpt_manifest_free(m);
    return 0;
}

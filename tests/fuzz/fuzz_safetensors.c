/* fuzz_safetensors.c - libFuzzer target over the safetensors reader (kiln_st_open_memory) and the family
 * detector. Any input must give KILN_OK or a clean error: no crash, no out-of-bounds read, no leak. On
 * success every tensor must be findable by name and its bytes must lie inside the input (ASan checks the
 * reads of the first and last byte). Seeds: tests/fuzz/corpus/fuzz_safetensors/ (make_safetensors_corpus.py). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "io/detect.h"
#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    kiln_err err = {0};
    kiln_st_file *f = NULL;
    kiln_status s = kiln_st_open_memory(data, size, "fuzz", &f, &err);
    if (s != KILN_OK) {
        if (f != NULL || err.msg[0] == '\0') abort(); /* failures must leave nothing and say why */
        return 0;
    }
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < kiln_st_count(f); i++) {
        const kiln_st_tensor *t = kiln_st_at(f, i);
        if (kiln_st_find(f, t->name) != t) abort();
        const uint8_t *p = t->data;
        if (p < data || p + t->nbytes > data + size) abort();
        if (t->nbytes) sink ^= p[0] ^ p[t->nbytes - 1];
        kiln_tensor v = kiln_st_view(t);
        if (kiln_tensor_nbytes(&v) != t->nbytes) abort();
    }
    (void)sink;
    kiln_detect_result d;
    kiln_detect(f, &d);
    kiln_st_close(f);
    return 0;
}

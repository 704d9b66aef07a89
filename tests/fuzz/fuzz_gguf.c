/* fuzz_gguf.c - libFuzzer target over the GGUF reader (kiln_gguf_open_memory) and the dequantisers. Any input
 * must give KILN_OK or a clean error: no crash, no out-of-bounds read, no leak. On success every tensor must be
 * findable by name and lie inside the input, every metadata value must be readable through the accessors, and
 * the first blocks of each dequantisable tensor are dequantised on the scalar and the active tier, which must
 * agree bit for bit; the family detector runs on the names, and a text encoder the llama.cpp-name check accepts
 * must map every tensor name (qwen3-te.gguf, t5-te.gguf: make_te_gguf.py). Seeds: tests/fuzz/corpus/fuzz_gguf/ (tools/reference/make_gguf.py). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/detect.h"
#include "io/gguf.h"
#include "tensor/quant.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    kiln_err err = {0};
    kiln_gguf_file *g = NULL;
    kiln_status s = kiln_gguf_open_memory(data, size, "fuzz", &g, &err);
    if (s != KILN_OK) {
        if (g != NULL || err.msg[0] == '\0') abort(); /* failures must leave nothing and say why */
        return 0;
    }
    volatile uint64_t sink = 0;
    for (size_t i = 0; i < kiln_gguf_kv_count(g); i++) {
        const kiln_gguf_kv *kv = kiln_gguf_kv_at(g, i);
        if (kiln_gguf_kv_find(g, kv->key) != kv) abort();
        int64_t v;
        double f;
        const char *str;
        size_t n;
        for (uint64_t k = 0; k < kv->count && k < 4; k++) {
            if (kiln_gguf_kv_int(kv, k, &v)) sink += (uint64_t)v;
            if (kiln_gguf_kv_float(kv, k, &f)) sink += (uint64_t)(f == f);
            if (kiln_gguf_kv_array_str(kv, k, &str, &n) && n) sink += (uint8_t)str[0] + (uint8_t)str[n - 1];
        }
        if (kv->count && kiln_gguf_kv_array_str(kv, kv->count - 1, &str, &n) && n) sink += (uint8_t)str[n - 1];
    }
    static float a[4096], b[4096];
    for (size_t i = 0; i < kiln_gguf_count(g); i++) {
        const kiln_gguf_tensor *t = kiln_gguf_at(g, i);
        if (kiln_gguf_find(g, t->name) != t) abort();
        const uint8_t *p = t->data;
        if (p < data || t->nbytes > size || p + t->nbytes > data + size) abort();
        if (t->nbytes) sink += p[0] ^ p[t->nbytes - 1];
        const kiln_qtype_info *q = kiln_qtype_get(t->type);
        if (!q) abort();
        size_t n = t->numel < 4096 ? (size_t)t->numel : 4096;
        n -= n % q->block;
        if (!q->dequant || !n) continue;
        if (kiln_dequant_ref(a, t->type, t->data, n, &err) != KILN_OK) abort();
        if (kiln_dequant(b, t->type, t->data, n, &err) != KILN_OK) abort();
        if (memcmp(a, b, n * sizeof *a) != 0) abort(); /* (NaN payloads included: the tiers must copy them alike) */
    }
    (void)sink;
    kiln_detect_result d;
    kiln_detect_gguf(g, &d);
    /* a text encoder the check accepts (io/gguf_te.h): every tensor has its transformers name */
    kiln_gguf_te te;
    if (kiln_gguf_te_check(g, &te, &err) == KILN_OK && te.kind != KILN_GGUF_TE_NONE) {
        char hf[256];
        for (size_t i = 0; i < kiln_gguf_count(g); i++)
            if (!kiln_gguf_te_hf_name(te.kind, kiln_gguf_at(g, i)->name, hf, sizeof hf)) abort();
    }
    kiln_gguf_close(g);
    return 0;
}

/* fuzz_lora.c - libFuzzer target over the LoRA adapter reader (models/lora.c) on the tiny FLUX.2 DiT of
 * tests/data/tiny/comfy: any safetensors image must be attached or refused with a message, never crash, read out
 * of bounds or leak; an accepted adapter must hang only terms whose shapes fit their weights, come off again
 * (every weight as loaded), and merge (the merged weights are computed and then restored). Seeds:
 * tests/fuzz/corpus/fuzz_lora/ (the adapters of tools/reference/make_lora_goldens.py). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compute/ops.h"
#include "models/lora.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static kiln_st_file *ck;
static kiln_flux2_dit *dit;
static kiln_backend *be;

static void setup(void) {
    kiln_err err = {0};
    if (kiln_st_open(KILN_SOURCE_DIR "/tests/data/tiny/comfy/flux-2-klein-4b.safetensors", &ck, &err) != KILN_OK ||
        kiln_flux2_dit_load(ck, NULL, &dit, &err) != KILN_OK || kiln_backend_open_cpu(1, &be, &err) != KILN_OK)
        abort();
}

/* Every adaptable weight's (data, lora) pair, to check the model comes back as loaded. */
static uintptr_t fingerprint(void) {
    uintptr_t h = 0;
    for (int i = 0; i < dit->n_double; i++)
        h = h * 31 + (uintptr_t)dit->dbl[i].img.proj.data + (uintptr_t)dit->dbl[i].txt.mlp_in.lora;
    for (int i = 0; i < dit->n_single; i++) h = h * 31 + (uintptr_t)dit->sgl[i].linear1.data + (uintptr_t)dit->sgl[i].linear2.lora;
    return h * 31 + (uintptr_t)dit->final_shift.data + (uintptr_t)dit->img_in.lora;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!dit) setup();
    const uintptr_t before = fingerprint();
    for (int merge = 0; merge < 2; merge++) {
        kiln_err err = {0};
        kiln_lora_set *set = NULL;
        kiln_status s = kiln_lora_attach_image(dit, be, data, size, 0.75f, merge, &set, &err);
        if (s != KILN_OK) {
            if (set || !err.msg[0]) abort(); /* a refusal leaves nothing and says why */
            if (fingerprint() != before) abort();
            return 0;
        }
        for (int i = 0; i < dit->n_single; i++)
            for (const kiln_lora_term *t = dit->sgl[i].linear1.lora; t; t = t->next)
                if (t->b.shape[0] != dit->sgl[i].linear1.shape[0] || t->a.shape[1] != dit->sgl[i].linear1.shape[1])
                    abort();
        kiln_lora_detach(set);
        if (fingerprint() != before) abort();
    }
    return 0;
}

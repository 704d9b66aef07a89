/* engine_lora.c - a request's LoRA adapters onto the engine's DiT (models/lora.h), for that request only. */
#include "base/alloc.h"
#include "pipeline/engine_internal.h"

kiln_status kiln_engine_lora_attach(kiln_engine *e, const kiln_request *req, kiln_lora_set **out, kiln_err *err) {
    *out = NULL;
    if (req->n_loras < 0 || (req->n_loras > 0 && !req->loras))
        return KILN_FAIL(err, KILN_E_INVALID, "request: %d LoRA adapters but no list", req->n_loras);
    if (req->n_loras == 0) return KILN_OK;
    if (req->n_loras > 64) return KILN_FAIL(err, KILN_E_INVALID, "request: %d LoRA adapters (at most 64)", req->n_loras);
    kiln_lora_spec specs[64];
    for (int i = 0; i < req->n_loras; i++) {
        if (!req->loras[i].path || !*req->loras[i].path)
            return KILN_FAIL(err, KILN_E_INVALID, "request: LoRA adapter %d has no path", i);
        specs[i] = (kiln_lora_spec){req->loras[i].path, req->loras[i].strength};
    }
    return (req->lora_merge ? kiln_lora_attach_merged : kiln_lora_attach)(e->dit, e->be, specs, req->n_loras, out, err);
}

/* dit_kv.h - the reference-token K/V cache of FLUX.2 [klein] 9B-KV (diffusers Flux2KleinKVPipeline,
 * transformer_flux2.py: Flux2KVAttnProcessor, Flux2KVParallelSelfAttnProcessor, _flux2_kv_causal_attention).
 *
 * Step 0 (EXTRACT) runs the reference tokens with the noisy ones; attention is "causal" in the pipeline's sense:
 * reference queries see only the reference keys, text and image queries see every key; each block keeps the
 * references' K and V after RoPE. Steps 1+ (CACHED) run text and image tokens only, and every block's keys and
 * values are extended by that block's cached reference K/V.
 *
 * Row order. The pipeline's sequence is [txt ; ref ; img]; kiln's is [txt ; img ; ref] (the klein edit layout,
 * flux2_dit.h), which is the same computation: an attention output is a sum over the keys (their order does not
 * matter), and each token brings its own RoPE position and its own modulation. It is what lets both attention
 * calls take contiguous rows: text and image queries are rows [0, L + Ni), reference queries rows [L + Ni, T).
 * No mask is needed: two attention calls instead of one masked one, and in CACHED mode one call over keys
 * [txt ; img ; cached ref].
 *
 * Only the ops table is called, so every backend runs it.
 */
#ifndef KILN_MODELS_DIT_KV_H
#define KILN_MODELS_DIT_KV_H

#include "base/status.h"
#include "compute/ops.h"
#include "models/dit_attention.h"

typedef enum kiln_dit_kv_mode {
    KILN_DIT_KV_OFF = 0,  /* not a KV workspace: references (if any) are plain klein edit tokens */
    KILN_DIT_KV_EXTRACT,  /* step 0: references in the sequence, their K/V stored */
    KILN_DIT_KV_CACHED,   /* steps 1+: references absent, their stored K/V injected */
} kiln_dit_kv_mode;

/* The timestep the reference tokens are modulated with in EXTRACT mode: Flux2Transformer2DModel.forward's
 * ref_fixed_timestep default, which Flux2KleinKVPipeline never overrides; embedded as ref_fixed_timestep * 1000. */
#define KILN_FLUX2_KV_REF_TIMESTEP 0.0f

typedef struct kiln_dit_kv {
    kiln_dit_kv_mode mode;
    int64_t R;          /* reference tokens per sample */
    void *cache;        /* this block's [B*R, 2D] k | v of the reference tokens, after RoPE */
    void *kv;           /* scratch [L + Ni + R, 2D]: one sample's keys | values with the cache appended */
    kiln_dtype dt;      /* of both: the DiT's activation dtype */
} kiln_dit_kv;

/* kiln_dit_attn's per-sample hook (dit_attention.h) for the cache kiln_dit_kv *a->attend_ctx: set attend =
 * kiln_dit_kv_attend and call kiln_dit_joint_attention / kiln_dit_single_attention. The image stream's tokens
 * a->N end with kv->R reference rows in EXTRACT mode and have none in CACHED mode. */
kiln_status kiln_dit_kv_attend(kiln_backend *be, const kiln_dit_attn *a, int64_t b, const kiln_tensor *q,
                               const kiln_tensor *k, const kiln_tensor *v, kiln_tensor *out, kiln_err *err);

#endif

/* ranks_wire.h - the message rank 0 of a multi-rank `kiln serve` broadcasts to the other ranks for every engine
 * call (docs/parallel.md "A multi-rank server"): a fixed header, then a payload that carries the call's
 * kiln_gen_params (graph/engine.h) - everything but the progress and latent callbacks, which stay on rank 0.
 *
 *     uint8_t *buf; size_t len;
 *     kiln_ranks_encode(ps, n, &buf, &len, &err);            // rank 0
 *     ... broadcast the header, then buf ...
 *     kiln_ranks_call *call;
 *     kiln_ranks_decode(buf, len, &call, &err);              // every other rank: checked like any external input
 *     inner->generate_batch(inner->self, call->ps, call->n, ...);
 *     kiln_ranks_call_free(call);
 *
 * Layout (host byte order and sizes: every rank runs the same kiln binary, which the header's magic and
 * version check): header {u32 magic 'KLNR', u16 version, u16 kind, u64 payload bytes}; a RUN payload is u32 n
 * then n calls, each: strings unet, clip, vae, clip2, prompt_2, prompt, negative_prompt, sampler, request_id
 * (u8 present, u32 length, bytes without NUL), f32 guidance, cfg, i32 width, height, steps, batch, u64 seed,
 * u8 has_sigmas [i32 n, f32 x n], i32 n_loras [string path, f32 strength] x n, i32 n_refs [image] x n,
 * u8 has_init [image], u8 rules (bit 0 comfy_noise, bit 1 comfy_text); an image is i32 width, height and width*height*3 bytes. UNLOAD and STOP carry nothing.
 *
 * Errors: KILN_E_FORMAT for a message that is cut short, overlong, or has a count, length or size out of
 * bounds (decode never reads past len and never allocates more than the message could describe);
 * KILN_E_LIMIT when a call is too big to send (encode). */
#ifndef KILN_SERVER_RANKS_WIRE_H
#define KILN_SERVER_RANKS_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "graph/engine.h"

enum { KILN_RANKS_RUN = 1, KILN_RANKS_UNLOAD = 2, KILN_RANKS_STOP = 3 };

#define KILN_RANKS_MAGIC 0x524e4c4bu /* "KLNR" read as a little-endian u32 */
#define KILN_RANKS_VERSION 2
#define KILN_RANKS_MAX_CALLS 16      /* a shared forward batches at most 16 images, so at most 16 calls */
#define KILN_RANKS_MAX_PAYLOAD (512u << 20) /* reference images included; far above any request kiln serves */

typedef struct kiln_ranks_header {
    uint32_t magic;
    uint16_t version, kind;
    uint64_t payload_bytes;
} kiln_ranks_header;

/* A header of kind with that payload size. */
kiln_ranks_header kiln_ranks_header_make(int kind, size_t payload_bytes);
/* KILN_E_FORMAT unless the magic, version, kind and size are ones this build sends (RUN needs a payload, UNLOAD
 * and STOP none). */
kiln_status kiln_ranks_header_check(const kiln_ranks_header *h, kiln_err *err);

/* Serialises n (1..16) calls into *buf (kiln_malloc'd, freed by the caller with kiln_free). */
kiln_status kiln_ranks_encode(const kiln_gen_params *ps, int n, uint8_t **buf, size_t *len, kiln_err *err);

/* What decode gives: n calls whose strings, sigmas, adapters and images live in the struct (one allocation
 * each, freed by kiln_ranks_call_free). latent is always NULL (previews are rank 0's). */
typedef struct kiln_ranks_call {
    int n;
    kiln_gen_params ps[KILN_RANKS_MAX_CALLS];
    void *owned[KILN_RANKS_MAX_CALLS * 40]; /* 9 strings, sigmas, 2 + 8 adapter blocks, 2 + 10 references, 2 init */
    int n_owned;
} kiln_ranks_call;

kiln_status kiln_ranks_decode(const uint8_t *buf, size_t len, kiln_ranks_call **out, kiln_err *err);
void kiln_ranks_call_free(kiln_ranks_call *c); /* NULL allowed */

#endif

/* noise.h - kiln's documented initial-noise generator, and loading injected noise from a file.
 *
 * The generator (fixed forever; a change would change every seeded image):
 *   state: xoshiro256** whose four 64-bit words are filled by SplitMix64 from `seed`;
 *   each uniform u in (0, 1]: u = ((next() >> 11) + 1) * 2^-53;
 *   normals come in pairs from Box-Muller on two uniforms u1, u2 (double precision):
 *     r = sqrt(-2 ln u1), z0 = r cos(2 pi u2), z1 = r sin(2 pi u2), each rounded to f32;
 *   values fill the buffer in memory order ([128, H/16, W/16] for one image).
 * This does not reproduce torch.randn (spec 4.3); pipeline/torch_randn.h does, for ComfyUI graphs (--comfy-noise).
 *
 *     kiln_noise_fill(buf, 128 * h16 * w16, seed);
 *     kiln_noise_load("noise.safetensors", expected_count, &buf, &err);  // caller frees with kiln_free
 */
#ifndef KILN_PIPELINE_NOISE_H
#define KILN_PIPELINE_NOISE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

void kiln_noise_fill(float *out, size_t n, uint64_t seed);

/* Loads injected noise: a .safetensors file holding exactly one tensor (or one named "noise"; f32, bf16 or
 * f16), or a raw little-endian f32 file. Its element count must be `count` (KILN_E_INVALID otherwise).
 * *out is allocated with kiln_malloc; free with kiln_free. */
kiln_status kiln_noise_load(const char *path, size_t count, float **out, kiln_err *err);

#endif

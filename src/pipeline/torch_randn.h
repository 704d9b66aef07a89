/* torch_randn.h - torch.randn on the CPU, float32, bit for bit: the noise ComfyUI's samplers draw
 * (comfy/sample.py prepare_noise: torch.manual_seed(seed), then one torch.randn(latent shape) for the whole
 * batch), so that a graph's seed gives ComfyUI's noise, not kiln's own generator (pipeline/noise.h).
 *
 * What torch does (aten/src/ATen/native/cpu/DistributionKernels.cpp, CPUGeneratorImpl, for a contiguous float32
 * tensor of n >= 16 values; read for facts, written anew here):
 *   - the generator is mt19937 seeded with the low 32 bits of the seed (torch.manual_seed);
 *   - every value first gets a uniform u = (mt19937() & 0xffffff) * 2^-24, in order;
 *   - each block of 16 is turned into normals by Box-Muller in float32: for j < 8, with u1 = 1 - u[j],
 *     u2 = u[j + 8]: r = sqrt(-2 log u1), th = 2 pi u2, out[j] = r cos th, out[j + 8] = r sin th;
 *   - when n is not a multiple of 16, the last 16 values are drawn again (16 fresh uniforms) and transformed.
 * The log, sin and cos depend on the CPU kernel torch dispatches to: on x86 with AVX2 (and no AVX-512) torch
 * uses its vectorised Cephes polynomials (avx_mathfun.h: log256_ps, sincos256_ps, every step rounded to float32,
 * no fused multiply-add), elsewhere (AVX-512 machines, ARM, ATEN_CPU_CAPABILITY=default) the C library's logf,
 * cosf and sinf with th computed in double. Both are here; KILN_RANDN_AVX2 is what most ComfyUI installs draw
 * (x86-64 desktops with AVX2), and it does not depend on this machine's CPU or libm.
 * n < 16 takes torch's other path (one double-precision normal per value) and is refused here.
 *
 *     float *noise = ...;                                      // [batch, C, H, W] values
 *     if (kiln_torch_randn(noise, n, seed, KILN_RANDN_AVX2, &err) != KILN_OK) ...
 */
#ifndef KILN_PIPELINE_TORCH_RANDN_H
#define KILN_PIPELINE_TORCH_RANDN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef enum kiln_randn_kernel {
    KILN_RANDN_AVX2 = 0, /* torch's AVX2 kernel (Cephes polynomials in float32) */
    KILN_RANDN_LIBM,     /* torch's scalar kernel (the C library's logf/cosf/sinf; bit-exact on glibc) */
} kiln_randn_kernel;

/* Fills out[0..n) with torch.manual_seed(seed); torch.randn(n). KILN_E_INVALID when n < 16. */
kiln_status kiln_torch_randn(float *out, size_t n, uint64_t seed, kiln_randn_kernel kernel, kiln_err *err);

/* ComfyUI's latent noise as kiln's engine takes it (kiln_request.noise, [batch, channels, h16, w16]): torch.randn
 * of ComfyUI's latent shape for the whole batch, reordered into kiln's token layout. channels is the engine's
 * (kiln_engine_latent_channels). FLUX.2 (flux1 false): EmptyFlux2LatentImage's [batch, 128, h16, w16] is kiln's
 * layout already. FLUX.1: EmptySD3LatentImage's [batch, channels / 4 (16), 2 h16, 2 w16], packed 2x2 as the DiT
 * patchifies it (channel c*4 + dy*2 + dx). KILN_E_INVALID for sizes < 1 or FLUX.1 channels not a multiple of 4. */
kiln_status kiln_comfy_noise(float *out, int batch, int channels, int h16, int w16, bool flux1, uint64_t seed,
                             kiln_err *err);

#endif

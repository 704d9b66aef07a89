/* rope_tables.h - the cos/sin tables the rope op consumes, for the FLUX.2 DiT and for Qwen3.
 *
 * Both write cos and sin as f32 [S, Dh/2] (one angle per rotated pair, the same for every head).
 *
 *     // DiT: ids [S, 4] = (t, h, w, l) per token; 4 axes of 32 dims, theta 2000 (spec 1.5)
 *     kiln_rope_flux2(ids, S, (int[]){32, 32, 32, 32}, 4, 2000.0, cos, sin);
 *     // Qwen3: positions 0..S-1, head dim 128, theta 1e6, half-split pairs (spec 2.2)
 *     kiln_rope_qwen3(S, 128, 1e6f, cos, sin);
 */
#ifndef KILN_MODELS_ROPE_TABLES_H
#define KILN_MODELS_ROPE_TABLES_H

#include <stdint.h>

/* Pair i of the head (dims 2i, 2i+1 under the interleaved convention) belongs to the axis a whose dim range
 * holds 2i; within the axis, frequency j = (2i - start_a)/2: angle = pos_a * theta^(-2j / axes[a]).
 * Angles in double (diffusers uses fp64), stored as f32. */
void kiln_rope_flux2(const int32_t *ids, int64_t n_tokens, const int *axes, int n_axes, double theta,
                     float *cos_out, float *sin_out);

/* Pair j (dims j, j + Dh/2): angle = p * inv_freq_j, inv_freq_j = 1 / theta^(2j/Dh), in f32 as transformers
 * computes it (f32 inv_freq, f32 product). */
void kiln_rope_qwen3(int64_t n_tokens, int head_dim, float theta, float *cos_out, float *sin_out);

/* Position ids of the FLUX.2 text-to-image sequence pieces (spec 1.5): text token j -> (0,0,0,j);
 * image token (y, x) of an h x w grid, row-major -> (0, y, x, 0). ids are [n, 4]. */
void kiln_flux2_text_ids(int64_t n_txt, int32_t *ids);
void kiln_flux2_image_ids(int h, int w, int32_t *ids);

#endif

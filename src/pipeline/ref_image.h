/* ref_image.h - preparing reference and init images as Flux2KleinPipeline prepares its `image=` inputs
 * (diffusers 0.42.1 pipeline_flux2_klein.py __call__ step 4, Flux2ImageProcessor):
 *
 *   1. check_image_input: both sides >= 64 pixels, aspect ratio <= 8 (else refused, as the pipeline raises);
 *   2. over 1024*1024 pixels: _resize_to_target_area, s = sqrt(1024^2 / (w h)), to int(w s) x int(h s) with
 *      PIL's LANCZOS (kiln_resize_lanczos reproduces PIL's fixed-point resampler bit for bit);
 *   3. the sides floored to multiples of 16 (vae_scale_factor * 2) by a CENTER CROP (Flux2ImageProcessor's
 *      _resize_and_crop only crops), left = (w - w16) // 2, top = (h - h16) // 2.
 *
 * Difference, stated: PIL resizes an RGBA image premultiplied ("RGBa"); kiln decodes to RGB first (alpha
 * dropped), so a transparent reference larger than the cap resamples differently. Opaque images are exact.
 *
 *     uint8_t *rgb; int w, h;
 *     KILN_TRY(kiln_ref_prepare(src, sw, sh, &rgb, &w, &h, &err));   // kiln_free(rgb); w, h multiples of 16
 */
#ifndef KILN_PIPELINE_REF_IMAGE_H
#define KILN_PIPELINE_REF_IMAGE_H

#include <stdint.h>

#include "base/status.h"

#define KILN_REF_MAX_AREA (1024 * 1024) /* the pipeline's per-reference pixel cap (not configurable there) */
#define KILN_REF_MIN_SIDE 64
#define KILN_REF_MAX_ASPECT 8

/* PIL Image.resize((ow, oh), LANCZOS) of an RGB8 image: separable, horizontal pass first, 22-bit fixed-point
 * coefficients, each pass rounded and clipped to 8 bits. out: ow*oh*3 bytes. KILN_E_NOMEM. */
kiln_status kiln_resize_lanczos(const uint8_t *in, int iw, int ih, uint8_t *out, int ow, int oh, kiln_err *err);

/* Steps 1-3 above. *out is kiln_malloc'd (*ow x *oh x 3). KILN_E_INVALID (too small, too elongated),
 * KILN_E_NOMEM. */
kiln_status kiln_ref_prepare(const uint8_t *rgb, int w, int h, uint8_t **out, int *ow, int *oh, kiln_err *err);

#endif

/* nodes_image.c - the image nodes of the editing graphs: LoadImage (an uploaded file of the input folder),
 * ImageScaleToTotalPixels, GetImageSize and VAEEncode (which only marks the image: the engine encodes it when it
 * runs, as a reference or an init image). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "graph/exec.h"
#include "io/image_load.h"

static kiln_status nomem(kiln_exec *ex) { return KILN_FAIL(ex->err, KILN_E_NOMEM, "out of memory"); }

int kiln_node_load_image(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    const char *name = in[0]->str;
    if (!ex->env->input_dir) return KILN_FAIL(ex->err, KILN_E_INVALID, "node %s: no input folder configured", id);
    if (!kiln_model_name_ok(name)) /* validation refused it already; a plain name never leaves the folder */
        return KILN_FAIL(ex->err, KILN_E_INVALID, "node %s: bad image file name", id);
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", ex->env->input_dir, name);
    uint8_t *rgb = NULL;
    int w = 0, h = 0;
    if (kiln_image_load(path, NULL, &rgb, &w, &h, ex->err) != KILN_OK)
        return kiln_err_prefix(ex->err, "node %s: input image %s", id, name);
    out[0].kind = KILN_V_IMAGE;
    out[0].n_images = 1;
    out[0].width = w;
    out[0].height = h;
    out[0].pixels = rgb;
    out[1].kind = KILN_V_NONE; /* MASK: no node kiln runs takes one */
    return KILN_OK;
}

int kiln_node_image_scale_to_total_pixels(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    /* image, upscale_method, megapixels, resolution_steps; ComfyUI: scale_by = sqrt(total / (w h)), each side
     * round(side * scale_by / steps) * steps (Python's round: half to even) */
    const kiln_value *img = in[0];
    if (strcmp(in[1]->str, "nearest-exact") != 0)
        return KILN_FAIL(ex->err, KILN_E_UNSUPPORTED, "node %s: upscale_method %s: kiln implements nearest-exact", id,
                         in[1]->str);
    double total = in[2]->f * 1024 * 1024, steps = (double)in[3]->i;
    double scale_by = sqrt(total / ((double)img->width * (double)img->height));
    double w = nearbyint(img->width * scale_by / steps) * steps, h = nearbyint(img->height * scale_by / steps) * steps;
    if (!(w >= 1 && h >= 1 && w <= 16384 && h <= 16384))
        return KILN_FAIL(ex->err, KILN_E_LIMIT, "node %s: %gx%g pixels is outside 1..16384 a side", id, w, h);
    int W = (int)w, H = (int)h;
    size_t one = (size_t)W * (size_t)H * 3, all;
    if (!kiln_mul_size(one, (size_t)img->n_images, &all) || !(out->pixels = kiln_malloc(all))) return nomem(ex);
    out->kind = KILN_V_IMAGE;
    out->n_images = img->n_images;
    out->width = W;
    out->height = H;
    /* torch's nearest-exact: source index floor((dst + 0.5) * (in / out)) in float32, clamped */
    float sx = (float)img->width / (float)W, sy = (float)img->height / (float)H;
    for (int b = 0; b < img->n_images; b++) {
        const uint8_t *src = img->pixels + (size_t)b * img->width * img->height * 3;
        uint8_t *dst = out->pixels + (size_t)b * one;
        for (int y = 0; y < H; y++) {
            int iy = (int)floorf(((float)y + 0.5f) * sy);
            if (iy > img->height - 1) iy = img->height - 1;
            for (int x = 0; x < W; x++) {
                int ix = (int)floorf(((float)x + 0.5f) * sx);
                if (ix > img->width - 1) ix = img->width - 1;
                memcpy(dst + ((size_t)y * W + x) * 3, src + ((size_t)iy * img->width + ix) * 3, 3);
            }
        }
    }
    return KILN_OK;
}

int kiln_node_get_image_size(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    (void)ex, (void)id;
    const int64_t v[3] = {in[0]->width, in[0]->height, in[0]->n_images};
    for (int k = 0; k < 3; k++) {
        out[k].kind = KILN_V_INT;
        out[k].i = v[k];
    }
    return KILN_OK;
}

int kiln_node_vae_encode(kiln_exec *ex, const char *id, kiln_value *const *in, kiln_value *out) {
    /* pixels, vae: the latent of one image, at the size the engine's encoder takes (multiples of 16) */
    const kiln_value *img = in[0];
    if (img->n_images != 1)
        return KILN_FAIL(ex->err, KILN_E_UNSUPPORTED, "node %s: VAEEncode of a batch of %d images: kiln encodes one",
                         id, img->n_images);
    out->kind = KILN_V_LATENT;
    kiln_latent *l = &out->latent;
    l->width = img->width / 16 * 16;
    l->height = img->height / 16 * 16;
    l->batch = 1;
    kiln_rgb src = {img->pixels, img->width, img->height};
    return kiln_rgb_copy(&l->encoded, &src) ? KILN_OK : nomem(ex);
}

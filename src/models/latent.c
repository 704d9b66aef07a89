/* latent.c - token <-> latent layout transforms and pixel conversion (see latent.h). */
#include "models/latent.h"

#include <math.h>

void kiln_grid_to_tokens(const float *grid, int c, int h, int w, float *tokens) {
    int64_t n = (int64_t)h * w;
    for (int ch = 0; ch < c; ch++)
        for (int64_t i = 0; i < n; i++) tokens[i * c + ch] = grid[ch * n + i];
}

void kiln_tokens_to_grid(const float *tokens, int c, int h, int w, float *grid) {
    int64_t n = (int64_t)h * w;
    for (int ch = 0; ch < c; ch++)
        for (int64_t i = 0; i < n; i++) grid[ch * n + i] = tokens[i * c + ch];
}

void kiln_latent_bn_normalize(float *x, int c, int64_t n, const float *mean, const float *var, float eps) {
    for (int ch = 0; ch < c; ch++) {
        float sd = sqrtf(var[ch] + eps);
        for (int64_t i = 0; i < n; i++) x[ch * n + i] = (x[ch * n + i] - mean[ch]) / sd;
    }
}

void kiln_latent_bn_denormalize(float *x, int c, int64_t n, const float *mean, const float *var, float eps) {
    for (int ch = 0; ch < c; ch++) {
        float sd = sqrtf(var[ch] + eps);
        for (int64_t i = 0; i < n; i++) x[ch * n + i] = x[ch * n + i] * sd + mean[ch];
    }
}

void kiln_latent_patchify(const float *z, int c, int h, int w, float *zp) {
    int64_t W2 = 2 * (int64_t)w, HW2 = 4 * (int64_t)h * w, hw = (int64_t)h * w;
    for (int ch = 0; ch < c; ch++)
        for (int pi = 0; pi < 2; pi++)
            for (int pj = 0; pj < 2; pj++)
                for (int i = 0; i < h; i++)
                    for (int j = 0; j < w; j++)
                        zp[(ch * 4 + pi * 2 + pj) * hw + (int64_t)i * w + j] =
                            z[ch * HW2 + (2 * (int64_t)i + pi) * W2 + 2 * j + pj];
}

void kiln_latent_unpatchify(const float *zp, int c, int h, int w, float *z) {
    int64_t W2 = 2 * (int64_t)w, HW2 = 4 * (int64_t)h * w, hw = (int64_t)h * w;
    for (int ch = 0; ch < c; ch++)
        for (int pi = 0; pi < 2; pi++)
            for (int pj = 0; pj < 2; pj++)
                for (int i = 0; i < h; i++)
                    for (int j = 0; j < w; j++)
                        z[ch * HW2 + (2 * (int64_t)i + pi) * W2 + 2 * j + pj] =
                            zp[(ch * 4 + pi * 2 + pj) * hw + (int64_t)i * w + j];
}

void kiln_image_from_vae(const float *x, int height, int width, uint8_t *rgb) {
    int64_t n = (int64_t)height * width;
    for (int ch = 0; ch < 3; ch++)
        for (int64_t i = 0; i < n; i++) {
            float v = x[ch * n + i] / 2.0f + 0.5f;
            v = v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
            rgb[i * 3 + ch] = (uint8_t)nearbyintf(v * 255.0f);
        }
}

void kiln_image_unit_from_vae(const float *x, int height, int width, float *hwc) {
    int64_t n = (int64_t)height * width;
    for (int64_t p = 0; p < n; p++)
        for (int ch = 0; ch < 3; ch++) {
            float v = x[ch * n + p] / 2.0f + 0.5f;
            hwc[p * 3 + ch] = v < 0 ? 0 : v > 1 ? 1 : v;
        }
}

void kiln_image_to_vae(const uint8_t *rgb, int height, int width, float *x) {
    int64_t n = (int64_t)height * width;
    for (int ch = 0; ch < 3; ch++)
        for (int64_t i = 0; i < n; i++) x[ch * n + i] = 2.0f * ((float)rgb[i * 3 + ch] / 255.0f) - 1.0f;
}

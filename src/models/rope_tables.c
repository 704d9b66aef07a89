/* rope_tables.c - RoPE angle tables (see rope_tables.h). */
#include "models/rope_tables.h"

#include <math.h>

void kiln_rope_flux2(const int32_t *ids, int64_t n_tokens, const int *axes, int n_axes, double theta,
                     float *cos_out, float *sin_out) {
    int half = 0;
    for (int a = 0; a < n_axes; a++) half += axes[a] / 2;
    for (int64_t s = 0; s < n_tokens; s++) {
        int i = 0;
        for (int a = 0; a < n_axes; a++) {
            double pos = ids[s * n_axes + a];
            for (int j = 0; j < axes[a] / 2; j++, i++) {
                double freq = 1.0 / pow(theta, (double)(2 * j) / axes[a]);
                double ang = pos * freq;
                cos_out[s * half + i] = (float)cos(ang);
                sin_out[s * half + i] = (float)sin(ang);
            }
        }
    }
}

void kiln_rope_qwen3(int64_t n_tokens, int head_dim, float theta, float *cos_out, float *sin_out) {
    int half = head_dim / 2;
    for (int64_t p = 0; p < n_tokens; p++) {
        for (int j = 0; j < half; j++) {
            float inv = 1.0f / powf(theta, (float)(2 * j) / (float)head_dim);
            float ang = (float)p * inv;
            cos_out[p * half + j] = cosf(ang);
            sin_out[p * half + j] = sinf(ang);
        }
    }
}

void kiln_flux2_text_ids(int64_t n_txt, int32_t *ids) {
    for (int64_t j = 0; j < n_txt; j++) {
        ids[4 * j + 0] = 0;
        ids[4 * j + 1] = 0;
        ids[4 * j + 2] = 0;
        ids[4 * j + 3] = (int32_t)j;
    }
}

void kiln_flux2_image_ids(int h, int w, int32_t *ids) {
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            int32_t *p = ids + 4 * ((int64_t)y * w + x);
            p[0] = 0;
            p[1] = y;
            p[2] = x;
            p[3] = 0;
        }
}

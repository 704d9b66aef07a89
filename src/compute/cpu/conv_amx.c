/* conv_amx.c - 3x3 / 1x1 stride-1 convolution as an implicit GEMM on AMX tiles (FAST, bf16 weights).
 *
 * No im2col: the input is converted once per band of rows into bf16 with channel pairs interleaved and the
 * padding written as zeros - layout [row][Ci/2][Wp][2] - so that for a tap (ky, kx) the B tile "32 channels x
 * 16 output pixels" is simply 16 rows of 64 contiguous bytes, Wp*4 bytes apart, read in place. The weights are
 * rearranged per call to [tap][Co][Ci] (a transient copy of at most Co*Ci*9 bf16 - 4.7 MB for the VAE's
 * largest conv - so an A tile "16 output channels x 32 input channels" is 16 contiguous rows). A C tile is
 * 16 output channels x 16 pixels of one output row: 16 runs of 64 bytes in the NCHW output, stored directly.
 * Requirements (else conv2d.c's im2col path runs): Ci % 32 == 0, Co % 32 == 0, Wo % 32 == 0, stride 1. */
#include <immintrin.h>

#include "compute/cpu/conv.h"

#define TARGET __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16")))

typedef struct amx_cfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_cfg;
/* GCC's _tile_loadconfig declares an 8-byte read only (see gemm_amx.c); name the whole struct. */
static inline void amx_load_config(const amx_cfg *c) { __asm__ volatile("ldtilecfg %0" ::"m"(*c)); }

bool cpu_conv_amx_ok(const cpu_conv *c) {
    return c->tier >= KILN_CPU_AMX && c->fast && c->stride == 1 && c->ci % 32 == 0 && c->co % 32 == 0 &&
           c->wo % 32 == 0 && (c->k == 3 || c->k == 1);
}

/* weights [Co][Ci][k][k] -> [tap][Co][Ci], output channels [co0, co1) */
TARGET void cpu_conv_amx_pack_w(const cpu_conv *c, uint16_t *wp, int64_t co0, int64_t co1) {
    const int64_t taps = c->k * c->k;
    const uint16_t *w = c->w;
    for (int64_t o = co0; o < co1; o++)
        for (int64_t i = 0; i < c->ci; i++)
            for (int64_t t = 0; t < taps; t++) wp[(t * c->co + o) * c->ci + i] = w[(o * c->ci + i) * taps + t];
}

/* input rows of the band: packed row r = input row iy0 + r (zeros outside the image), for r in [r0, r1) */
TARGET void cpu_conv_amx_pack_x(const cpu_conv *c, uint16_t *xp, const float *x, int64_t iy0, int64_t r0, int64_t r1) {
    const int64_t wp = c->w_in + c->pad_b + c->pad_e, ci2 = c->ci / 2;
    const __m512i inter = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
                                           6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t iy = iy0 + r;
        for (int64_t cp = 0; cp < ci2; cp++) {
            uint32_t *dst = (uint32_t *)(xp + ((r * ci2 + cp) * wp) * 2);
            if (iy < 0 || iy >= c->h) {
                memset(dst, 0, (size_t)wp * 4);
                continue;
            }
            const float *a = x + ((2 * cp) * c->h + iy) * c->w_in, *b = a + c->h * c->w_in;
            for (int64_t px = 0; px < c->pad_b; px++) dst[px] = 0;
            int64_t i = 0;
            for (; i + 16 <= c->w_in; i += 16) {
                __m512i ab = _mm512_permutexvar_epi16(
                    inter, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(b + i), _mm512_loadu_ps(a + i)));
                _mm512_storeu_si512(dst + c->pad_b + i, ab);
            }
            for (; i < c->w_in; i++)
                dst[c->pad_b + i] = (uint32_t)f32_to_bf16(a[i]) | (uint32_t)f32_to_bf16(b[i]) << 16;
            for (int64_t px = c->pad_b + c->w_in; px < wp; px++) dst[px] = 0;
        }
    }
}

/* Output row oy (band row oy - oy0 reads packed rows oy - oy0 + ky), output channels [co0, co0 + 32). */
TARGET void cpu_conv_amx_row(const cpu_conv *c, const uint16_t *xp, const uint16_t *wpk, int64_t oy, int64_t oy0,
                             int64_t co0, float *y) {
    amx_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) cfg.colsb[t] = 64, cfg.rows[t] = 16;
    amx_load_config(&cfg);
    const int64_t wp = c->w_in + c->pad_b + c->pad_e, ci2 = c->ci / 2, plane = c->ho * c->wo;
    const int64_t astride = c->ci * 2, bstride = wp * 4;
    float *yrow = y + co0 * plane + oy * c->wo;
    for (int64_t ox = 0; ox < c->wo; ox += 32) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (int64_t ky = 0; ky < c->k; ky++)
            for (int64_t kx = 0; kx < c->k; kx++) {
                const uint16_t *a0 = wpk + ((ky * c->k + kx) * c->co + co0) * c->ci, *a1 = a0 + 16 * c->ci;
                const uint16_t *b0 = xp + (((oy - oy0 + ky) * ci2) * wp + ox + kx) * 2, *b1 = b0 + 32;
                for (int64_t cc = 0; cc < c->ci; cc += 32) {
                    _tile_loadd(4, a0 + cc, astride);
                    _tile_loadd(6, b0 + cc / 2 * wp * 2, bstride);
                    _tile_dpbf16ps(0, 4, 6);
                    _tile_loadd(7, b1 + cc / 2 * wp * 2, bstride);
                    _tile_dpbf16ps(1, 4, 7);
                    _tile_loadd(5, a1 + cc, astride);
                    _tile_dpbf16ps(2, 5, 6);
                    _tile_dpbf16ps(3, 5, 7);
                }
            }
        _tile_stored(0, yrow + ox, plane * 4);
        _tile_stored(1, yrow + ox + 16, plane * 4);
        _tile_stored(2, yrow + 16 * plane + ox, plane * 4);
        _tile_stored(3, yrow + 16 * plane + ox + 16, plane * 4);
    }
    _tile_release();
    if (c->bias.p)
        for (int64_t o = 0; o < 32; o++) {
            __m512 bv = _mm512_set1_ps(param_at(&c->bias, co0 + o));
            float *r = yrow + o * plane;
            for (int64_t ox = 0; ox < c->wo; ox += 16) _mm512_storeu_ps(r + ox, _mm512_add_ps(_mm512_loadu_ps(r + ox), bv));
        }
}

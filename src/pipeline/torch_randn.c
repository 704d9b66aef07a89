/* torch_randn.c - torch.randn's CPU float32 stream (see torch_randn.h). Built with -ffp-contract=off
 * (CMakeLists.txt): the compiler fuses nothing, and the fused multiply-adds below are the ones gcc forms in
 * torch's AVX2 build of avx_mathfun.h (-mfma: a product feeding one sum becomes one fmaf), found by comparing
 * against torch bit for bit (tests/unit/test_pipeline_torch_randn.c); every other step is rounded on its own. */
#include "pipeline/torch_randn.h"

#include <math.h>
#include <string.h>

#include "base/alloc.h"

/* ---- mt19937 (the 32-bit Mersenne Twister, as std::mt19937 and torch's at::mt19937 define it) ------------- */

enum { MT_N = 624, MT_M = 397 };

typedef struct mt19937 {
    uint32_t s[MT_N];
    int i;
} mt19937;

static void mt_seed(mt19937 *m, uint32_t seed) {
    m->s[0] = seed;
    for (int i = 1; i < MT_N; i++) m->s[i] = 1812433253u * (m->s[i - 1] ^ (m->s[i - 1] >> 30)) + (uint32_t)i;
    m->i = MT_N;
}

static uint32_t mt_next(mt19937 *m) {
    if (m->i >= MT_N) {
        for (int k = 0; k < MT_N; k++) {
            uint32_t y = (m->s[k] & 0x80000000u) | (m->s[(k + 1) % MT_N] & 0x7fffffffu);
            m->s[k] = m->s[(k + MT_M) % MT_N] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
        }
        m->i = 0;
    }
    uint32_t y = m->s[m->i++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

/* at::uniform_real_distribution<float>(0, 1): the low 24 bits of one draw, times 2^-24 (exact in float). */
static float mt_uniform(mt19937 *m) { return (float)(mt_next(m) & 0xffffffu) * 0x1.0p-24f; }

/* ---- the AVX2 kernel's Cephes polynomials, one lane at a time ------------------------------------------- */

static uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* log256_ps for one lane: x is in (0, 1] here (1 - u), so the NaN/zero lanes of the vector code never occur. */
static float cephes_logf(float x) {
    x = fmaxf(x, u2f(0x00800000u)); /* the smallest normal, as the vector code clamps */
    uint32_t bits = f2u(x);
    float e = (float)((int32_t)(bits >> 23) - 0x7f) + 1.0f;
    x = u2f((bits & ~0x7f800000u) | f2u(0.5f)); /* mantissa in [0.5, 1) */
    bool small = x < 0.707106781186547524f;     /* sqrt(1/2) */
    float tmp = small ? x : 0.0f;
    x = x - 1.0f;
    e = e - (small ? 1.0f : 0.0f);
    x = x + tmp;
    float z = x * x;
    static const float p[9] = {7.0376836292E-2f, -1.1514610310E-1f, 1.1676998740E-1f,
                               -1.2420140846E-1f, +1.4249322787E-1f, -1.6668057665E-1f,
                               +2.0000714765E-1f, -2.4999993993E-1f, +3.3333331174E-1f};
    float y = p[0];
    for (int k = 1; k < 9; k++) y = fmaf(y, x, p[k]);
    y = y * x;
    y = fmaf(y, z, e * -2.12194440e-4f);
    y = y - z * 0.5f; /* exact products from here on: fused or not, the same */
    x = x + y;
    x = x + e * 0.693359375f;
    return x;
}

/* sincos256_ps for one lane: Cody-Waite reduction by pi/4 in three parts, then the octant's polynomials. */
static void cephes_sincosf(float x, float *s, float *c) {
    uint32_t sign_sin = f2u(x) & 0x80000000u;
    x = fabsf(x);
    float y = x * 1.27323954473516f; /* 4 / pi */
    int32_t j = (int32_t)y;          /* truncation, as cvttps */
    j = (j + 1) & ~1;
    y = (float)j;
    uint32_t swap_sin = (uint32_t)(j & 4) << 29;
    bool poly_sin = (j & 2) == 0;                          /* this octant: sin from the sine polynomial */
    uint32_t sign_cos = (uint32_t)(~(j - 2) & 4) << 29;
    x = fmaf(y, -0.78515625f, x);
    x = fmaf(y, -2.4187564849853515625e-4f, x);
    x = fmaf(y, -3.77489497744594108e-8f, x);
    sign_sin ^= swap_sin;
    float z = x * x;
    float yc = 2.443315711809948E-005f;
    yc = fmaf(yc, z, -1.388731625493765E-003f);
    yc = fmaf(yc, z, 4.166664568298827E-002f);
    yc = yc * z;
    yc = fmaf(yc, z, -(z * 0.5f));
    yc = yc + 1.0f;
    float ys = -1.9515295891E-4f;
    ys = fmaf(ys, z, 8.3321608736E-3f);
    ys = fmaf(ys, z, -1.6666654611E-1f);
    ys = ys * z;
    ys = fmaf(ys, x, x);
    /* the vector code blends with masks and subtracts the chosen lane back out: (a - a) + b is b exactly */
    float sin_v = poly_sin ? ys : yc;
    float cos_v = poly_sin ? yc : ys;
    *s = u2f(f2u(sin_v + 0.0f) ^ sign_sin);
    *c = u2f(f2u(cos_v + 0.0f) ^ sign_cos);
}

/* ---- Box-Muller over one block of 16 uniforms -------------------------------------------------------------- */

static void normal16(float *d, kiln_randn_kernel kernel) {
    for (int j = 0; j < 8; j++) {
        float u1 = 1.0f - d[j], u2 = d[j + 8];
        if (kernel == KILN_RANDN_AVX2) {
            float r = sqrtf(-2.0f * cephes_logf(u1));
            float th = (float)(2.0 * M_PI) * u2;
            float sn, cs;
            cephes_sincosf(th, &sn, &cs);
            d[j] = r * cs;
            d[j + 8] = r * sn;
        } else {
            float r = sqrtf(-2.0f * logf(u1));
            float th = (float)(2.0 * M_PI * (double)u2);
            d[j] = r * cosf(th);
            d[j + 8] = r * sinf(th);
        }
    }
}

kiln_status kiln_torch_randn(float *out, size_t n, uint64_t seed, kiln_randn_kernel kernel, kiln_err *err) {
    if (n < 16) return KILN_FAIL(err, KILN_E_INVALID, "torch.randn of %zu values: fewer than 16 take torch's other path", n);
    mt19937 m;
    mt_seed(&m, (uint32_t)seed); /* torch.manual_seed keeps the low 32 bits for the CPU generator */
    for (size_t i = 0; i < n; i++) out[i] = mt_uniform(&m);
    for (size_t i = 0; i + 16 <= n; i += 16) normal16(out + i, kernel);
    if (n % 16) { /* torch redraws the last 16 values and transforms them again */
        float *t = out + n - 16;
        for (int i = 0; i < 16; i++) t[i] = mt_uniform(&m);
        normal16(t, kernel);
    }
    return KILN_OK;
}

kiln_status kiln_comfy_noise(float *out, int batch, int channels, int h16, int w16, bool flux1, uint64_t seed,
                             kiln_err *err) {
    if (batch < 1 || channels < 1 || h16 < 1 || w16 < 1 || (flux1 && channels % 4))
        return KILN_FAIL(err, KILN_E_INVALID, "noise of %dx%dx%dx%d", batch, channels, h16, w16);
    size_t plane = (size_t)h16 * (size_t)w16, n = (size_t)batch * (size_t)channels * plane;
    if (!flux1) return kiln_torch_randn(out, n, seed, KILN_RANDN_AVX2, err);
    size_t C = (size_t)channels / 4; /* ComfyUI's latent channels at /8 (16) */
    float *grid = kiln_malloc(n * sizeof *grid);
    if (!grid) return KILN_FAIL(err, KILN_E_NOMEM, "out of memory for %zu noise values", n);
    kiln_status s = kiln_torch_randn(grid, n, seed, KILN_RANDN_AVX2, err);
    size_t W = (size_t)w16 * 2, H = (size_t)h16 * 2;
    for (size_t b = 0; b < (size_t)batch && s == KILN_OK; b++)
        for (size_t c = 0; c < C; c++)
            for (size_t y = 0; y < H; y++)
                for (size_t x = 0; x < W; x++) {
                    size_t ch = c * 4 + (y & 1) * 2 + (x & 1);
                    out[(b * C * 4 + ch) * plane + (y / 2) * (size_t)w16 + x / 2] = grid[((b * C + c) * H + y) * W + x];
                }
    kiln_free(grid);
    return s;
}

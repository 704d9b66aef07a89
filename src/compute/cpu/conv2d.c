/* conv2d.c - 2-D convolution (NCHW, k = 1 or 3, stride 1 or 2, separate begin/end padding) as im2col + the
 * matmul core. Each task takes CONV_PIX (CONV_PIX_PACKED) output pixels of one image, gathers their receptive
 * fields into a per-thread [pixels, Ci*k*k] matrix (zeros in the padding; in the packed kernel's x layout when
 * that kernel runs) and multiplies it by the weight viewed as [Co, Ci*k*k] (its stored layout), writing the
 * NCHW output directly (pixel stride 1, channel stride Ho*Wo). On AMX most convs take the implicit GEMM of
 * conv_amx.c instead; narrow outputs take the direct path. */
#include "compute/cpu/conv.h"
#include "compute/cpu/ew_kernels.h"
#include "compute/cpu/gemm.h"

#define CONV_PIX 64         /* output pixels per im2col task (dot-tile and AMX GEMM paths) */
#define CONV_PIX_PACKED 192 /* ... for the packed FMA kernel: each task widens the weight into its panels once per
                             * 128 output channels and K slice, so more pixels share that cost (a multiple of 12) */
#define CONV_DIRECT_MAX_CO 16 /* narrower stride-1 outputs take the direct path */
#define CONV_BAND_BYTES ((size_t)8 << 20) /* packed input rows per band (AMX path) */

typedef struct amx_job {
    cpu_conv c;
    uint16_t *wp, *xp;
    const float *x;
    float *y;
    int64_t oy0, rows, iy0;
} amx_job;

static void amx_pack_w_task(void *ctx, size_t i, int thread) {
    amx_job *j = ctx;
    cpu_conv_amx_pack_w(&j->c, j->wp, (int64_t)i * 32, (int64_t)i * 32 + 32);
}
static void amx_pack_x_task(void *ctx, size_t i, int thread) {
    amx_job *j = ctx;
    cpu_conv_amx_pack_x(&j->c, j->xp, j->x, j->iy0, (int64_t)i, (int64_t)i + 1);
}
static void amx_row_task(void *ctx, size_t i, int thread) {
    amx_job *j = ctx;
    int64_t cb = (int64_t)i / j->rows, r = (int64_t)i % j->rows; /* neighbouring tasks share weights */
    cpu_conv_amx_row(&j->c, j->xp, j->wp, j->oy0 + r, j->oy0, cb * 32, j->y);
}

/* The implicit-GEMM AMX path (conv_amx.c): weights rearranged once, then bands of output rows. */
static kiln_status conv_amx(kiln_cpu_backend *cb, const cpu_conv *c, int64_t n_img, const float *x, float *y,
                            kiln_err *err) {
    const int64_t wp = c->w_in + c->pad_b + c->pad_e;
    const size_t row_bytes = (size_t)(c->ci * wp * 2), w_bytes = (size_t)(c->co * c->ci * c->k * c->k * 2);
    int64_t band = (int64_t)(CONV_BAND_BYTES / row_bytes) - (c->k - 1);
    if (band < 1) band = 1;
    if (band > c->ho) band = c->ho;
    size_t xp_bytes = row_bytes * (size_t)(band + c->k - 1);
    void *s;
    KILN_TRY(cpu_scratch(cb, ((w_bytes + 63) & ~(size_t)63) + xp_bytes, &s, err));
    amx_job j = {.c = *c, .wp = s, .xp = (uint16_t *)((char *)s + ((w_bytes + 63) & ~(size_t)63))};
    kiln_pool_run(cb->pool, (size_t)(c->co / 32), amx_pack_w_task, &j);
    for (int64_t n = 0; n < n_img; n++) {
        j.x = x + n * c->ci * c->h * c->w_in;
        j.y = y + n * c->co * c->ho * c->wo;
        for (int64_t oy0 = 0; oy0 < c->ho; oy0 += band) {
            j.oy0 = oy0;
            j.rows = c->ho - oy0 < band ? c->ho - oy0 : band;
            j.iy0 = oy0 - c->pad_b;
            kiln_pool_run(cb->pool, (size_t)(j.rows + c->k - 1), amx_pack_x_task, &j);
            kiln_pool_run(cb->pool, (size_t)(c->co / 32 * j.rows), amx_row_task, &j);
        }
    }
    return KILN_OK;
}

/* The direct path, for stride-1 convs with few output channels (the VAE's conv_out: 128 -> 3 channels at full
 * resolution). im2col + GEMM would gather Ci*k*k values per pixel to feed a GEMM only Co wide - at 1024x1024
 * that is 1.2 G scalar gathers for 3.6 GFLOP. Here a task is one output row of one image: its Co rows (in L1)
 * accumulate, for every input channel and tap, a whole shifted input row times one weight (ew axpy, vectorised
 * per tier). FAST rounds each input row to bf16 once (into the thread's row buffer), as the other paths round
 * their operands; sums are f32 either way. */
typedef struct direct_job {
    const cpu_conv *c;
    const float *x;
    float *y;
    const cpu_ew_kernels *ew;
    float *rows; /* FAST: one rounded input row per thread, row_stride floats apart */
    int64_t row_stride;
} direct_job;

static void direct_task(void *ctx, size_t t, int thread) {
    const direct_job *j = ctx;
    const cpu_conv *c = j->c;
    const int64_t img = (int64_t)t / c->ho, oy = (int64_t)t % c->ho, taps = c->k * c->k;
    const float *x = j->x + img * c->ci * c->h * c->w_in;
    float *y = j->y + (img * c->co * c->ho + oy) * c->wo, *rounded = j->rows + thread * j->row_stride;
    const int64_t plane = c->ho * c->wo;
    for (int64_t o = 0; o < c->co; o++) {
        const float b = c->bias.p ? param_at(&c->bias, o) : 0.0f;
        for (int64_t ox = 0; ox < c->wo; ox++) y[o * plane + ox] = b;
    }
    for (int64_t i = 0; i < c->ci; i++)
        for (int64_t ky = 0; ky < c->k; ky++) {
            const int64_t iy = oy + ky - c->pad_b;
            if (iy < 0 || iy >= c->h) continue;
            const float *xr = x + (i * c->h + iy) * c->w_in;
            if (c->fast) {
                j->ew->round_bf16(rounded, xr, c->w_in);
                xr = rounded;
            }
            for (int64_t kx = 0; kx < c->k; kx++) {
                /* output columns whose input column ox + kx - pad lies inside the row */
                const int64_t lo = c->pad_b - kx > 0 ? c->pad_b - kx : 0;
                const int64_t hi = c->w_in + c->pad_b - kx < c->wo ? c->w_in + c->pad_b - kx : c->wo;
                if (hi <= lo) continue;
                for (int64_t o = 0; o < c->co; o++) {
                    const int64_t wi = (o * c->ci + i) * taps + ky * c->k + kx;
                    const float wv = c->w_bf16 ? bf16_to_f32(((const uint16_t *)c->w)[wi]) : ((const float *)c->w)[wi];
                    j->ew->axpy(y + o * plane + lo, xr + lo + kx - c->pad_b, wv, hi - lo);
                }
            }
        }
}

typedef struct conv_job {
    cpu_gemm g; /* template: w, bias, tier, fast */
    const float *x;
    float *y;
    int64_t ci, h, w, co, ho, wo, k, stride, pad, tiles_per_img, pix;
    char *scratch;
    size_t per_thread, ws_offset; /* ws_offset: the AMX workspace within a thread's scratch */
} conv_job;

/* Writes element (k index e, pixel i of the group) of a packed x group: f32 [K][mr], or for the bf16 variant
 * (dot) bf16 pairs [K/2][mr][2]. */
static inline void put_packed(float *dst, bool dot, int mr, int64_t e, int i, float v) {
    if (dot) ((uint16_t *)dst)[((e >> 1) * mr + i) * 2 + (e & 1)] = f32_to_bf16(v);
    else dst[e * mr + i] = v;
}

/* im2col for the packed kernel, straight into its x layout: groups of mr pixels, [K][mr] each (bf16 pairs
 * [K/2][mr] for the bf16 variant), rounded to bf16 for FAST, the last group padded with zero pixels. Within a
 * group, one (ci, ky, kx) entry of mr pixels of the same output row is a run of the input row (stride 1): copied
 * as such when it lies inside the image, so the common case is a short contiguous copy instead of mr
 * bounds-checked gathers. */
static void gather_packed(const conv_job *j, const float *x, float *col, int64_t p0, int64_t np, int64_t K) {
    const int mr = cpu_gemm_packed_mr(j->g.tier);
    const bool round = j->g.fast, dot = j->g.dot;
    const int64_t kw = dot ? (K + 1) / 2 : K; /* words per pixel row of a group */
    for (int64_t g0 = 0; g0 < np; g0 += mr) {
        float *dst = col + g0 * kw;
        const int n = np - g0 < mr ? (int)(np - g0) : mr;
        int64_t oy[GEMM_AVX512_MR], ox[GEMM_AVX512_MR];
        for (int i = 0; i < n; i++) oy[i] = (p0 + g0 + i) / j->wo, ox[i] = (p0 + g0 + i) % j->wo;
        const bool run = n == mr && j->stride == 1 && oy[mr - 1] == oy[0];
        int64_t e = 0;
        for (int64_t ci = 0; ci < j->ci; ci++)
            for (int64_t ky = 0; ky < j->k; ky++)
                for (int64_t kx = 0; kx < j->k; kx++, e++) {
                    const int64_t iy0 = oy[0] * j->stride + ky - j->pad, ix0 = ox[0] + kx - j->pad;
                    if (run && iy0 >= 0 && iy0 < j->h && ix0 >= 0 && ix0 + mr <= j->w) {
                        const float *src = x + (ci * j->h + iy0) * j->w + ix0;
                        if (dot)
                            for (int i = 0; i < mr; i++) put_packed(dst, true, mr, e, i, src[i]);
                        else if (round)
                            for (int i = 0; i < mr; i++) dst[e * mr + i] = round_bf16(src[i]);
                        else
                            memcpy(dst + e * mr, src, sizeof(float) * (size_t)mr);
                        continue;
                    }
                    for (int i = 0; i < mr; i++) {
                        float v = 0.0f;
                        if (i < n) {
                            const int64_t iy = oy[i] * j->stride + ky - j->pad, ix = ox[i] * j->stride + kx - j->pad;
                            if (iy >= 0 && iy < j->h && ix >= 0 && ix < j->w) v = x[(ci * j->h + iy) * j->w + ix];
                        }
                        put_packed(dst, dot, mr, e, i, round ? round_bf16(v) : v);
                    }
                }
        if (dot && K % 2) /* the last pair's high half */
            for (int i = 0; i < mr; i++) put_packed(dst, true, mr, K, i, 0.0f);
    }
}

static void conv_task(void *ctx, size_t t, int thread) {
    const conv_job *j = ctx;
    int64_t img = (int64_t)t / j->tiles_per_img, p0 = ((int64_t)t % j->tiles_per_img) * j->pix;
    int64_t np = j->ho * j->wo - p0 < j->pix ? j->ho * j->wo - p0 : j->pix, K = j->ci * j->k * j->k;
    float *col = (float *)(j->scratch + (size_t)thread * j->per_thread);
    const float *x = j->x + img * j->ci * j->h * j->w;
    const bool packed = j->g.packed;
    if (packed) {
        gather_packed(j, x, col, p0, np, K);
    } else {
        for (int64_t p = 0; p < np; p++) {
            int64_t oy = (p0 + p) / j->wo, ox = (p0 + p) % j->wo;
            float *c = col + p * K;
            for (int64_t ci = 0; ci < j->ci; ci++)
                for (int64_t ky = 0; ky < j->k; ky++) {
                    int64_t iy = oy * j->stride + ky - j->pad;
                    for (int64_t kx = 0; kx < j->k; kx++) {
                        int64_t ix = ox * j->stride + kx - j->pad;
                        *c++ = iy >= 0 && iy < j->h && ix >= 0 && ix < j->w ? x[(ci * j->h + iy) * j->w + ix] : 0.0f;
                    }
                }
        }
    }
    cpu_gemm g = j->g;
    g.M = np, g.K = K;
    g.x = col, g.ldx = K;
    g.y = j->y + img * j->co * j->ho * j->wo + p0;
    if (packed) {
        g.ws = (char *)col + j->ws_offset;
        for (int64_t n0 = 0; n0 < g.N; n0 += GEMM_PACKED_BN)
            cpu_gemm_block_packed(&g, 0, np, n0, n0 + GEMM_PACKED_BN < g.N ? n0 + GEMM_PACKED_BN : g.N);
        return;
    }
    if (g.fast) {
        uint16_t *xb = (uint16_t *)(col + CONV_PIX * K);
        if (g.amx) cpu_gemm_pack_amx(xb, col, K, np, K, 0, (np + 31) & ~31);
        else
            for (int64_t i = 0; i < np * K; i++) xb[i] = f32_to_bf16(col[i]);
        g.xb = xb, g.ldxb = K;
        g.ws = (char *)col + j->ws_offset;
    }
    cpu_gemm_block(&g, 0, np, 0, g.N);
}

kiln_status cpu_conv2d(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, const kiln_tensor *w,
                       const kiln_tensor *bias, int stride, int pad_begin, int pad_end, kiln_err *err) {
    kiln_cpu_backend *cb = cpu_be(be);
    int64_t xd[4], yd[4];
    KILN_TRY(cpu_as_nchw(x, "conv2d", "x", xd, err));
    KILN_TRY(cpu_as_nchw(y, "conv2d", "y", yd, err));
    if (!w || w->backend != KILN_BACKEND_CPU || w->ndim != 4 || !kiln_tensor_is_contiguous(w) ||
        (w->dtype != KILN_DT_BF16 && w->dtype != KILN_DT_F32))
        return KILN_FAIL(err, KILN_E_INVALID, "conv2d: w must be a contiguous 4-D bf16 or f32 [Co, Ci, k, k] weight");
    int64_t co = w->shape[0], ci = w->shape[1], k = w->shape[2];
    if (w->shape[3] != k || (k != 1 && k != 3))
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "conv2d: kernel %lldx%lld (only 1x1 and 3x3)", (long long)k,
                         (long long)w->shape[3]);
    if (stride != 1 && stride != 2) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "conv2d: stride %d (only 1 or 2)", stride);
    if (pad_begin < 0 || pad_end < 0 || pad_begin > 2 || pad_end > 2)
        return KILN_FAIL(err, KILN_E_INVALID, "conv2d: padding %d/%d out of range 0..2", pad_begin, pad_end);
    if (xd[1] != ci)
        return KILN_FAIL(err, KILN_E_INVALID, "conv2d: x has %lld channels, the weight expects %lld", (long long)xd[1],
                         (long long)ci);
    int64_t hp = xd[2] + pad_begin + pad_end, wp = xd[3] + pad_begin + pad_end;
    if (hp < k || wp < k) return KILN_FAIL(err, KILN_E_INVALID, "conv2d: the image is smaller than the kernel");
    int64_t ho = (hp - k) / stride + 1, wo = (wp - k) / stride + 1;
    if (yd[0] != xd[0] || yd[1] != co || yd[2] != ho || yd[3] != wo)
        return KILN_FAIL(err, KILN_E_INVALID, "conv2d: y must be [%lld, %lld, %lld, %lld], got [%lld, %lld, %lld, %lld]",
                         (long long)xd[0], (long long)co, (long long)ho, (long long)wo, (long long)yd[0],
                         (long long)yd[1], (long long)yd[2], (long long)yd[3]);
    if (x->data == y->data) return KILN_FAIL(err, KILN_E_INVALID, "conv2d: y must not alias x");
    conv_job j = {.x = x->data, .y = y->data, .ci = ci, .h = xd[2], .w = xd[3], .co = co, .ho = ho, .wo = wo,
                  .k = k, .stride = stride, .pad = pad_begin};
    cpu_gemm *g = &j.g;
    g->N = co, g->K = ci * k * k;
    g->w = w->data, g->ldw = g->K, g->w_bf16 = w->dtype == KILN_DT_BF16;
    g->ys_m = 1, g->ys_n = ho * wo;
    g->tier = cb->tier;
    g->epi = KILN_EPI_NONE;
    if (bias) KILN_TRY(cpu_as_param(bias, co, "conv2d", "bias", &g->bias, err));
    g->fast = be->precision == KILN_PREC_FAST && g->w_bf16;
    g->amx = cpu_gemm_amx_ok(g);
    if (xd[0] == 0 || ho * wo == 0 || co == 0) return KILN_OK;
    cpu_conv cv = {.ci = ci, .co = co, .h = xd[2], .w_in = xd[3], .ho = ho, .wo = wo, .k = k, .stride = stride,
                   .pad_b = pad_begin, .pad_e = pad_end, .w = w->data, .w_bf16 = g->w_bf16, .fast = g->fast,
                   .bias = g->bias, .tier = cb->tier};
    if (cpu_conv_amx_ok(&cv)) return conv_amx(cb, &cv, xd[0], x->data, y->data, err);
    if (stride == 1 && co <= CONV_DIRECT_MAX_CO) {
        direct_job dj = {.c = &cv, .x = x->data, .y = y->data, .ew = cpu_ew_for(cb->tier),
                         .row_stride = (xd[3] + 15) & ~(int64_t)15};
        void *rows;
        KILN_TRY(cpu_scratch(cb, sizeof(float) * (size_t)dj.row_stride * (size_t)cb->n_threads, &rows, err));
        dj.rows = rows;
        kiln_pool_run(cb->pool, (size_t)(xd[0] * ho), direct_task, &dj);
        return KILN_OK;
    }
    cpu_gemm_select_packed(g, cb->prefer_bf16_dot);
    if (g->packed) { /* per thread: the packed pixel rows, then the packed kernel's workspace */
        j.pix = CONV_PIX_PACKED;
        j.ws_offset = (cpu_gemm_packed_x_floats(CONV_PIX_PACKED, g->K, cb->tier) * 4 + 63) & ~(size_t)63;
        j.per_thread = j.ws_offset + cpu_gemm_packed_ws_bytes();
    } else {
        /* per thread: CONV_PIX f32 rows of K, then their bf16 copy (AMX pack rounds rows to 32: CONV_PIX is 64),
         * then the AMX kernel's workspace */
        j.pix = CONV_PIX;
        j.ws_offset = ((size_t)CONV_PIX * (size_t)g->K * 6 + 63) & ~(size_t)63;
        j.per_thread = j.ws_offset + (g->amx ? cpu_gemm_amx_ws_bytes(CONV_PIX, g->K) : 0);
    }
    void *s;
    KILN_TRY(cpu_scratch(cb, j.per_thread * (size_t)cb->n_threads, &s, err));
    j.scratch = s;
    j.tiles_per_img = (ho * wo + j.pix - 1) / j.pix;
    kiln_pool_run(cb->pool, (size_t)(xd[0] * j.tiles_per_img), conv_task, &j);
    return KILN_OK;
}

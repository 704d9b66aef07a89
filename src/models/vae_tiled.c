/* vae_tiled.c - tiled FLUX.2 VAE decode (see vae_tiled.h for the tiling and the blend). */
#include <string.h>

#include "base/alloc.h"
#include "models/vae_tiled.h"
#include "models/views.h"

kiln_status kiln_vae_tiles_plan(const kiln_flux2_vae *m, int h, int w, int tile, kiln_vae_tiles *t, kiln_err *err) {
    if (tile < 8 || tile % 4)
        return KILN_FAIL(err, KILN_E_INVALID, "VAE tiling: tile %d latent pixels is not a multiple of 4 >= 8", tile);
    if (h <= 0 || w <= 0) return KILN_FAIL(err, KILN_E_INVALID, "VAE tiling: empty latent %dx%d", w, h);
    memset(t, 0, sizeof *t);
    t->h = h;
    t->w = w;
    t->tile = tile;
    t->stride = tile * 3 / 4; /* diffusers: int(T * (1 - 0.25)) */
    t->scale = kiln_flux2_vae_scale(m);
    int S = tile * t->scale;
    t->blend = S / 4;          /* int(S * 0.25) */
    t->limit = S - t->blend;   /* = stride * scale since T % 4 == 0 */
    t->ny = (h + t->stride - 1) / t->stride;
    t->nx = (w + t->stride - 1) / t->stride;
    return KILN_OK;
}

void kiln_vae_tile_rect(const kiln_vae_tiles *t, int i, int j, int *y0, int *x0, int *th, int *tw) {
    *y0 = i * t->stride;
    *x0 = j * t->stride;
    *th = t->h - *y0 < t->tile ? t->h - *y0 : t->tile;
    *tw = t->w - *x0 < t->tile ? t->w - *x0 : t->tile;
}

size_t kiln_vae_tiles_workspace(const kiln_flux2_vae *m, const kiln_vae_tiles *t, kiln_dtype dt, size_t *host_bytes) {
    size_t T = (size_t)t->tile, S = T * t->scale;
    if (host_bytes) /* one tile + the strips of a row of tiles above + the left strip */
        *host_bytes = (3 * S * S + (size_t)t->nx * 3 * t->blend * S + 3 * S * t->blend) * sizeof(float);
    return kiln_flux2_vae_workspace(m, t->tile, t->tile, dt) + ((size_t)m->z_ch * T * T + 3 * S * S) * sizeof(float);
}

kiln_status kiln_vae_decode_one_tile(const kiln_flux2_vae *m, kiln_backend *be, const kiln_vae_tiles *t,
                                     const float *z, int i, int j, float *zt, float *pt, float *out, kiln_err *err) {
    const kiln_ops *op = be->ops;
    int y0, x0, th, tw;
    kiln_vae_tile_rect(t, i, j, &y0, &x0, &th, &tw);
    /* the tile's latent: a strided [z, th, tw] view of z copied to a contiguous buffer */
    kiln_tensor src = kiln_tensor_make((float *)z + (size_t)y0 * t->w + x0, KILN_DT_F32, 3,
                                       (int64_t[]){m->z_ch, th, tw});
    src.stride[0] = (int64_t)t->h * t->w;
    src.stride[1] = t->w;
    src.stride[2] = 1;
    kiln_tensor dst = kiln_tensor_make(zt, KILN_DT_F32, 3, (int64_t[]){m->z_ch, th, tw});
    KILN_TRY(op->copy(be, &dst, &src, err));
    KILN_TRY(kiln_flux2_vae_decode(m, be, zt, th, tw, pt, err));
    return op->download(be, out, pt, (size_t)3 * th * tw * t->scale * t->scale * sizeof(float), err);
}

struct kiln_vae_blender {
    kiln_vae_tiles t;
    float *above;      /* per tile column j: [3, blend, S] the last rows of the blended tile above */
    int *above_rows;   /* per column: rows that tile had (its strip holds min(rows, blend) of them) */
    float *left;       /* [3, S, blend] the last columns of the blended tile to the left */
    int left_cols;
};

kiln_status kiln_vae_blender_open(const kiln_vae_tiles *t, kiln_vae_blender **out, kiln_err *err) {
    size_t S = (size_t)t->tile * t->scale;
    kiln_vae_blender *b = kiln_calloc(1, sizeof *b);
    if (b) {
        b->t = *t;
        b->above = kiln_malloc((size_t)t->nx * 3 * t->blend * S * sizeof(float));
        b->above_rows = kiln_calloc((size_t)t->nx, sizeof(int));
        b->left = kiln_malloc(3 * S * t->blend * sizeof(float));
    }
    if (!b || !b->above || !b->above_rows || !b->left) {
        kiln_vae_blender_close(b);
        return KILN_FAIL(err, KILN_E_NOMEM, "VAE tiling: out of memory for the blend strips");
    }
    *out = b;
    return KILN_OK;
}

void kiln_vae_blender_close(kiln_vae_blender *b) {
    if (!b) return;
    kiln_free(b->above);
    kiln_free(b->above_rows);
    kiln_free(b->left);
    kiln_free(b);
}

static int imin(int a, int b) { return a < b ? a : b; }

/* The weights of blend position y of e, as diffusers computes them: python doubles, then used in f32. */
static void ramp(int y, int e, float *wa, float *wb) {
    *wa = (float)(1.0 - (double)y / e);
    *wb = (float)((double)y / e);
}

void kiln_vae_blender_put(kiln_vae_blender *b, int i, int j, float *tile, float *img) {
    const kiln_vae_tiles *t = &b->t;
    int y0, x0, th, tw;
    kiln_vae_tile_rect(t, i, j, &y0, &x0, &th, &tw);
    int R = th * t->scale, C = tw * t->scale, S = t->tile * t->scale, bl = t->blend;
    size_t plane = (size_t)R * C;
    if (i > 0) { /* blend_v with the tile above (same width: same column) */
        int ar = b->above_rows[j], sr = imin(ar, bl), e = imin(imin(ar, R), bl);
        const float *strip = b->above + (size_t)j * 3 * bl * S;
        for (int c = 0; c < 3; c++)
            for (int y = 0; y < e; y++) {
                float wa, wb;
                ramp(y, e, &wa, &wb);
                const float *a = strip + ((size_t)c * bl + (size_t)(sr - e + y)) * S;
                float *r = tile + c * plane + (size_t)y * C;
                for (int x = 0; x < C; x++) r[x] = a[x] * wa + r[x] * wb;
            }
    }
    if (j > 0) { /* blend_h with the tile to the left (same height: same row) */
        int lc = b->left_cols, sc = imin(lc, bl), e = imin(imin(lc, C), bl);
        for (int c = 0; c < 3; c++)
            for (int y = 0; y < R; y++) {
                const float *a = b->left + ((size_t)c * S + y) * bl;
                float *r = tile + c * plane + (size_t)y * C;
                for (int x = 0; x < e; x++) {
                    float wa, wb;
                    ramp(x, e, &wa, &wb);
                    r[x] = a[sc - e + x] * wa + r[x] * wb;
                }
            }
    }
    /* keep this blended tile's bottom rows (for the tile below) and right columns (for the tile to the right) */
    int sr = imin(R, bl), sc = imin(C, bl);
    float *strip = b->above + (size_t)j * 3 * bl * S;
    for (int c = 0; c < 3; c++) {
        for (int y = 0; y < sr; y++)
            memcpy(strip + ((size_t)c * bl + y) * S, tile + c * plane + (size_t)(R - sr + y) * C, (size_t)C * 4);
        for (int y = 0; y < R; y++)
            memcpy(b->left + ((size_t)c * S + y) * bl, tile + c * plane + (size_t)y * C + (C - sc), (size_t)sc * 4);
    }
    b->above_rows[j] = R;
    b->left_cols = C;
    /* its top-left limit x limit pixels are its part of the image */
    int H = t->h * t->scale, W = t->w * t->scale, py = i * t->limit, px = j * t->limit;
    int kr = imin(R, t->limit), kc = imin(C, t->limit);
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < kr; y++)
            memcpy(img + ((size_t)c * H + py + y) * W + px, tile + c * plane + (size_t)y * C, (size_t)kc * 4);
}

kiln_status kiln_flux2_vae_decode_tiled(const kiln_flux2_vae *m, kiln_backend *be, const kiln_vae_tiles *t,
                                        const float *z, float *img, kiln_err *err) {
    const kiln_ops *op = be->ops;
    size_t T = (size_t)t->tile, S = T * t->scale;
    float *zt = op->alloc(be, (size_t)m->z_ch * T * T * sizeof(float));
    float *pt = op->alloc(be, 3 * S * S * sizeof(float));
    float *tile = kiln_malloc(3 * S * S * sizeof(float));
    kiln_vae_blender *b = NULL;
    kiln_status s = KILN_OK;
    if (!zt || !pt || !tile) s = KILN_FAIL(err, KILN_E_NOMEM, "VAE tiling: out of memory for a %zu-pixel tile", S);
    if (s == KILN_OK) s = kiln_vae_blender_open(t, &b, err);
    for (int i = 0; i < t->ny && s == KILN_OK; i++)
        for (int j = 0; j < t->nx && s == KILN_OK; j++) {
            s = kiln_vae_decode_one_tile(m, be, t, z, i, j, zt, pt, tile, err);
            if (s == KILN_OK) kiln_vae_blender_put(b, i, j, tile, img);
        }
    kiln_vae_blender_close(b);
    kiln_free(tile);
    if (zt) op->free(be, zt);
    if (pt) op->free(be, pt);
    return s;
}

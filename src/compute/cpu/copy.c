/* copy.c - strided copy with dtype conversion between views of equal shape (concat, split, transposes, casts).
 * Floats convert through f32 (f32, f64, f16, bf16); integer types copy only to their own type. */
#include "compute/cpu/cpu_internal.h"

static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0x1f) u = sign | 0x7f800000u | (man << 13);
    else if (exp == 0) {
        if (!man) u = sign;
        else { /* subnormal: normalise */
            int e = -1;
            do { man <<= 1; e++; } while (!(man & 0x400));
            u = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else u = sign | ((exp + 112) << 23) | (man << 13);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00);
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to >= 65520: inf */
    if (a < 0x38800000u) { /* below the smallest normal half: round in the subnormal range */
        if (a < 0x33000000u) return (uint16_t)sign;
        /* value = man * 2^(E-150) and the half subnormal unit is 2^-24, so the unit count is man >> (126-E) */
        uint32_t man = (a & 0x7fffff) | 0x800000, shift = 126 - (a >> 23);
        uint32_t r = man >> shift, rem = man & ((1u << shift) - 1), halfway = 1u << (shift - 1);
        if (rem > halfway || (rem == halfway && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = a - 0x38000000u; /* rebias 127 -> 15, keep 23 mantissa bits */
    r += 0xfffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
}

static inline float load_f(const char *p, kiln_dtype dt) {
    switch (dt) {
    case KILN_DT_F32: { float f; memcpy(&f, p, 4); return f; }
    case KILN_DT_F64: { double d; memcpy(&d, p, 8); return (float)d; }
    case KILN_DT_BF16: { uint16_t h; memcpy(&h, p, 2); return bf16_to_f32(h); }
    default: { uint16_t h; memcpy(&h, p, 2); return f16_to_f32(h); }
    }
}

static inline void store_f(char *p, kiln_dtype dt, float f) {
    switch (dt) {
    case KILN_DT_F32: memcpy(p, &f, 4); break;
    case KILN_DT_F64: { double d = f; memcpy(p, &d, 8); break; }
    case KILN_DT_BF16: { uint16_t h = f32_to_bf16(f); memcpy(p, &h, 2); break; }
    default: { uint16_t h = f32_to_f16(f); memcpy(p, &h, 2); break; }
    }
}

static bool is_conv_float(kiln_dtype dt) {
    return dt == KILN_DT_F32 || dt == KILN_DT_F64 || dt == KILN_DT_BF16 || dt == KILN_DT_F16;
}

typedef struct copy_ctx {
    const kiln_tensor *y, *x;
    int64_t inner; /* elements in the last dim */
    size_t ys, xs; /* element sizes */
} copy_ctx;

/* Row index r enumerates all leading-dim positions in row-major order. */
static void copy_rows(void *p, int64_t r0, int64_t r1) {
    const copy_ctx *c = p;
    int nd = c->x->ndim, last = nd - 1;
    for (int64_t r = r0; r < r1; r++) {
        int64_t rem = r, xo = 0, yo = 0;
        for (int d = last - 1; d >= 0; d--) {
            int64_t i = rem % c->x->shape[d];
            rem /= c->x->shape[d];
            xo += i * c->x->stride[d];
            yo += i * c->y->stride[d];
        }
        const char *xp = (const char *)c->x->data + xo * (int64_t)c->xs;
        char *yp = (char *)c->y->data + yo * (int64_t)c->ys;
        int64_t xst = c->x->stride[last] * (int64_t)c->xs, yst = c->y->stride[last] * (int64_t)c->ys;
        if (c->x->dtype == c->y->dtype) {
            if (xst == (int64_t)c->xs && yst == (int64_t)c->ys) memmove(yp, xp, (size_t)c->inner * c->xs);
            else
                for (int64_t i = 0; i < c->inner; i++) memmove(yp + i * yst, xp + i * xst, c->xs);
        } else if (c->x->dtype == KILN_DT_F32 && c->y->dtype == KILN_DT_BF16 && xst == 4 && yst == 2) {
            const float *xf = (const float *)xp;
            uint16_t *yh = (uint16_t *)yp;
            for (int64_t i = 0; i < c->inner; i++) yh[i] = f32_to_bf16(xf[i]);
        } else if (c->x->dtype == KILN_DT_BF16 && c->y->dtype == KILN_DT_F32 && xst == 2 && yst == 4) {
            const uint16_t *xh = (const uint16_t *)xp;
            float *yf = (float *)yp;
            for (int64_t i = 0; i < c->inner; i++) yf[i] = bf16_to_f32(xh[i]);
        } else {
            for (int64_t i = 0; i < c->inner; i++) store_f(yp + i * yst, c->y->dtype, load_f(xp + i * xst, c->x->dtype));
        }
    }
}

kiln_status cpu_copy(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, kiln_err *err) {
    if (!y || !x) return KILN_FAIL(err, KILN_E_INVALID, "copy: NULL tensor");
    if (x->backend != KILN_BACKEND_CPU || y->backend != KILN_BACKEND_CPU)
        return KILN_FAIL(err, KILN_E_INVALID, "copy: both tensors must be in host memory");
    if (x->ndim < 1 || x->ndim > KILN_MAX_DIMS || !kiln_tensor_same_shape(x, y))
        return KILN_FAIL(err, KILN_E_INVALID, "copy: y and x must have the same shape");
    if (x->dtype != y->dtype && (!is_conv_float(x->dtype) || !is_conv_float(y->dtype)))
        return KILN_FAIL(err, KILN_E_UNSUPPORTED, "copy: no conversion from %s to %s", kiln_dtype_name(x->dtype),
                         kiln_dtype_name(y->dtype));
    int64_t n = kiln_tensor_numel(x);
    if (n == 0) return KILN_OK;
    if (!x->data || !y->data) return KILN_FAIL(err, KILN_E_INVALID, "copy: tensor without data");
    copy_ctx c = {y, x, x->shape[x->ndim - 1], kiln_dtype_size(y->dtype), kiln_dtype_size(x->dtype)};
    if (!c.xs || !c.ys) return KILN_FAIL(err, KILN_E_UNSUPPORTED, "copy: unknown dtype");
    int64_t rows = n / c.inner;
    cpu_parallel_rows(cpu_be(be), rows, cpu_grain(c.inner), copy_rows, &c);
    return KILN_OK;
}

/* upsample.c - nearest-neighbour 2x upsampling of NCHW images: y[n,c,2i+a,2j+b] = x[n,c,i,j]. */
#include "compute/cpu/cpu_internal.h"

typedef struct up_ctx {
    const float *x;
    float *y;
    int64_t h, w;
} up_ctx;

static void up_planes(void *p, int64_t r0, int64_t r1) {
    const up_ctx *c = p;
    for (int64_t pl = r0; pl < r1; pl++) {
        const float *x = c->x + pl * c->h * c->w;
        float *y = c->y + pl * 4 * c->h * c->w;
        for (int64_t i = 0; i < c->h; i++) {
            float *row = y + 2 * i * 2 * c->w;
            for (int64_t j = 0; j < c->w; j++) row[2 * j] = row[2 * j + 1] = x[i * c->w + j];
            memcpy(row + 2 * c->w, row, (size_t)(2 * c->w) * sizeof(float));
        }
    }
}

kiln_status cpu_upsample2x(kiln_backend *be, kiln_tensor *y, const kiln_tensor *x, kiln_err *err) {
    int64_t xd[4], yd[4];
    KILN_TRY(cpu_as_nchw(x, "upsample2x", "x", xd, err));
    KILN_TRY(cpu_as_nchw(y, "upsample2x", "y", yd, err));
    if (yd[0] != xd[0] || yd[1] != xd[1] || yd[2] != 2 * xd[2] || yd[3] != 2 * xd[3])
        return KILN_FAIL(err, KILN_E_INVALID, "upsample2x: y must be [%lld, %lld, %lld, %lld]", (long long)xd[0],
                         (long long)xd[1], (long long)(2 * xd[2]), (long long)(2 * xd[3]));
    if (x->data == y->data && xd[2] * xd[3] > 0) return KILN_FAIL(err, KILN_E_INVALID, "upsample2x: y must not alias x");
    up_ctx c = {x->data, y->data, xd[2], xd[3]};
    cpu_parallel_rows(cpu_be(be), xd[0] * xd[1], cpu_grain(4 * xd[2] * xd[3]), up_planes, &c);
    return KILN_OK;
}

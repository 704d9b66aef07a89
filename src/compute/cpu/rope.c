/* rope.c - rotary position embedding in place, both pairings:
 *   interleaved (FLUX DiT):  (x[2i], x[2i+1]) rotated by angle i
 *   half-split  (Qwen3):     (x[i],  x[i+Dh/2]) rotated by angle i
 * Row r of x uses table row r % T (T = table rows), so a batch of B sequences stacked as [B*S, H*Dh] shares one
 * [S, Dh/2] table. */
#include "compute/cpu/cpu_internal.h"

typedef struct rope_ctx {
    cpu_mat x, cos, sin;
    int64_t heads, dh;
    bool interleaved;
} rope_ctx;

static void rope_rows(void *p, int64_t r0, int64_t r1) {
    const rope_ctx *c = p;
    int64_t half = c->dh / 2;
    for (int64_t r = r0; r < r1; r++) {
        float *x = mat_f32_row(&c->x, r);
        const float *cs = mat_f32_row(&c->cos, r % c->cos.rows), *sn = mat_f32_row(&c->sin, r % c->sin.rows);
        for (int64_t h = 0; h < c->heads; h++, x += c->dh) {
            if (c->interleaved)
                for (int64_t i = 0; i < half; i++) {
                    float a = x[2 * i], b = x[2 * i + 1];
                    x[2 * i] = a * cs[i] - b * sn[i];
                    x[2 * i + 1] = a * sn[i] + b * cs[i];
                }
            else
                for (int64_t i = 0; i < half; i++) {
                    float a = x[i], b = x[i + half];
                    x[i] = a * cs[i] - b * sn[i];
                    x[i + half] = b * cs[i] + a * sn[i];
                }
        }
    }
}

kiln_status cpu_rope(kiln_backend *be, kiln_tensor *x, const kiln_tensor *cos, const kiln_tensor *sin, int n_heads,
                     bool interleaved, kiln_err *err) {
    rope_ctx c = {.heads = n_heads, .interleaved = interleaved};
    KILN_TRY(cpu_as_mat(x, KILN_DT_F32, "rope", "x", &c.x, err));
    KILN_TRY(cpu_as_mat(cos, KILN_DT_F32, "rope", "cos", &c.cos, err));
    KILN_TRY(cpu_as_mat(sin, KILN_DT_F32, "rope", "sin", &c.sin, err));
    if (n_heads < 1 || c.x.cols % n_heads || (c.x.cols / n_heads) % 2)
        return KILN_FAIL(err, KILN_E_INVALID, "rope: width %lld does not split into %d heads of even size",
                         (long long)c.x.cols, n_heads);
    c.dh = c.x.cols / n_heads;
    if (c.cos.cols != c.dh / 2 || c.sin.cols != c.dh / 2 || c.cos.rows != c.sin.rows)
        return KILN_FAIL(err, KILN_E_INVALID, "rope: cos/sin must both be [T, %lld], got [%lld, %lld] and [%lld, %lld]",
                         (long long)(c.dh / 2), (long long)c.cos.rows, (long long)c.cos.cols, (long long)c.sin.rows,
                         (long long)c.sin.cols);
    if (c.x.rows == 0) return KILN_OK;
    if (c.cos.rows < 1 || c.x.rows % c.cos.rows)
        return KILN_FAIL(err, KILN_E_INVALID, "rope: x has %lld rows, not a multiple of the table's %lld",
                         (long long)c.x.rows, (long long)c.cos.rows);
    cpu_parallel_rows(cpu_be(be), c.x.rows, cpu_grain(c.x.cols), rope_rows, &c);
    return KILN_OK;
}

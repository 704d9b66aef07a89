/* denoise_step.c - one denoising step as a graph-replayable body (see denoise_step.h). */
#include <string.h>

#include "compute/graph.h"
#include "models/views.h"
#include "pipeline/denoise_step.h"

kiln_status kiln_denoise_step_set(kiln_denoise_step *s, kiln_backend *be, float t, float dt, kiln_err *err) {
    float lanes[128];
    for (int i = 0; i < 128; i++) lanes[i] = dt;
    KILN_TRY(kiln_flux2_dit_set_timestep(s->dit, be, s->ws, t, err));
    return be->ops->upload(be, s->dt, lanes, sizeof lanes, err);
}

/* Editing: each DiT sample is [its noisy tokens ; the reference tokens]; only the first N output rows are the
 * image's velocity. */
static kiln_status forward_refs(kiln_denoise_step *s, kiln_backend *be, kiln_err *err) {
    const int64_t N = s->N, T = N + s->n_ref, Bd = s->cfg ? 2 * s->B : s->B;
    kiln_tensor X = kiln_f32_2d(s->x, (int64_t)s->B * N, 128), XIN = kiln_f32_2d(s->xin, Bd * T, 128);
    kiln_tensor VF = kiln_f32_2d(s->vfull, Bd * T, 128), V = kiln_f32_2d(s->v, Bd * N, 128);
    for (int64_t j = 0; j < Bd; j++) { /* CFG: the unconditional half sees the same latents */
        kiln_tensor src = kiln_tensor_rows(&X, (j % s->B) * N, N), dst = kiln_tensor_rows(&XIN, j * T, N);
        KILN_TRY(be->ops->copy(be, &dst, &src, err));
    }
    KILN_TRY(kiln_flux2_dit_run(s->dit, be, s->ws, s->xin, s->vfull, err));
    for (int64_t j = 0; j < Bd; j++) {
        kiln_tensor src = kiln_tensor_rows(&VF, j * T, N), dst = kiln_tensor_rows(&V, j * N, N);
        KILN_TRY(be->ops->copy(be, &dst, &src, err));
    }
    return KILN_OK;
}

kiln_status kiln_denoise_step_forward(kiln_denoise_step *s, kiln_backend *be, kiln_err *err) {
    if (s->n_ref > 0) return forward_refs(s, be, err);
    int64_t BN = (int64_t)s->B * s->N;
    const float *xin = s->x;
    if (s->cfg) { /* the conditional and the unconditional half of the DiT batch see the same latents */
        kiln_tensor X = kiln_f32_2d(s->x, BN, 128);
        kiln_tensor XA = kiln_f32_2d(s->xin, BN, 128), XB = kiln_f32_2d(s->xin + BN * 128, BN, 128);
        KILN_TRY(be->ops->copy(be, &XA, &X, err));
        KILN_TRY(be->ops->copy(be, &XB, &X, err));
        xin = s->xin;
    }
    return kiln_flux2_dit_run(s->dit, be, s->ws, xin, s->v, err);
}

kiln_status kiln_denoise_step_update(kiln_denoise_step *s, kiln_backend *be, kiln_err *err) {
    const kiln_ops *op = be->ops;
    int64_t BN = (int64_t)s->B * s->N;
    kiln_tensor X = kiln_f32_2d(s->x, BN, 128), T = kiln_f32_2d(s->tmp, BN, 128);
    kiln_tensor V = kiln_f32_2d(s->v, BN, 128);
    if (s->cfg) { /* v = v_u + g (v_c - v_u), as the references write it */
        kiln_tensor VU = kiln_f32_2d(s->v + BN * 128, BN, 128);
        KILN_TRY(op->scale_shift(be, &T, &VU, -1.0f, 0.0f, err));
        KILN_TRY(op->add(be, &T, &V, &T, err));
        KILN_TRY(op->scale_shift(be, &T, &T, s->guidance, 0.0f, err));
        KILN_TRY(op->add(be, &V, &VU, &T, err));
    }
    /* Euler: x += dt * v with dt from device memory. As T = 0; T += dt[col] * v; x += T the product is rounded
     * before the add, exactly as by the former scale_shift with a host dt: 0 + a*b is a*b whether or not a
     * backend fuses gated_add into an FMA. One gated_add on x would save two small ops but, on a backend that
     * fuses it, round once and change the bytes. */
    kiln_tensor DT = kiln_f32_1d(s->dt, 128);
    KILN_TRY(op->scale_shift(be, &T, &V, 0.0f, 0.0f, err));
    KILN_TRY(op->gated_add(be, &T, &DT, &V, err));
    return op->add(be, &X, &X, &T, err);
}

static kiln_status body(kiln_backend *be, void *ctx, kiln_err *err) {
    KILN_TRY(kiln_denoise_step_forward(ctx, be, err));
    return kiln_denoise_step_update(ctx, be, err);
}

kiln_status kiln_denoise_step_run(kiln_denoise_step *s, kiln_backend *be, kiln_err *err) {
    return kiln_backend_graph_run(be, kiln_denoise_step_key(s), body, s, err);
}

uint64_t kiln_denoise_step_key(const kiln_denoise_step *s) {
    uint32_t g = 0;
    if (s->cfg) memcpy(&g, &s->guidance, sizeof g);
    const void *ptrs[] = {s->dit, s->x, s->xin, s->v, s->tmp, s->dt, s->vfull};
    uint64_t key = kiln_graph_key(kiln_graph_key(kiln_graph_key(kiln_graph_key(0, s->cfg), s->B), s->N), g);
    key = kiln_graph_key(key, s->n_ref);
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++) key = kiln_graph_key(key, (int64_t)(uintptr_t)ptrs[i]);
    return kiln_flux2_dit_ws_key(s->ws, key);
}

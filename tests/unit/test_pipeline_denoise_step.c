/* test_pipeline_denoise_step.c - the denoising step body that the CUDA backend captures as a graph, on the CPU:
 * the graph-run path gives the same bytes as the two halves; the Euler update and CFG read dt from backend memory
 * and round exactly like the host formula (x + (dt * v), v = v_u + g (v_c - v_u)); the graph key follows the
 * guidance (base only) and the buffer addresses. Tiny random-weight DiT, a 2 x 3 token grid, 8 text tokens. */
#include <string.h>

#include "models/flux2_dit.h"
#include "pipeline/denoise_step.h"
#include "test.h"

#define L 8
#define N 6

typedef struct fixture {
    kiln_st_file *ck;
    kiln_flux2_dit *m;
    kiln_backend *be;
    kiln_flux2_dit_ws *ws;
    kiln_denoise_step st;
    float x0[2 * N * 128]; /* the starting latents (B <= 2) */
} fixture;

static float wave(size_t i, float f) { return 0.5f * sinf(f * (float)i + 0.3f); }

static int setup(fixture *f, int B, bool cfg) {
    kiln_err err = {0};
    memset(f, 0, sizeof *f);
    int Bd = cfg ? 2 * B : B;
    if (kiln_st_open(test_src_path("tests/data/tiny/comfy/flux-2-klein-4b.safetensors"), &f->ck, &err) != KILN_OK ||
        kiln_flux2_dit_load(f->ck, NULL, &f->m, &err) != KILN_OK || kiln_backend_open_cpu(1, &f->be, &err) != KILN_OK ||
        kiln_flux2_dit_ws_create(f->m, f->be, Bd, L, 2, 3, &f->ws, &err) != KILN_OK) {
        CHECK_MSG(0, "setup: %s", err.msg);
        return 0;
    }
    kiln_backend *be = f->be;
    size_t nt = (size_t)Bd * L * f->m->ctx_dim;
    float *txt = be->ops->alloc(be, nt * sizeof(float));
    kiln_denoise_step *s = &f->st;
    *s = (kiln_denoise_step){f->m, f->ws, B, N, cfg, 3.5f, be->ops->alloc(be, sizeof f->x0),
                             cfg ? be->ops->alloc(be, 2 * sizeof f->x0) : NULL, be->ops->alloc(be, 2 * sizeof f->x0),
                             be->ops->alloc(be, sizeof f->x0), be->ops->alloc(be, 128 * sizeof(float))};
    if (!txt || !s->x || (cfg && !s->xin) || !s->v || !s->tmp || !s->dt) {
        CHECK(0);
        return 0;
    }
    for (size_t i = 0; i < nt; i++) txt[i] = wave(i, 0.37f);
    for (size_t i = 0; i < (size_t)B * N * 128; i++) f->x0[i] = wave(i, 0.11f);
    memcpy(s->x, f->x0, (size_t)B * N * 128 * sizeof(float));
    CHECK(kiln_flux2_dit_set_text(f->m, be, f->ws, txt, &err) == KILN_OK);
    be->ops->free(be, txt);
    return 1;
}

static void teardown(fixture *f) {
    kiln_backend *be = f->be;
    if (be) {
        float *bufs[] = {f->st.x, f->st.xin, f->st.v, f->st.tmp, f->st.dt};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            if (bufs[i]) be->ops->free(be, bufs[i]);
        kiln_flux2_dit_ws_free(be, f->ws);
        kiln_backend_close(be);
    }
    kiln_flux2_dit_free(f->m);
    kiln_st_close(f->ck);
}

/* Two steps through kiln_denoise_step_run (the graph path) and through forward + update: the same bytes, and each
 * step's x is x + (dt * v) of its velocity (CFG-combined with the host formula for the base model). */
static void check_steps(int B, bool cfg) {
    fixture f;
    if (setup(&f, B, cfg)) {
        kiln_err err = {0};
        kiln_denoise_step *s = &f.st;
        size_t n = (size_t)B * N * 128;
        float *run_x = malloc(n * sizeof(float)), *v = malloc(2 * n * sizeof(float)), *x = malloc(n * sizeof(float));
        const float t[2] = {1000.0f, 750.0f}, dt[2] = {-0.25f, -0.5f};
        for (int k = 0; k < 2; k++) { /* the graph path */
            CHECK(kiln_denoise_step_set(s, f.be, t[k], dt[k], &err) == KILN_OK);
            CHECK_MSG(kiln_denoise_step_run(s, f.be, &err) == KILN_OK, "%s", err.msg);
        }
        memcpy(run_x, s->x, n * sizeof(float));
        memcpy(s->x, f.x0, n * sizeof(float));
        memcpy(x, f.x0, n * sizeof(float));
        for (int k = 0; k < 2; k++) { /* the halves, and the host formula */
            CHECK(kiln_denoise_step_set(s, f.be, t[k], dt[k], &err) == KILN_OK);
            CHECK(kiln_denoise_step_forward(s, f.be, &err) == KILN_OK);
            memcpy(v, s->v, (cfg ? 2 : 1) * n * sizeof(float));
            CHECK(kiln_denoise_step_update(s, f.be, &err) == KILN_OK);
            int bad = 0;
            for (size_t i = 0; i < n; i++) {
                float vi = v[i];
                if (cfg) {
                    volatile float d = v[i] + -v[n + i], gd = s->guidance * d; /* no contraction: as the ops round */
                    vi = v[n + i] + gd;
                }
                volatile float step = dt[k] * vi;
                x[i] = x[i] + step;
                bad += memcmp(&x[i], &s->x[i], sizeof(float)) != 0;
            }
            CHECK_MSG(bad == 0, "step %d: %d of %zu latents differ from x + dt * v", k, bad, n);
        }
        CHECK(memcmp(run_x, s->x, n * sizeof(float)) == 0);
        free(run_x);
        free(v);
        free(x);
    }
    teardown(&f);
}

static void test_distilled(void) { check_steps(2, false); }
static void test_cfg(void) { check_steps(1, true); }

static void test_key(void) {
    fixture f;
    if (setup(&f, 1, true)) {
        kiln_denoise_step s = f.st;
        uint64_t k0 = kiln_denoise_step_key(&s);
        CHECK(kiln_denoise_step_key(&s) == k0);
        s.guidance = 5.0f; /* CFG scale is baked into the launch */
        CHECK(kiln_denoise_step_key(&s) != k0);
        s = f.st;
        s.tmp = s.x; /* another buffer address */
        CHECK(kiln_denoise_step_key(&s) != k0);
        s = f.st;
        s.cfg = false;
        uint64_t k1 = kiln_denoise_step_key(&s);
        CHECK(k1 != k0);
        s.guidance = 5.0f; /* without CFG the guidance is unused: same graph */
        CHECK(kiln_denoise_step_key(&s) == k1);
    }
    teardown(&f);
}

int main(void) {
    RUN(test_distilled);
    RUN(test_cfg);
    RUN(test_key);
    return test_summary();
}

/* schedule.c - FLUX.2 sigma schedule and Euler step (see schedule.h). */
#include "pipeline/schedule.h"

#include <math.h>

/* The two fitted lines of BFL's compute_empirical_mu: mu at 10 steps (a1, b1) and at 200 steps (a2, b2) as
 * functions of the token count, interpolated linearly in the step count. */
#define MU_A1 8.73809524e-05
#define MU_B1 1.89833333
#define MU_A2 0.00016927
#define MU_B2 0.45666666

double kiln_flux2_empirical_mu(int n_steps, long n_tokens) {
    double n = (double)n_tokens;
    if (n_tokens > 4300) return MU_A2 * n + MU_B2;
    double m200 = MU_A2 * n + MU_B2;
    double m10 = MU_A1 * n + MU_B1;
    double a = (m200 - m10) / 190.0;
    double b = m200 - 200.0 * a;
    return a * n_steps + b;
}

void kiln_flux2_schedule(int n_steps, long n_tokens, double *sigmas) {
    double mu = kiln_flux2_empirical_mu(n_steps, n_tokens);
    double em = exp(mu);
    sigmas[0] = 1.0;
    for (int k = 1; k < n_steps; k++) {
        double t = 1.0 - (double)k / n_steps;
        sigmas[k] = em / (em + (1.0 / t - 1.0));
    }
    sigmas[n_steps] = 0.0;
}

void kiln_flux2_schedule_f32(int n_steps, long n_tokens, float *sigmas) {
    float em = (float)exp(kiln_flux2_empirical_mu(n_steps, n_tokens));
    for (int k = 0; k < n_steps; k++) {
        /* np.linspace(1.0, 1/n, n): start + k * step, step = (stop - start) / (n - 1), in double */
        double lin = n_steps == 1 ? 1.0 : 1.0 + k * ((1.0 / n_steps - 1.0) / (n_steps - 1));
        if (k == n_steps - 1 && n_steps > 1) lin = 1.0 / n_steps; /* numpy sets the endpoint exactly */
        float t = (float)lin;
        float inv = 1.0f / t;
        float d = inv - 1.0f;
        sigmas[k] = em / (em + d);
    }
    sigmas[n_steps] = 0.0f;
}

void kiln_euler_step(float *x, const float *v, size_t n, double sigma, double sigma_next) {
    float dt = (float)sigma_next - (float)sigma;
    for (size_t i = 0; i < n; i++) x[i] += dt * v[i];
}

void kiln_cfg_combine(float *v_cond, const float *v_uncond, size_t n, float guidance) {
    for (size_t i = 0; i < n; i++) v_cond[i] = v_uncond[i] + guidance * (v_cond[i] - v_uncond[i]);
}

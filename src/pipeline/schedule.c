/* schedule.c - FLUX.2 sigma schedule and Euler step (see schedule.h). */
#include "pipeline/schedule.h"

#include <math.h>
#include <string.h>

#include "models/config.h"

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

kiln_sched_config kiln_sched_config_klein(void) {
    return (kiln_sched_config){KILN_SHIFT_EXPONENTIAL, 3.0, false, 256, 4096, 0.5, 1.15};
}

kiln_sched_config kiln_sched_config_flux1(bool dev) {
    kiln_sched_config c = {dev ? KILN_SHIFT_EXPONENTIAL : KILN_SHIFT_STATIC, dev ? 3.0 : 1.0, true, 256, 4096, 0.5, 1.15};
    return c;
}

double kiln_sched_mu(const kiln_sched_config *c, int n_steps, long n_tokens) {
    if (!c->flux1_mu) return kiln_flux2_empirical_mu(n_steps, n_tokens);
    /* FluxPipeline calculate_shift: m = (max_shift - base_shift) / (max_seq - base_seq); b = base_shift - m base_seq */
    double m = (c->max_shift - c->base_shift) / (c->max_seq - c->base_seq);
    double b = c->base_shift - m * c->base_seq;
    return (double)n_tokens * m + b;
}

static kiln_status read_common(const char *path, kiln_sched_config *out, kiln_err *err);

kiln_status kiln_sched_config_read(const char *path, kiln_sched_config *out, kiln_err *err) {
    *out = kiln_sched_config_klein();
    return read_common(path, out, err);
}

kiln_status kiln_sched_config_read_flux1(const char *path, bool dev, kiln_sched_config *out, kiln_err *err) {
    *out = kiln_sched_config_flux1(dev);
    json_t *c;
    KILN_TRY(kiln_config_open(path, &c, err));
    if (!c) return KILN_OK;
    /* absent keys: the pipeline's .get() defaults, not the model's */
    *out = (kiln_sched_config){KILN_SHIFT_STATIC, 1.0, true, 256, 4096, 0.5, 1.15};
    const char *w = "scheduler/scheduler_config.json";
    kiln_status s = kiln_cfg_number(c, w, "base_image_seq_len", &out->base_seq, err);
    if (s == KILN_OK) s = kiln_cfg_number(c, w, "max_image_seq_len", &out->max_seq, err);
    if (s == KILN_OK) s = kiln_cfg_number(c, w, "base_shift", &out->base_shift, err);
    if (s == KILN_OK) s = kiln_cfg_number(c, w, "max_shift", &out->max_shift, err);
    if (s == KILN_OK && !(out->max_seq != out->base_seq))
        s = KILN_FAIL(err, KILN_E_FORMAT, "%s: max_image_seq_len equals base_image_seq_len (%g): calculate_shift "
                      "divides by their difference", w, out->base_seq);
    if (s == KILN_OK && !(isfinite(out->base_seq) && isfinite(out->max_seq) && isfinite(out->base_shift) &&
                          isfinite(out->max_shift) && fabs(out->max_shift) < 1e3 && fabs(out->base_shift) < 1e3))
        s = KILN_FAIL(err, KILN_E_FORMAT, "%s: base_shift / max_shift / *_image_seq_len must be finite (shifts below "
                      "1000)", w);
    json_decref(c);
    if (s != KILN_OK) return s;
    return read_common(path, out, err);
}

static kiln_status read_common(const char *path, kiln_sched_config *out, kiln_err *err) {
    json_t *c;
    KILN_TRY(kiln_config_open(path, &c, err));
    if (!c) return KILN_OK;
    const char *w = "scheduler/scheduler_config.json";
    kiln_status s = KILN_OK;
    bool dynamic = false; /* FlowMatchEulerDiscreteScheduler's default */
    double shift = 1.0, terminal = 0.0, ntt = 1000.0;
    /* Flags whose true value switches to maths kiln does not have (the pipeline also reads use_flow_sigmas). */
    static const char *const refused_true[] = {"use_karras_sigmas", "use_exponential_sigmas", "use_beta_sigmas",
                                               "invert_sigmas", "stochastic_sampling", "use_flow_sigmas"};
    for (size_t i = 0; i < sizeof refused_true / sizeof refused_true[0] && s == KILN_OK; i++) {
        bool on = false;
        s = kiln_cfg_boolean(c, w, refused_true[i], &on, err);
        if (s == KILN_OK && on)
            s = KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: %s true is not supported (kiln implements the plain "
                          "FLUX.2 sigmas: set it to false)", w, refused_true[i]);
    }
    if (s == KILN_OK) s = kiln_cfg_boolean(c, w, "use_dynamic_shifting", &dynamic, err);
    if (s == KILN_OK) s = kiln_cfg_number(c, w, "shift", &shift, err);
    if (s == KILN_OK) s = kiln_cfg_number(c, w, "shift_terminal", &terminal, err);
    /* diffusers tests `if shift_terminal:` - null and 0 leave the sigmas alone */
    if (s == KILN_OK && terminal != 0.0)
        s = KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: shift_terminal %g is not supported (only null)", w, terminal);
    if (s == KILN_OK) s = kiln_cfg_number(c, w, "num_train_timesteps", &ntt, err);
    if (s == KILN_OK && ntt != 1000.0)
        s = KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: num_train_timesteps %g is not supported (the klein pipeline "
                      "divides the timesteps by 1000; kiln implements 1000)", w, ntt);
    const char *tst = kiln_cfg_str(c, "time_shift_type");
    if (s == KILN_OK && kiln_cfg_get(c, "time_shift_type") && !tst)
        s = KILN_FAIL(err, KILN_E_FORMAT, "%s: time_shift_type must be a string", w);
    if (s == KILN_OK && tst && strcmp(tst, "exponential") && strcmp(tst, "linear"))
        s = KILN_FAIL(err, KILN_E_UNSUPPORTED, "%s: time_shift_type \"%s\" is not supported (\"exponential\" "
                      "or \"linear\")", w, tst);
    if (s == KILN_OK && !dynamic && !(shift > 0.0 && shift < 1e30)) /* numpy rounds it to f32 */
        s = KILN_FAIL(err, KILN_E_FORMAT, "%s: shift %g must be positive (and below 1e30)", w, shift);
    if (s == KILN_OK) {
        out->kind = !dynamic ? KILN_SHIFT_STATIC : (tst && !strcmp(tst, "linear")) ? KILN_SHIFT_LINEAR
                                                                                 : KILN_SHIFT_EXPONENTIAL;
        out->shift = shift;
    }
    json_decref(c);
    return s;
}

void kiln_flux2_schedule_f32(int n_steps, long n_tokens, float *sigmas) {
    kiln_sched_config c = kiln_sched_config_klein();
    kiln_flux2_schedule_cfg_f32(&c, n_steps, n_tokens, sigmas);
}

void kiln_flux2_schedule_cfg_f32(const kiln_sched_config *c, int n_steps, long n_tokens, float *sigmas) {
    double mu = kiln_sched_mu(c, n_steps, n_tokens);
    float em = (float)exp(mu), muf = (float)mu;
    float sh = (float)c->shift, sh1 = (float)(c->shift - 1.0); /* python float - 1, then numpy's f32 cast */
    for (int k = 0; k < n_steps; k++) {
        /* np.linspace(1.0, 1/n, n): start + k * step, step = (stop - start) / (n - 1), in double */
        double lin = n_steps == 1 ? 1.0 : 1.0 + k * ((1.0 / n_steps - 1.0) / (n_steps - 1));
        if (k == n_steps - 1 && n_steps > 1) lin = 1.0 / n_steps; /* numpy sets the endpoint exactly */
        float t = (float)lin;
        if (c->kind == KILN_SHIFT_STATIC) {
            /* shift * t / (1 + (shift - 1) * t), each operation rounded to f32 (volatile: no fused multiply-add) */
            volatile float num = sh * t, prod = sh1 * t;
            float den = 1.0f + prod;
            sigmas[k] = num / den;
            continue;
        }
        float inv = 1.0f / t;
        float d = inv - 1.0f;
        sigmas[k] = c->kind == KILN_SHIFT_LINEAR ? muf / (muf + d) : em / (em + d);
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

kiln_status kiln_sigmas_check(const float *sigmas, int n, int steps, int max_steps, kiln_err *err) {
    if (!sigmas || n < 2 || n > max_steps + 1)
        return KILN_FAIL(err, KILN_E_INVALID, "a sigma schedule of %d values: 2..%d are accepted", n, max_steps + 1);
    if (steps != 0 && steps != n - 1)
        return KILN_FAIL(err, KILN_E_INVALID, "steps %d with a schedule of %d sigmas (steps must be 0 or %d)", steps,
                         n, n - 1);
    if (!(sigmas[0] > 0.0f && sigmas[0] <= 1.0f))
        return KILN_FAIL(err, KILN_E_INVALID, "sigma 0 is %g: the schedule must start in (0, 1]", sigmas[0]);
    for (int k = 1; k < n; k++)
        if (!(sigmas[k] < sigmas[k - 1]) || !(sigmas[k] >= 0.0f))
            return KILN_FAIL(err, KILN_E_INVALID, "sigma %d is %g after %g: the schedule must decrease strictly, "
                             "down to 0", k, sigmas[k], sigmas[k - 1]);
    if (sigmas[n - 1] != 0.0f)
        return KILN_FAIL(err, KILN_E_INVALID, "the schedule ends at %g: the last sigma must be 0", sigmas[n - 1]);
    return KILN_OK;
}

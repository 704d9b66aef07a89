/* comfy_sigmas.c - ComfyUI's flow-model sigma schedules in float32 (see comfy_sigmas.h). */
#include "pipeline/comfy_sigmas.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/schedule.h"

float kiln_comfy_flux_sigma(double shift, float t) {
    if (t == 0.0f) return 0.0f; /* 1/0 is inf in torch, and e / inf is 0 */
    float e = (float)exp(shift);          /* the python float, cast to the tensor's dtype */
    float x = (1.0f / t) * 1.0f - 1.0f;   /* 1 / t: reciprocal(t) * 1; ** 1.0 leaves it */
    float d = e + x;
    return (1.0f / d) * e; /* e^mu / d: reciprocal(d) * e^mu */
}

double kiln_comfy_flux_shift(double max_shift, double base_shift, int width, int height) {
    double x1 = 256, x2 = 4096, mm = (max_shift - base_shift) / (x2 - x1), b = base_shift - mm * x1;
    return ((double)width * (double)height / (8 * 8 * 2 * 2)) * mm + b;
}

/* The model's table entry i (0-based): t = (i + 1) / 10000, an int64 tensor divided in float32. */
static float table(double shift, int i) { return kiln_comfy_flux_sigma(shift, (float)(i + 1) / (float)KILN_COMFY_TIMESTEPS); }

bool kiln_comfy_scheduler_known(const char *name) {
    return name && (!strcmp(name, "simple") || !strcmp(name, "normal") || !strcmp(name, "sgm_uniform"));
}

/* torch.linspace(start, end, n) in float32 as its CPU kernel computes it: the first half from start, the rest
 * from end, each one fused multiply-add (the oracle showed plain products differ by an ulp). */
static float linspace_at(float start, float end, int n, int i) {
    if (n == 1) return start;
    float step = (end - start) / (float)(n - 1);
    return i < n / 2 ? fmaf(step, (float)i, start) : fmaf(-step, (float)(n - i - 1), end);
}

/* calculate_sigmas(model_sampling, scheduler, steps): steps + 1 values (normal may give steps + 1 without the
 * appended zero when sigma(end) is ~0; never for a flux table). Returns the count or -1. */
static int full_schedule(double shift, const char *sch, int steps, float *out, int cap) {
    if (steps < 1 || steps + 1 > cap) return -1;
    if (!strcmp(sch, "simple")) {
        double ss = (double)KILN_COMFY_TIMESTEPS / steps; /* len(s.sigmas) / steps */
        for (int x = 0; x < steps; x++) out[x] = table(shift, KILN_COMFY_TIMESTEPS - 1 - (int)(x * ss));
        out[steps] = 0.0f;
        return steps + 1;
    }
    bool sgm = !strcmp(sch, "sgm_uniform");
    if (!sgm && strcmp(sch, "normal") != 0) return -1;
    /* timestep(sigma) is sigma for a flux model: a linspace over the table's ends, then sigma() again */
    float start = table(shift, KILN_COMFY_TIMESTEPS - 1), end = table(shift, 0);
    int n = steps;
    bool append_zero = true;
    if (sgm) {
        n = steps + 1; /* linspace(start, end, steps + 1)[:-1] */
    } else if (fabs((double)kiln_comfy_flux_sigma(shift, end)) <= 1e-5) { /* math.isclose(.., 0, abs_tol=1e-5) */
        n = steps + 1;
        append_zero = false;
    }
    int m = sgm ? steps : n;
    for (int x = 0; x < m; x++) out[x] = kiln_comfy_flux_sigma(shift, linspace_at(start, end, n, x));
    if (append_zero) out[m++] = 0.0f;
    return m;
}

int kiln_comfy_sigmas(double shift, const char *scheduler, int steps, double denoise, float *out, int cap) {
    if (!kiln_comfy_scheduler_known(scheduler) || steps < 1) return -1;
    int total = steps;
    if (denoise < 1.0) {
        if (denoise <= 0.0) return 0;
        total = (int)(steps / denoise); /* python int() of a float: truncation */
    }
    float *full = malloc(((size_t)total + 2) * sizeof *full);
    if (!full) return -1;
    int n = full_schedule(shift, scheduler, total, full, total + 2);
    if (n < 0 || (n > steps + 1 && steps + 1 > cap) || (n <= steps + 1 && n > cap)) {
        free(full);
        return -1;
    }
    int keep = n < steps + 1 ? n : steps + 1; /* sigmas[-(steps + 1):] */
    memcpy(out, full + (n - keep), (size_t)keep * sizeof *out);
    free(full);
    return keep;
}

int kiln_comfy_flux2_sigmas(int steps, int width, int height, float *out, int cap) {
    if (steps < 1 || steps + 1 > cap) return -1;
    long tokens = (long)nearbyint((double)width * (double)height / (16 * 16));
    double mu = kiln_flux2_empirical_mu(steps, tokens);
    for (int k = 0; k <= steps; k++) out[k] = kiln_comfy_flux_sigma(mu, linspace_at(1.0f, 0.0f, steps + 1, k));
    return steps + 1;
}

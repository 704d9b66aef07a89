#!/usr/bin/env python3
"""ComfyUI's flow-model sigma schedules, computed with torch as ComfyUI's code computes them.

    /opt/kiln-ref/bin/python tools/reference/make_comfy_sigmas_golden.py

ComfyUI is not installed in the oracle venv, so its formulas are written out here from its source (facts only:
comfy/model_sampling.py ModelSamplingFlux and flux_time_shift, comfy/samplers.py simple_scheduler,
normal_scheduler and sgm_uniform, comfy_extras/nodes_custom_sampler.py BasicScheduler's denoise, and
comfy_extras/nodes_model_advanced.py ModelSamplingFlux's shift line, comfy_extras/nodes_flux.py
Flux2Scheduler), with the same torch operations and
dtypes, so that torch's own float32 rounding is the oracle. Writes tests/data/golden/comfy_sigmas.safetensors:
for each (shift, scheduler, steps, denoise) the sigmas bit for bit, and the shifts ModelSamplingFlux gives.
"""
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import common  # noqa: E402


def flux_time_shift(mu, sigma, t):
    return math.exp(mu) / (math.exp(mu) + (1 / t - 1) ** sigma)


class ModelSamplingFlux:
    def __init__(self, shift, timesteps=10000):
        self.shift = shift
        self.sigmas = self.sigma((torch.arange(1, timesteps + 1, 1) / timesteps))

    @property
    def sigma_min(self):
        return self.sigmas[0]

    @property
    def sigma_max(self):
        return self.sigmas[-1]

    def timestep(self, sigma):
        return sigma

    def sigma(self, timestep):
        return flux_time_shift(self.shift, 1.0, timestep)


def simple_scheduler(s, steps):
    sigs = []
    ss = len(s.sigmas) / steps
    for x in range(steps):
        sigs += [float(s.sigmas[-(1 + int(x * ss))])]
    sigs += [0.0]
    return torch.FloatTensor(sigs)


def normal_scheduler(s, steps, sgm=False):
    start = s.timestep(s.sigma_max)
    end = s.timestep(s.sigma_min)
    append_zero = True
    if sgm:
        timesteps = torch.linspace(start, end, steps + 1)[:-1]
    else:
        if math.isclose(float(s.sigma(end)), 0, abs_tol=0.00001):
            steps += 1
            append_zero = False
        timesteps = torch.linspace(start, end, steps)
    sigs = [float(s.sigma(ts)) for ts in timesteps]
    if append_zero:
        sigs += [0.0]
    return torch.FloatTensor(sigs)


def basic_scheduler(s, scheduler, steps, denoise):
    total_steps = steps
    if denoise < 1.0:
        if denoise <= 0.0:
            return torch.FloatTensor([])
        total_steps = int(steps / denoise)
    f = {"simple": simple_scheduler, "normal": normal_scheduler,
         "sgm_uniform": lambda m, n: normal_scheduler(m, n, sgm=True)}[scheduler]
    return f(s, total_steps)[-(steps + 1):]


def model_sampling_flux_shift(max_shift, base_shift, width, height):
    x1, x2 = 256, 4096
    mm = (max_shift - base_shift) / (x2 - x1)
    b = base_shift - mm * x1
    return (width * height / (8 * 8 * 2 * 2)) * mm + b


def compute_empirical_mu(image_seq_len, num_steps):
    a1, b1 = 8.73809524e-05, 1.89833333
    a2, b2 = 0.00016927, 0.45666666
    if image_seq_len > 4300:
        return float(a2 * image_seq_len + b2)
    m_200 = a2 * image_seq_len + b2
    m_10 = a1 * image_seq_len + b1
    a = (m_200 - m_10) / 190.0
    b = m_200 - 200.0 * a
    return float(a * num_steps + b)


def flux2_scheduler(steps, width, height):  # Flux2Scheduler.execute / get_schedule
    seq_len = (width * height / (16 * 16))
    mu = compute_empirical_mu(round(seq_len), steps)
    timesteps = torch.linspace(1, 0, steps + 1)
    return flux_time_shift(mu, 1.0, timesteps)  # generalized_time_snr_shift: the same expression


FLUX2_CASES = [(4, 1024, 1024), (4, 164, 128), (20, 1024, 1024), (1, 64, 64), (50, 2048, 2048), (4, 1360, 768),
               (3, 90, 70), (28, 512, 512)]
SHIFT_CASES = [(1.15, 0.5, 1024, 1024), (1.15, 0.5, 64, 64), (1.15, 0.5, 80, 48), (2.0, 0.3, 1360, 768)]


def main():
    g = common.Golden("comfy_sigmas", "f32", "ComfyUI's ModelSamplingFlux sigma schedules (simple, normal, "
                      "sgm_uniform; BasicScheduler's denoise tail) and ModelSamplingFlux shifts, torch float32")
    shifts = [1.15, 1.0, 2.02] + [model_sampling_flux_shift(*c) for c in SHIFT_CASES]
    cases = []
    for i, shift in enumerate(shifts):
        s = ModelSamplingFlux(shift)
        for sch in ("simple", "normal", "sgm_uniform"):
            for steps, denoise in ((1, 1.0), (2, 1.0), (3, 1.0), (4, 1.0), (7, 1.0), (20, 1.0), (28, 1.0),
                                   (4, 0.75), (3, 0.3), (20, 0.55), (2, 0.0)):
                key = "%d.%s.%d.%g" % (i, sch, steps, denoise)
                g.add("sigmas." + key, basic_scheduler(s, sch, steps, denoise))
                cases.append({"key": key, "shift": shift.hex(), "scheduler": sch, "steps": steps, "denoise": denoise})
    for steps, w, h in FLUX2_CASES:
        g.add("flux2.%d.%dx%d" % (steps, w, h), flux2_scheduler(steps, w, h))
    g.set("flux2_cases", json.dumps(FLUX2_CASES))
    g.add("shifts", torch.tensor([model_sampling_flux_shift(*c) for c in SHIFT_CASES], dtype=torch.float64),
          tol=(1e-12, 0))
    g.set("cases", json.dumps(cases))
    g.set("shift_cases", json.dumps(SHIFT_CASES))
    print("golden:", g.save(), len(cases), "cases")


if __name__ == "__main__":
    main()

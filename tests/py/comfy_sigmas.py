#!/usr/bin/env python3
"""ComfyUI's sigma schedules written out from its formulas (facts only), float32 as torch evaluates them: every
operation rounded to float32 (torch computes `python_float / tensor` as reciprocal(tensor) * python_float), for
tests that check the server samples at exactly these sigmas. Prints them comma-separated, for kiln generate --sigmas.

    comfy_sigmas.py simple SHIFT STEPS DENOISE                          # KSampler / BasicScheduler simple
    comfy_sigmas.py simple-msf MAX_SHIFT BASE_SHIFT WIDTH HEIGHT STEPS   # ModelSamplingFlux + BasicScheduler simple
    comfy_sigmas.py flux2 STEPS WIDTH HEIGHT                             # Flux2Scheduler (steps dividing into
                                                                         # exact linspace points: 1, 2, 4, 8)
"""
import math
import struct
import sys


def f(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def shifted(mu, t):  # flux_time_shift / generalized_time_snr_shift (mu, 1, t)
    if t == 0:
        return 0.0
    e = f(math.exp(mu))
    d = f(e + f(f(1 / t) - 1))
    return f(f(1 / d) * e)


def simple_msf(max_shift, base_shift, width, height, steps):
    x1, x2 = 256, 4096  # nodes_model_advanced.py ModelSamplingFlux
    mm = (max_shift - base_shift) / (x2 - x1)
    b = base_shift - mm * x1
    mu = (width * height / (8 * 8 * 2 * 2)) * mm + b
    table = [shifted(mu, f((i + 1) / 10000)) for i in range(10000)]  # model_sampling.py, 10000 timesteps
    ss = len(table) / steps  # samplers.py simple_scheduler
    return [table[-(1 + int(x * ss))] for x in range(steps)] + [0.0]


def simple(shift, steps, denoise):  # BasicScheduler / KSampler: denoise < 1 keeps the tail of a longer schedule
    total = int(steps / denoise) if denoise < 1 else steps
    table = [shifted(shift, f((i + 1) / 10000)) for i in range(10000)]
    ss = len(table) / total
    return ([table[-(1 + int(x * ss))] for x in range(total)] + [0.0])[-(steps + 1):]


def flux2(steps, width, height):
    assert steps in (1, 2, 4, 8), "linspace(1, 0, steps + 1) is exact only for these"
    n = round(width * height / (16 * 16))  # nodes_flux.py Flux2Scheduler / compute_empirical_mu
    a1, b1, a2, b2 = 8.73809524e-05, 1.89833333, 0.00016927, 0.45666666
    if n > 4300:
        mu = a2 * n + b2
    else:
        m200, m10 = a2 * n + b2, a1 * n + b1
        a = (m200 - m10) / 190.0
        mu = a * steps + (m200 - 200.0 * a)
    return [shifted(mu, 1 - k / steps) for k in range(steps + 1)]


if __name__ == "__main__":
    kind, args = sys.argv[1], sys.argv[2:]
    if kind == "simple":
        sig = simple(float(args[0]), int(args[1]), float(args[2]))
    elif kind == "simple-msf":
        sig = simple_msf(float(args[0]), float(args[1]), int(args[2]), int(args[3]), int(args[4]))
    else:
        sig = flux2(int(args[0]), int(args[1]), int(args[2]))
    print(",".join("%.9g" % s for s in sig))

#!/usr/bin/env python3
"""Worst relative error of the attention softmax's 2^f polynomial (src/compute/cpu/attention_amx.c, exp2_512)
over f in [0, 1], evaluated in double with the f32 coefficients the kernel uses, on a grid of 2^20 + 1 points.
The kernel computes 2^x = p(x - floor x) * 2^floor(x), so this is its error before P is rounded to bf16.

    python3 tools/bench/exp2_fit_error.py
"""
import struct

# the coefficients as written in exp2_512, constant term first, rounded to f32 as the compiler does
COEFFS = [0.999925256, 0.695833445, 0.226067305, 0.0780244693]


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def main():
    c = [f32(v) for v in COEFFS]
    n = 1 << 20
    worst, at = 0.0, 0.0
    for i in range(n + 1):
        f = i / n
        p = ((c[3] * f + c[2]) * f + c[1]) * f + c[0]
        err = abs(p / 2.0 ** f - 1.0)
        if err > worst:
            worst, at = err, f
    print(f"degree-3 2^f on [0, 1]: worst relative error {worst:.3g} at f = {at:.4f} (rounding P to bf16: up to {2**-9:.3g})")


if __name__ == "__main__":
    main()

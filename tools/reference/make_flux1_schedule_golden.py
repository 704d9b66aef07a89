#!/usr/bin/env python3
"""FLUX.1 sigma schedules as FluxPipeline computes them, with the official code as oracle.

    /opt/kiln-ref/bin/python tools/reference/make_flux1_schedule_golden.py

Writes tests/data/tiny/flux1_scheduler_{dev,schnell}/scheduler_config.json (the official FLUX.1 [dev] and
[schnell] scheduler configs, key for key) and tests/data/golden/flux1_schedule.safetensors: for each config and
(height, width, steps) the sigmas of FlowMatchEulerDiscreteScheduler.set_timesteps called as FluxPipeline calls it
(sigmas = np.linspace(1, 1/n, n), mu = calculate_shift(image_seq_len, base_image_seq_len, max_image_seq_len,
base_shift, max_shift), image_seq_len = (H/16)(W/16)), stored bit for bit. "custom": a config with other
calculate_shift keys (so that reading them is checked).
"""
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
import common  # noqa: E402

CONFIGS = {
    "dev": {"base_image_seq_len": 256, "base_shift": 0.5, "max_image_seq_len": 4096, "max_shift": 1.15,
            "num_train_timesteps": 1000, "shift": 3.0, "use_dynamic_shifting": True},
    "schnell": {"base_image_seq_len": 256, "base_shift": 0.5, "max_image_seq_len": 4096, "max_shift": 1.15,
                "num_train_timesteps": 1000, "shift": 1.0, "use_dynamic_shifting": False},
    "custom": {"base_image_seq_len": 64, "base_shift": 0.3, "max_image_seq_len": 1024, "max_shift": 1.7,
               "num_train_timesteps": 1000, "shift": 3.0, "use_dynamic_shifting": True},
}
SIZES = [(64, 64, 2), (256, 256, 4), (512, 512, 28), (1024, 1024, 50), (768, 1360, 20), (48, 80, 4),
         (2048, 2048, 4), (1024, 1024, 1), (16, 16, 3)]


def main():
    from diffusers import FlowMatchEulerDiscreteScheduler
    from diffusers.pipelines.flux.pipeline_flux import calculate_shift, retrieve_timesteps
    g = common.Golden("flux1_schedule", "f32", "sigmas of FlowMatchEulerDiscreteScheduler.set_timesteps as "
                      "FluxPipeline calls it (linspace(1,1/n,n), mu = calculate_shift) for FLUX.1 [dev], [schnell] "
                      "and a custom config")
    keys = []
    for name, cfg in CONFIGS.items():
        folder = os.path.join(common.TINY, "flux1_scheduler_" + name)
        sched = FlowMatchEulerDiscreteScheduler(**cfg)
        sched.save_config(folder)
        for h, w, n in SIZES:
            sched = FlowMatchEulerDiscreteScheduler.from_pretrained(folder)
            N = (h // 16) * (w // 16)
            c = sched.config
            mu = calculate_shift(N, c.get("base_image_seq_len", 256), c.get("max_image_seq_len", 4096),
                                 c.get("base_shift", 0.5), c.get("max_shift", 1.15))
            ts, _ = retrieve_timesteps(sched, n, "cpu", sigmas=np.linspace(1.0, 1 / n, n), mu=mu)
            key = "%s.%dx%d.%d" % (name, h, w, n)
            g.add("sigmas." + key, sched.sigmas)  # exact: compared bit for bit
            g.add("mu." + key, torch.tensor([mu], dtype=torch.float64), tol=(1e-9, 0))
            keys.append(key)
    g.set("cases", json.dumps(keys))
    print("golden:", g.save(), len(keys), "cases")


if __name__ == "__main__":
    common.deterministic()
    main()

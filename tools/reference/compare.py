"""Compare a candidate safetensors file (e.g. tensors dumped by kiln while debugging) against a golden, with
exactly the rule of tests/data/golden/README.md: per tensor, every element within atol + rtol*|golden| and
the RMS difference within tolrms. Exit 1 on any failure or missing tensor.

    compare.py GOLDEN.safetensors CANDIDATE.safetensors [--only PREFIX] [--scale S]

--scale multiplies every bound (e.g. 0.5 to see how much head-room a passing run has). Inputs (metadata
"inputs") are compared too: a candidate that echoes them back must have them bit-exact.
"""
import argparse
import json
import sys

import numpy as np
from safetensors.numpy import load_file
from safetensors import safe_open


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("golden")
    ap.add_argument("candidate")
    ap.add_argument("--only", default="")
    ap.add_argument("--scale", type=float, default=1.0)
    a = ap.parse_args()
    with safe_open(a.golden, "np") as f:
        meta = f.metadata()
    if meta.get("kiln_golden") != "1":
        sys.exit("%s: not a kiln golden (kiln_golden != 1)" % a.golden)
    gold, cand = load_file(a.golden), load_file(a.candidate)
    inputs = set(json.loads(meta.get("inputs", "[]")))
    bad = 0
    for k in sorted(gold):
        if not k.startswith(a.only):
            continue
        g = gold[k].astype(np.float64)
        if k not in cand:
            print("MISSING  %s" % k)
            bad += 1
            continue
        c = cand[k].astype(np.float64)
        if c.shape != g.shape:
            print("SHAPE    %s golden %s candidate %s" % (k, list(g.shape), list(c.shape)))
            bad += 1
            continue
        atol, rtol = (float(x) * a.scale for x in meta.get("tol." + k, "0,0").split(","))
        tolrms = float(meta.get("tolrms." + k, "inf")) * a.scale
        d = np.abs(c - g)
        worst = float(d.max()) if d.size else 0.0
        rms = float(np.sqrt((d ** 2).mean())) if d.size else 0.0
        ok = bool(np.all(d <= atol + rtol * np.abs(g))) and rms <= tolrms
        bad += not ok
        print("%s %-34s max %.3g (atol %.3g)  rms %.3g (tolrms %.3g)%s" % (
            "ok      " if ok else "FAIL    ", k, worst, atol, rms, tolrms, "  [input]" if k in inputs else ""))
    print("%d tensor(s) failed" % bad if bad else "all tensors within tolerance")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

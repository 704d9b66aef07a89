#!/usr/bin/env python3
"""serve_load_report.py - checks of a `kiln bench serve` report for tests/cli/bench_serve_load.sh (standard
library only). Every figure is recomputed here from the request records with definitions written out again
(percentiles by linear interpolation at rank p/100 (n - 1), numpy's default; the SLO unit as vLLM-Omni's
median of latency / patch-steps over the warm-up), so a bug shared by the writer and `kiln bench check` is
still caught. Then a scenario's expectations about the double behind it (its service time and one worker).

    serve_load_report.py verify REPORT
    serve_load_report.py comfy-queue REPORT | closed REPORT | openai REPORT N_FAILED | kiln REPORT
    serve_load_report.py poisson SAME1 SAME2 OTHER RATE
"""
import json, math, sys


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return None
    pos = p / 100.0 * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return None if n == 0 else (xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2)


def close(a, b, tol=1e-7):
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= tol + tol * abs(b)


def patches(r):
    return max(r["width"] * r["height"] / 256.0, 1.0) * max(r["steps"], 1)


def verify(rep):
    assert rep["kind"] == "serve-load" and rep["schema"] == "kiln-bench-report/1"
    warm = rep["baseline"]["requests"]
    units = [w["latency_s"] / patches(w) for w in warm if w["ok"]]
    unit = median(units)
    assert close(rep["baseline"]["unit_s"], unit), ("unit", rep["baseline"]["unit_s"], unit)
    scale = rep["config"]["slo_scale"]
    for run in rep["runs"]:
        reqs, s = run["requests"], run["summary"]
        ok = [r for r in reqs if r["ok"]]
        lat = [r["done_s"] - r["sent_s"] for r in ok]
        for r in reqs:
            assert close(r["latency_s"], r["done_s"] - r["sent_s"]), r
            assert r["sent_s"] >= r["scheduled_s"] - 1e-6, r
            dl = unit * patches(r) * scale
            assert close(r["deadline_s"], dl), (r["deadline_s"], dl)
            assert r["slo_met"] == (r["ok"] and r["latency_s"] <= dl), r
        assert s["sent"] == len(reqs) and s["completed"] == len(ok) and s["errors"] == len(reqs) - len(ok)
        duration = max(r["done_s"] for r in reqs)
        assert close(s["duration_s"], duration)
        assert close(s["throughput_rps"], len(ok) / duration)
        for key, xs in (("latency_s", lat), ("queue_wait_s", [r["queue_wait_s"] for r in ok if r["queue_wait_s"] is not None]),
                        ("exec_s", [r["exec_s"] for r in ok if r["exec_s"] is not None])):
            got = s[key]
            assert got["n"] == len(xs), (key, got["n"], len(xs))
            for p in (50, 90, 99):
                assert close(got["p%d" % p], pct(xs, p)), (run["label"], key, p, got["p%d" % p], pct(xs, p))
        met = sum(1 for r in reqs if r["ok"] and r["latency_s"] <= unit * patches(r) * scale)
        assert s["slo"]["met"] == met and s["slo"]["total"] == len(reqs), (s["slo"], met)
        assert close(s["slo"]["attainment"], met / len(reqs))
        assert close(s["max_send_lag_s"], max(r["sent_s"] - r["scheduled_s"] for r in reqs))


def load(path):
    rep = json.load(open(path))
    verify(rep)
    return rep


def comfy_queue(rep):
    # one worker, 0.2 s a request: 10/s is twice its capacity, 2/s well below it (constant arrivals). The bounds
    # leave room for a loaded machine (load average 17 on 2 cores seen), which stretches the service time.
    for w in rep["baseline"]["requests"]:
        assert 0.19 <= w["latency_s"] <= 1.0, w
    fast, slow = rep["runs"]
    assert fast["rate_rps"] == 10 and slow["rate_rps"] == 2
    r = fast["requests"]
    # open loop: sent on time (the slack is scheduling jitter on a loaded 2-core machine; a closed loop lags seconds)
    assert fast["summary"]["max_send_lag_s"] < 0.12, fast["summary"]["max_send_lag_s"]
    for i, q in enumerate(r):
        assert abs(q["sent_s"] - i / 10.0) < 0.12, (i, q["sent_s"])
        # FIFO, one server: done_i >= 0.2 (i + 1), sent_i = i / 10 - no request can beat it (a loaded machine
        # stretches the double's service time, so only the bound is exact)
        theory = 0.2 + 0.1 * i
        assert q["latency_s"] >= theory - 0.03, (i, q["latency_s"], theory)
    qw = [q["queue_wait_s"] for q in r]
    assert qw[-1] - qw[0] > 0.9 * 0.1 * (len(r) - 1), qw  # the queue grows by >= 0.1 s a request
    assert 2.5 <= fast["summary"]["throughput_rps"] <= 5.2, fast["summary"]["throughput_rps"]  # capacity 5/s
    assert 0 < fast["summary"]["slo"]["attainment"] <= 0.8, fast["summary"]["slo"]
    s = slow["summary"]
    assert s["queue_wait_s"]["p99"] < 0.3, s["queue_wait_s"]
    assert s["slo"]["attainment"] >= 0.9, s["slo"]
    assert s["max_send_lag_s"] < 0.12


def closed(rep):
    (run,) = rep["runs"]
    r = run["requests"]
    assert run["concurrency"] == 1 and run["rate_rps"] is None
    for a, b in zip(r, r[1:]):
        assert b["sent_s"] >= a["done_s"] - 0.005, (a, b)  # one client: the next leaves after the last answer
    assert run["summary"]["queue_wait_s"]["p99"] < 0.12, run["summary"]["queue_wait_s"]
    assert 0.19 <= run["summary"]["latency_s"]["p50"] <= 0.4, run["summary"]["latency_s"]


def openai(rep, n_failed):
    (run,) = rep["runs"]
    r, s = run["requests"], run["summary"]
    assert rep["target"]["kind"] == "openai-images"
    assert s["errors"] == n_failed, s
    assert all("HTTP 500: scripted failure" in q["error"] for q in r if not q["ok"]), [q["error"] for q in r]
    assert s["queue_wait_s"]["n"] == 0 and s["exec_s"]["n"] == 0  # the API reports no execution time
    assert r[-1]["latency_s"] - r[0]["latency_s"] > 0.8, [q["latency_s"] for q in r]  # 10/s into one 0.2 s worker
    assert s["slo"]["met"] <= s["completed"]


def kiln(rep):
    assert len(rep["runs"]) == 3
    steps = set()
    prompts = set()
    for run in rep["runs"]:
        s = run["summary"]
        assert s["errors"] == 0 and s["completed"] == s["sent"], s["error_messages"]
        assert s["exec_s"]["n"] == s["completed"]  # kiln serve stamps execution in /history
        steps |= {q["steps"] for q in run["requests"]}
        prompts |= {q["prompt_index"] for q in run["requests"]}
    assert steps == {1, 2} and len(prompts) > 1, (steps, prompts)


def poisson(a, b, c, rate):
    sa = [q["scheduled_s"] for q in a["runs"][0]["requests"]]
    assert sa == [q["scheduled_s"] for q in b["runs"][0]["requests"]], "same seed, other schedule"
    assert sa != [q["scheduled_s"] for q in c["runs"][0]["requests"]], "other seed, same schedule"
    gaps = [y - x for x, y in zip(sa, sa[1:])]
    mean = sum(gaps) / len(gaps)
    assert abs(mean - 1 / rate) < 0.35 / rate, (mean, 1 / rate)
    assert min(gaps) < 0.5 / rate < max(gaps), gaps  # exponential gaps, not constant ones


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "verify":
        load(args[0])
    elif cmd == "comfy-queue":
        comfy_queue(load(args[0]))
    elif cmd == "closed":
        closed(load(args[0]))
    elif cmd == "openai":
        openai(load(args[0]), int(args[1]))
    elif cmd == "kiln":
        kiln(load(args[0]))
    elif cmd == "poisson":
        poisson(load(args[0]), load(args[1]), load(args[2]), float(args[3]))
    else:
        sys.exit("unknown check " + cmd)


if __name__ == "__main__":
    main()

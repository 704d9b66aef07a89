#!/usr/bin/env bash
# Before/after for the CPU kernels, measured side by side: runs `kiln bench-ops` of two binaries in A/B/B/A
# order for R rounds and prints, per op, the median and the best CPU ms per thread of each and their ratios
# (how many times faster B is). On a shared machine these are the figures to quote; absolute rates move with
# the neighbours. Interference only ever adds time, so the best-of ratio is the steadier one: an A/A run of
# this script on the 2-vCPU build VM read 0.69-1.31x by medians of 4 runs.
# Usage: scripts/bench-ops-ab.sh OLD_KILN NEW_KILN ROUNDS [bench-ops args, e.g. --shapes all --only dit.]
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 OLD_KILN NEW_KILN ROUNDS [bench-ops args...]" >&2; exit 2; }
a=$1 b=$2 rounds=$3
shift 3
out=$(mktemp -d /tmp/kiln-ab-XXXXXX)
for ((r = 0; r < rounds; r++)); do
    for side in A B B A; do
        bin=$a
        [ "$side" = B ] && bin=$b
        "$bin" bench-ops --no-blas "$@" | grep -v '^#' >>"$out/$side.txt"
    done
done
python3 - "$out/A.txt" "$out/B.txt" <<'PY'
import re, statistics, sys
def load(path):
    d = {}
    for line in open(path):
        m = re.match(r"(\S+)\s+(.*?)\s+([0-9.]+) ms\s+([0-9.]+) ms", line)
        if m:
            d.setdefault((m.group(1), m.group(2)), []).append(float(m.group(4)))
    return d
A, B = load(sys.argv[1]), load(sys.argv[2])
n = len(next(iter(A.values()), []))
print(f"{'op':24s} {'shape':30s} {'A med ms':>9s} {'B med ms':>9s} {'A/B':>6s} {'A best':>9s} {'B best':>9s} {'A/B':>6s}  ({n} runs each)")
for key in A:
    if key in B:
        ma, mb, ba, bb = statistics.median(A[key]), statistics.median(B[key]), min(A[key]), min(B[key])
        print(f"{key[0]:24s} {key[1]:30s} {ma:9.2f} {mb:9.2f} {ma / mb:5.2f}x {ba:9.2f} {bb:9.2f} {ba / bb:5.2f}x")
PY
rm -rf "$out"

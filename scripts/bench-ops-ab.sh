#!/usr/bin/env bash
# Before/after for the CPU kernels, measured side by side: runs `kiln bench-ops` of two binaries in A/B/B/A
# order for R rounds and prints, per op, the median CPU ms per thread of each and the ratio (how many times
# faster B is). On a shared machine this is the figure to quote; absolute rates move with the neighbours.
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
print(f"{'op':24s} {'shape':30s} {'A cpu ms':>10s} {'B cpu ms':>10s} {'A/B':>6s}  (medians of {len(next(iter(A.values()), []))} runs each)")
for key in A:
    if key in B:
        ma, mb = statistics.median(A[key]), statistics.median(B[key])
        print(f"{key[0]:24s} {key[1]:30s} {ma:10.2f} {mb:10.2f} {ma / mb:6.2f}x")
PY
rm -rf "$out"

#!/usr/bin/env bash
# bench_ops.sh - `kiln bench-ops`: the peak microbenchmark prints a positive rate for each instruction kind the
# CPU has; a small op subset runs and prints its rows; bad arguments exit 2 with a message. (Speed itself is
# shown by running the command, never judged here.)
set -euo pipefail
: "${KILN_BIN:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$KILN_BIN" bench-ops --peak --threads 1 > "$tmp/peak" || fail "--peak exit $?"
grep -Eq '^# peak f32 fma avx2 +[0-9.]+ GFLOP/s' "$tmp/peak" || fail "peak output: $(cat "$tmp/peak")"
if grep -q avx2 /proc/cpuinfo; then
    grep -Eq '^# peak f32 fma avx2 +0\.0 ' "$tmp/peak" && fail "avx2 CPU but a zero AVX2 peak"
fi
"$KILN_BIN" bench-ops --only dit.rope --repeat 1 --no-blas --threads 1 > "$tmp/rope" || fail "rope exit"
grep -Eq '^dit\.rope +\[1536,6144\] .* GB/s' "$tmp/rope" || fail "rope row: $(cat "$tmp/rope")"
KILN_CPU=generic "$KILN_BIN" bench-ops --only dit.gated_add --repeat 1 --no-blas --threads 2 > "$tmp/gen" || fail "generic tier"
grep -q 'backend cpu-generic' "$tmp/gen" || fail "KILN_CPU=generic not honoured: $(head -1 "$tmp/gen")"
set +e
"$KILN_BIN" bench-ops --shapes 999 > /dev/null 2> "$tmp/err"
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "--shapes 999 exit $rc, want 2"
grep -q "shapes takes 512, 1024 or all" "$tmp/err" || fail "message: $(cat "$tmp/err")"
echo "ok bench_ops"

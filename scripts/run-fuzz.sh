#!/usr/bin/env bash
# Runs every libFuzzer target in BUILD_DIR for SECONDS each, starting from its committed seed corpus
# tests/fuzz/corpus/<target>/ (new finds go to a scratch copy, so the committed corpus stays as it is).
# Any crash, leak or sanitizer report fails the run; the reproducer is left in build-fuzz/artifacts/.
set -euo pipefail
build=${1:-build-fuzz}
seconds=${2:-60}
root=$(cd "$(dirname "$0")/.." && pwd)
shopt -s nullglob
targets=("$build"/fuzz_*)
if [ ${#targets[@]} -eq 0 ]; then echo "run-fuzz: no fuzz targets in $build"; exit 1; fi
mkdir -p "$build/artifacts"
for t in "${targets[@]}"; do
  [ -x "$t" ] || continue # (a rerun also finds this script's own build-fuzz/fuzz_*.log files)
  name=$(basename "$t")
  seeds="$root/tests/fuzz/corpus/$name"
  work="$build/corpus-$name"
  rm -rf "$work"; mkdir -p "$work"
  [ -d "$seeds" ] && cp -r "$seeds"/. "$work"/
  echo "run-fuzz: $name for ${seconds}s from $(ls "$work" | wc -l) seeds"
  dict=()
  [ -f "$root/tests/fuzz/$name.dict" ] && dict=(-dict="$root/tests/fuzz/$name.dict")
  ASAN_OPTIONS=detect_leaks=1 "$t" "${dict[@]}" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
    -artifact_prefix="$build/artifacts/$name-" -print_final_stats=1 "$work" 2>"$build/$name.log" \
    || { tail -50 "$build/$name.log"; echo "run-fuzz: $name FAILED"; exit 1; }
  grep -E 'stat::number_of_executed_units|cov:' "$build/$name.log" | tail -2
done
echo "run-fuzz: all targets clean"

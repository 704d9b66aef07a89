#!/usr/bin/env bash
# Runs every libFuzzer target in BUILD_DIR for SECONDS each, starting from its committed seed corpus
# tests/fuzz/corpus/<target>/ (new finds go to a scratch copy, so the committed corpus stays as it is).
# JOBS targets run at once (default: the cores; each target is one single-threaded process), so every target
# still gets its whole SECONDS while the run takes a JOBS-th of the time.
# Any crash, leak or sanitizer report fails the run; the reproducer is left in build-fuzz/artifacts/.
set -euo pipefail
build=${1:-build-fuzz}
seconds=${2:-60}
jobs=${3:-${JOBS:-$(nproc)}}
root=$(cd "$(dirname "$0")/.." && pwd)
shopt -s nullglob
targets=()
for t in "$build"/fuzz_*; do
  [ -x "$t" ] && [ -f "$t" ] && targets+=("$t") # (a rerun also finds this script's own build-fuzz/fuzz_*.log files)
done
if [ ${#targets[@]} -eq 0 ]; then echo "run-fuzz: no fuzz targets in $build"; exit 1; fi
mkdir -p "$build/artifacts"

# One target: its own scratch corpus and log; the exit status says whether it found anything.
fuzz_one() {
  local t=$1 name seeds work
  name=$(basename "$t")
  seeds="$root/tests/fuzz/corpus/$name"
  work="$build/corpus-$name"
  rm -rf "$work"; mkdir -p "$work"
  [ -d "$seeds" ] && cp -r "$seeds"/. "$work"/
  local dict=()
  [ -f "$root/tests/fuzz/$name.dict" ] && dict=(-dict="$root/tests/fuzz/$name.dict")
  ASAN_OPTIONS=detect_leaks=1 "$t" "${dict[@]}" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
    -artifact_prefix="$build/artifacts/$name-" -print_final_stats=1 "$work" 2>"$build/$name.log"
}

failed=()
declare -A name_of=()
finish_next() { # waits for whichever running target ends first and reports it (bash >= 5.1: wait -n -p)
  local pid rc=0
  wait -n -p pid || rc=$?
  local name=${name_of[$pid]}
  unset "name_of[$pid]"
  if [ "$rc" -eq 0 ]; then
    echo "run-fuzz: $name clean: $(grep -E 'stat::number_of_executed_units' "$build/$name.log" | tail -1)"
  else
    tail -50 "$build/$name.log"; echo "run-fuzz: $name FAILED (status $rc)"; failed+=("$name")
  fi
}
for t in "${targets[@]}"; do
  while [ ${#name_of[@]} -ge "$jobs" ]; do finish_next; done
  echo "run-fuzz: $(basename "$t") for ${seconds}s"
  fuzz_one "$t" & name_of[$!]=$(basename "$t")
done
while [ ${#name_of[@]} -gt 0 ]; do finish_next; done
if [ ${#failed[@]} -gt 0 ]; then echo "run-fuzz: FAILED: ${failed[*]}"; exit 1; fi
echo "run-fuzz: all ${#targets[@]} targets clean"

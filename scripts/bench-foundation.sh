#!/usr/bin/env bash
# Foundation benchmarks (docs/benchmarks.md, "foundation"): memory bandwidth and bf16->f32 conversion as a
# fraction of it; then a 16 GiB checkpoint written by `kiln mkweights` (its speed), opened by
# `kiln bench-sys --checkpoint` (RSS after open must stay under 100 MB: opening copies nothing), hashed by
# `kiln inspect --sha256` (streaming), and deleted.
# Usage: scripts/bench-foundation.sh [WORKDIR]   (WORKDIR needs ~17.2 GB free; default a fresh dir in /tmp)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${KILN_BIN:-$root/build/kiln}
[ -x "$bin" ] || { echo "bench-foundation: no kiln binary at $bin (make build, or set KILN_BIN)"; exit 2; }
work=${1:-$(mktemp -d /tmp/kiln-bench-foundation-XXXXXX)}
mkdir -p "$work"
trap 'rm -rf "$work/ck" "$work/m16.json"' EXIT

echo "== machine"
lscpu | grep -E 'Model name|^CPU\(s\)|Flags' | sed 's/Flags:.*\(avx512_bf16\).*/Flags: ... avx512f avx512_bf16 ... (AVX-512 present)/' || true
echo "== kiln bench-sys (bandwidth, bf16->f32)"
"$bin" bench-sys --mb "${KILN_BENCH_MB:-1024}" --reps "${KILN_BENCH_REPS:-5}"

echo "== 16 GiB checkpoint: 64 bf16 tensors of [16384, 8192] (256 MiB each)"
python3 - "$work/m16.json" <<'PY'
import json, sys
t = [{"name": f"blocks.{i}.weight", "dtype": "BF16", "shape": [16384, 8192]} for i in range(64)]
json.dump({"format": "kiln-manifest/1", "model": "bench-16g", "component": "dit", "layout": "bfl",
           "source": "scripts/bench-foundation.sh", "files": [{"path": "bench-16g.safetensors", "tensors": t}]},
          open(sys.argv[1], "w"))
PY
"$bin" mkweights --manifest "$work/m16.json" --out "$work/ck" --seed 1 2>/dev/null
ls -l "$work/ck/bench-16g.safetensors"
echo "== open it: RSS before/after"
"$bin" bench-sys --mb 16 --reps 1 --checkpoint "$work/ck/bench-16g.safetensors" | head -2
echo "== sha256 of the 16 GiB file (streamed)"
start=$(date +%s.%N)
"$bin" inspect --sha256 --summary "$work/ck/bench-16g.safetensors" | grep -E '^    [0-9a-f]{64}' || true
end=$(date +%s.%N)
python3 -c "import os,sys; s=os.path.getsize('$work/ck/bench-16g.safetensors'); t=$end-$start; print(f'  {s/1e9:.2f} GB in {t:.1f} s = {s/1e9/t:.2f} GB/s')"

#!/usr/bin/env bash
# serve_requests.sh - `kiln serve --device cuda` on the emulated GPU (the KILN_CUDA_EMU build): several requests
# in ONE process, which is where the CUDA backend's state lives - the per-request arena plan, the GEMM algorithm
# cache, the CUDA-graph cache keyed by shape and buffer addresses. Requests: 64x64, 96x64 (another shape and a
# larger plan: the arena is re-planned), 64x64 again (its graph must be rebuilt or replayed with pointers that
# are still valid), then 64x64 with the CPU backend's server for the reference. The arena is fixed
# (KILN_CUDA_ARENA_MB=64), so that what moves between the requests is the GEMM/im2col scratch, which the larger
# image grows: graphs captured with its old address must not be replayed (a per-request arena re-plan would
# invalidate them anyway and hide that; tests/cuda_emu/pipeline.sh runs the re-planned arena).
#   - the third image equals the first byte for byte (a stale graph or a moved buffer shows as other pixels or as
#     an emulator fault);
#   - every image is >= 30 dB from the CPU server's (FAST on both: bf16 products, f32 sums; CUDA's attention is
#     f32 where the CPU's runs bf16 tiles);
#   - the close line reports graphs captured and replayed.
# ~3 min on 2 cores (the emulator runs every GPU thread).
source "$KILN_SOURCE_DIR/tests/cli/lib/serve_common.bash"
source "$KILN_SOURCE_DIR/tests/cuda_emu/graphs.bash"
make_models
gen() { # gen SIZE NAME
  local code
  code=$(curl -s -m 900 -o "$SCRATCH/$2.json" -w '%{http_code}' "$(url /v1/images/generations)" \
    -H 'Content-Type: application/json' \
    -d "{\"prompt\":\"a red fox in the snow\",\"size\":\"$1\",\"seed\":11,\"response_format\":\"b64_json\"}" || true)
  [ "$code" = 200 ] || { echo "status $code: $(head -c 300 "$SCRATCH/$2.json")"; return 1; }
  python3 -c "import base64,json,sys; open(sys.argv[2],'wb').write(base64.b64decode(json.load(open(sys.argv[1]))['data'][0]['b64_json']))" \
    "$SCRATCH/$2.json" "$SCRATCH/$2.png"
}
same_pixels() { python3 "$KILN_SOURCE_DIR/tests/gpu/report.py" png "$1" "$2" "$3"; }

KILN_LOG=info KILN_CUDA_ARENA_MB=64 start_server --device cuda --unet flux-2-klein-4b.safetensors
for r in "64x64 a" "96x64 b" "64x64 c"; do
  set -- $r
  if gen "$1" "$2"; then ok "request $2 ($1) on the emulated GPU"; else fail "request $2 ($1)"; fi
done
stop_server
if [ -s "$SCRATCH/c.png" ] && same_pixels "$SCRATCH/a.png" "$SCRATCH/c.png" inf >/dev/null; then
  ok "the third request (64x64 again) gives the first one's pixels"
else
  fail "the third request's pixels differ from the first's"
fi
check_graphs "$SCRATCH/server.log" 2

start_server --unet flux-2-klein-4b.safetensors
if gen 64x64 cpu && gen 96x64 cpu_b; then ok "the CPU server's references"; else fail "the CPU server"; fi
stop_server
for p in "a cpu" "b cpu_b"; do
  set -- $p
  if r=$(same_pixels "$SCRATCH/$1.png" "$SCRATCH/$2.png" 30); then ok "request $1 vs the CPU: $r"; else fail "request $1 vs the CPU: $r"; fi
done
[ $fails = 0 ] || { tail -40 "$SCRATCH/server.log"; exit 1; }
echo "serve_requests: all passed"

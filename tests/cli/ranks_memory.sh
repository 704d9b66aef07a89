#!/usr/bin/env bash
# ranks_memory.sh - ranks of unequal memory plan alike (docs/parallel.md "Limits", pipeline/mem_agree.h): every
# rank plans a request with the tightest rank's memory limit, so all accept or all refuse, and all tile the VAE
# decode alike. The ranks are given different limits with mpirun's MPMD syntax (`-np 1 kiln ... : -np 1 kiln ...`),
# rank 1 the tight one, and KILN_COMM_TIMEOUT=120, so ranks out of step would show as a wait of minutes:
# - the agreement alone (test_pipeline_mem_agree under mpirun, 2 and 3 ranks);
# - `kiln serve --sp 2`, 2 ranks: a request only rank 1 cannot fit is refused through the OpenAI route within
#   seconds, rank 0's error naming rank 1 as the tightest, and the server keeps serving: the next request, which
#   fits rank 1 only in tiles, is decoded in the same tiles by both ranks (the distributed decode) and gives the
#   single-rank server's image made with rank 1's limit, pixel for pixel; SIGTERM still ends every rank cleanly;
# - `kiln generate`, 2 ranks: the same refusal at once on both ranks, and the same tiled image, byte for byte.
# Without the agreement the refusal waits for the time-out, so the generate part stops at its first failure.
# The sizes are the tiny model's (the estimate of a 1024x1024 request is ~0.08 GB even in 32-latent tiles, a
# 512x512 one fits 0.07 GB only in tiles); a change to the estimate that moves them fails here loudly.
source "$(dirname "$0")/lib/serve_common.bash"
source "$(dirname "$0")/lib/ranks_common.bash"
export KILN_COMM_TIMEOUT=120
TIGHT=0.07 # rank 1's GB
make_models
tiny=$KILN_SOURCE_DIR/tests/data/tiny/diffusers
same_pixels() { [ -s "$1" ] && [ -s "$2" ] && cmp -s <(idat "$1") <(idat "$2"); }
gen() { timeout 200 "$KILN_BIN" generate -q -p "a red fox" --model "$tiny" --steps 2 --seed 5 "$@"; }
# SIZE OUT LIMIT1 [generate flags]: rank 0 with 100 GB, rank 1 with LIMIT1. The timeout guards against a hang
# (120 s: a 512x512 pair of ranks under ASan on a loaded 2-core machine took over 40); the refusal's own speed is
# checked by its "refused in N s" line below.
mpmd_gen() {
  local sz=$1 out=$2 lim=$3; shift 3
  local g=(generate -q -p "a red fox" --model "$tiny" --steps 2 --seed 5 -W "$sz" -H "$sz" -o "$out" "$@")
  timeout 120 mpirun --oversubscribe -x KILN_THREADS -x ASAN_OPTIONS -x KILN_COMM_TIMEOUT -x KILN_LOG \
    -np 1 "$KILN_BIN" "${g[@]}" --memory-limit 100 : -np 1 "$KILN_BIN" "${g[@]}" --memory-limit "$lim"
}

# --- the agreement itself over 2 and 3 ranks (tests/unit/test_pipeline_mem_agree.c: MIN, unknown limits, ties)
agree_test=${KILN_MEM_AGREE_TEST:-$(dirname "$KILN_BIN")/test_pipeline_mem_agree}
for np in 2 3; do
  out=$(timeout 60 mpirun --oversubscribe -np "$np" -x ASAN_OPTIONS "$agree_test" 2>&1 || true)
  [ "$(grep -c "memory agreement ok" <<<"$out")" -eq "$np" ] && ok "$np ranks: the agreement (MIN, unknown, tie, fixed)" \
    || fail "$np ranks: the agreement: $out"
done

# --- kiln serve: the single-rank reference at rank 1's limit, then the two ranks
openai() { # SIZE NAME: the status in $SCRATCH/code, the body in $SCRATCH/NAME.json, the image in $SCRATCH/NAME.png
  curl -s -m 100 -o "$SCRATCH/$2.json" -w '%{http_code}' "$(url /v1/images/generations)" -H 'Content-Type: application/json' \
    -d "{\"prompt\":\"a red fox in the snow\",\"size\":\"$1\",\"seed\":11,\"response_format\":\"b64_json\"}" >"$SCRATCH/code" || true
  [ "$(cat "$SCRATCH/code")" = 200 ] || return 1
  python3 -c "import base64,json,sys; open(sys.argv[2],'wb').write(base64.b64decode(json.load(open(sys.argv[1]))['data'][0]['b64_json']))" \
    "$SCRATCH/$2.json" "$SCRATCH/$2.png"
}
start_server --front-end-root none --memory-limit "$TIGHT"
openai 512x512 one || fail "single-rank server at $TIGHT GB, 512x512: $(cat "$SCRATCH/code") $(head -c 300 "$SCRATCH/one.json")"
stop_server

# shellcheck disable=SC2046 # serve_args: paths without spaces
KILN_LOG=info launch_ranks -np 1 "$KILN_BIN" $(serve_args) --sp 2 --memory-limit 100 \
  : -np 1 "$KILN_BIN" $(serve_args) --sp 2 --memory-limit "$TIGHT"
t0=$SECONDS
openai 1024x1024 big && fail "serve, rank 1 tight: the 1024x1024 request was accepted"
el=$((SECONDS - t0))
if [ "$el" -lt 30 ] && [ "$(cat "$SCRATCH/code")" != 200 ] && [ "$(cat "$SCRATCH/code")" != 000 ] \
  && grep -q "not enough memory.* GB is available (rank 1 of 2, the tightest)" "$SCRATCH/big.json"; then
  ok "serve, rank 1 tight: a request it cannot fit is refused in ${el} s (HTTP $(cat "$SCRATCH/code")), naming rank 1"
else fail "serve, rank 1 tight: HTTP $(cat "$SCRATCH/code") after ${el} s: $(head -c 400 "$SCRATCH/big.json")"; fi
before=$(grep -c "VAE decode in 32x32-latent tiles" "$RANKS_LOG" || true) # the refused request's plans
if openai 512x512 two && same_pixels "$SCRATCH/one.png" "$SCRATCH/two.png"; then
  ok "serve, rank 1 tight: the server keeps serving; the next request is the single-rank image at rank 1's limit"
else fail "serve, rank 1 tight: the request after the refusal: HTTP $(cat "$SCRATCH/code") $(head -c 300 "$SCRATCH/two.json")"; fi
tiled=$(( $(grep -c "VAE decode in 32x32-latent tiles" "$RANKS_LOG" || true) - before ))
[ "$tiled" -eq 2 ] && ok "serve: both ranks decoded the 512x512 request in the same tiles" \
  || fail "serve: the 512x512 request's tiles logged by $tiled ranks, want 2"
kill -TERM "$(rank_pid 0)"
res=$(wait_ranks 30)
[ -n "$res" ] && [ "${res%% *}" = 0 ] && ok "serve: SIGTERM to rank 0 ends every rank, status 0" \
  || { fail "serve: stopping: '$res': $(tail -5 "$RANKS_LOG")"; kill_job; }
# --- kiln generate
t0=$SECONDS
out=$(mpmd_gen 1024 "$SCRATCH/refused.png" "$TIGHT" 2>&1) && rc=0 || rc=$?
el=$((SECONDS - t0))
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$el" -lt 40 ] && grep -q "not enough memory: 1024x1024 .* GB is available (rank 1 of 2, the tightest)" <<<"$out" \
  && [ ! -e "$SCRATCH/refused.png" ]; then
  ok "generate, rank 1 tight: a request it cannot fit is refused in ${el} s (exit $rc), naming rank 1"
else fail "generate, rank 1 tight: exit $rc after ${el} s: $out"; finish; fi # out of step: the rest would wait too
gen -W 512 -H 512 --memory-limit "$TIGHT" -o "$SCRATCH/one-tight.png" 2>"$SCRATCH/one.err" || fail "single-rank 512x512 at $TIGHT GB: $(cat "$SCRATCH/one.err")"
gen -W 512 -H 512 -o "$SCRATCH/one-untiled.png" || fail "single-rank 512x512"
cmp -s "$SCRATCH/one-tight.png" "$SCRATCH/one-untiled.png" && fail "the tight single-rank image is the untiled one (no tiling: the sizes moved)"
t0=$SECONDS
out=$(KILN_LOG=info mpmd_gen 512 "$SCRATCH/mpmd.png" "$TIGHT" 2>&1) && rc=0 || rc=$?
el=$((SECONDS - t0))
tiles=$(grep -c "VAE decode in 32x32-latent tiles" <<<"$out" || true)
if [ "$rc" -eq 0 ] && [ "$tiles" -eq 2 ] && cmp -s "$SCRATCH/one-tight.png" "$SCRATCH/mpmd.png"; then
  ok "generate, rank 1 tight: both ranks tile the decode alike; the single-rank image at rank 1's limit, byte for byte (${el} s)"
else fail "generate, rank 1 tight: exit $rc, $tiles ranks tiled, image $(cmp "$SCRATCH/one-tight.png" "$SCRATCH/mpmd.png" 2>&1): $(tail -5 <<<"$out")"; fi

finish

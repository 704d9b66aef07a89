#!/usr/bin/env bash
# serve_ranks.sh - `kiln serve` on a multi-rank engine (docs/parallel.md "A multi-rank server"), tiny model,
# oversubscribed Open MPI on a small machine:
# - `mpirun -np 2 kiln serve --sp 2` (Ulysses over 2 ranks): one OpenAI /v1/images/generations request and one
#   ComfyUI /prompt request give the single-rank server's pixels byte for byte (SP splits no sum); a batch of two
#   queued jobs (one shared forward, several calls in one broadcast) too;
# - `mpirun -np 2 kiln serve --tp 2 --exact`: the same two requests >= 60 dB from the single-rank --exact images
#   (TP's all-reduce sums in another order: parallel_mpi.sh states the bar); a LoRA graph, which TP cannot split, is refused by name
#   and so does the next request after it, after a ComfyUI /interrupt of a running job and after /free (the ranks
#   stay in step: the cancel and the unload are broadcast too);
# - SIGTERM to rank 0: every rank exits, status 0, within seconds; --sp not matching the ranks is refused by name;
# - rank 1 killed while idle: mpirun ends the job within seconds with "rank 1 ... exited on signal 9", the client's
#   request does not hang; rank 1 stopped (SIGSTOP) while idle: rank 0's next request makes a collective time out
#   (KILN_COMM_TIMEOUT=3) and every rank exits with the time-out's message.
# Every mpirun runs under `timeout`, so a hang fails the test instead of blocking it (lib/ranks_common.bash).
# Ranks of unequal memory: ranks_memory.sh.
source "$(dirname "$0")/lib/serve_common.bash"
source "$(dirname "$0")/lib/ranks_common.bash"
make_models
mkdir -p "$MODELS/loras"
cp "$KILN_SOURCE_DIR/tests/data/lora/lora-kohya.safetensors" "$MODELS/loras/"

# the requests: OpenAI (b64 PNG in the answer) and the ComfyUI template graph (its SaveImage file via /view)
openai() { # NAME: writes $SCRATCH/NAME.png
  curl -s -m 120 -o "$SCRATCH/body" "$(url /v1/images/generations)" -H 'Content-Type: application/json' \
    -d '{"prompt":"a red fox in the snow","size":"64x64","seed":11,"response_format":"b64_json"}' || return 1
  python3 -c "import base64,json,sys; open(sys.argv[2],'wb').write(base64.b64decode(json.load(open(sys.argv[1]))['data'][0]['b64_json']))" \
    "$SCRATCH/body" "$SCRATCH/$1.png"
}
comfy_body() { # NAME SEED [python edit]: the template graph at 64x64, 3 steps
  graph_body flux2_klein_t2i_template_api.json "
g['75:66']['inputs'].update(width=64, height=64); g['75:62']['inputs'].update(width=64, height=64, steps=3)
g['75:73']['inputs']['noise_seed'] = $2; g['75:74']['inputs']['text'] = 'a lighthouse at dusk'
g['9']['inputs']['filename_prefix'] = 'ranks/$1'
${3:-}"
}
comfy() { # NAME SEED [edit]: runs it, copies the image to $SCRATCH/NAME.png; the history stays in $SCRATCH/body
  local id
  id=$(comfy_body "$@" | curl -s -d @- "$(url /prompt)" | python3 -c "import json,sys; print(json.load(sys.stdin)['prompt_id'])") || return 1
  wait_history "$id" || return 1
  curl -s -o "$SCRATCH/$1.png" "$(url "/view?filename=${1}_00001_.png&subfolder=ranks&type=output")"
}
same_pixels() { [ -s "$1" ] && [ -s "$2" ] && cmp -s <(idat "$1") <(idat "$2"); }
psnr() { python3 "$KILN_SOURCE_DIR/tests/py/png_psnr.py" "$1" "$2"; }
atleast60() { python3 -c "import sys; p=sys.argv[1]; sys.exit(0 if p == 'inf' or float(p) >= 60 else 1)" "$1"; }

# --- the single-rank server: the references (the default precision for SP, --exact for TP, whose bar is stated
# for f32 matmuls: bf16 rounding magnifies the all-reduce's reordering)
start_server --front-end-root none
openai one-openai || fail "single-rank OpenAI request"
comfy one-comfy 5 || fail "single-rank ComfyUI request"
stop_server
start_server --front-end-root none --exact
openai exact-openai || fail "single-rank --exact OpenAI request"
comfy exact-comfy 5 || fail "single-rank --exact ComfyUI request"
stop_server
mv "$OUT" "$SCRATCH/out-one"

# --- SP 2
KILN_LOG=info start_ranks 2 --sp 2
openai sp-openai && same_pixels "$SCRATCH/one-openai.png" "$SCRATCH/sp-openai.png" \
  && ok "--sp 2: the OpenAI image is the single-rank one, pixel for pixel" || fail "--sp 2: OpenAI image differs or missing"
comfy sp-comfy 5 && same_pixels "$SCRATCH/one-comfy.png" "$SCRATCH/sp-comfy.png" \
  && ok "--sp 2: the ComfyUI image is the single-rank one, pixel for pixel" || fail "--sp 2: ComfyUI image differs or missing"
grep -q "sequence parallelism (Ulysses): 2 ranks" "$RANKS_LOG" && ok "--sp 2: the DiT ran sequence parallel" \
  || fail "--sp 2: no Ulysses log line"
# SIGTERM to rank 0: it drains, broadcasts the stop, and every rank exits cleanly
r0=$(rank_pid 0) && kill -TERM "$r0"
res=$(wait_ranks 30)
if [ -n "$res" ] && [ "${res%% *}" = 0 ]; then ok "SIGTERM to rank 0: every rank exited, status 0, in ${res#* } s"
else fail "SIGTERM to rank 0: the job did not end cleanly within 30 s ($res)"; kill_job; fi
grep -q "rank 1 of 2: rank 0 stopped the server" "$RANKS_LOG" && ok "rank 1 saw the stop" || fail "rank 1 did not log the stop"

# --- SP 2 again: a shared forward of two jobs (one broadcast of two calls) equals them run alone
start_ranks 2 --sp 2 --batch-images 4
busy=$(comfy_body busy 9 "g['75:66']['inputs'].update(width=128, height=128); g['75:62']['inputs'].update(width=128, height=128, steps=6)" \
  | curl -s -d @- "$(url /prompt)" | python3 -c "import json,sys; print(json.load(sys.stdin)['prompt_id'])")
ids=()
for s in 5 6; do
  ids+=("$(comfy_body "b$s" "$s" | curl -s -d @- "$(url /prompt)" | python3 -c "import json,sys; print(json.load(sys.stdin)['prompt_id'])")")
done
for id in "$busy" "${ids[@]}"; do wait_history "$id" || fail "batched job $id never finished"; done
python3 -c "
import json,sys
e = json.load(open(sys.argv[1]))[sys.argv[2]]
m = [d for t, d in e['status']['messages'] if t == 'execution_success']
sys.exit(0 if m and m[0]['kiln'].get('batch_images') == 2 else 1)" "$SCRATCH/body" "${ids[1]}" \
  && ok "--sp 2: two queued jobs shared one forward" || fail "--sp 2: the two jobs were not batched: $(head -c 300 "$SCRATCH/body")"
curl -s -o "$SCRATCH/b5.png" "$(url "/view?filename=b5_00001_.png&subfolder=ranks&type=output")"
same_pixels "$SCRATCH/one-comfy.png" "$SCRATCH/b5.png" && ok "--sp 2: the batched job's image is the single-rank one" \
  || fail "--sp 2: the batched image differs from the single-rank one"
kill -TERM "$(rank_pid 0)"
res=$(wait_ranks 30); [ "${res%% *}" = 0 ] || { fail "stopping the batch run: $res"; kill_job; }

# --- TP 2 (FLUX.2 only): >= 60 dB; a LoRA request is refused by name and the ranks stay in step
KILN_LOG=info KILN_COMM_TIMEOUT=20 start_ranks 2 --tp 2 --exact # ranks out of step: 20 s, not 300
openai tp-openai && p=$(psnr "$SCRATCH/exact-openai.png" "$SCRATCH/tp-openai.png") && atleast60 "$p" \
  && ok "--tp 2: the OpenAI image, PSNR $p dB >= 60 against one rank" || fail "--tp 2: OpenAI image: PSNR ${p:-?}"
comfy tp-comfy 5 && p=$(psnr "$SCRATCH/exact-comfy.png" "$SCRATCH/tp-comfy.png") && atleast60 "$p" \
  && ok "--tp 2: the ComfyUI image, PSNR $p dB >= 60 against one rank" || fail "--tp 2: ComfyUI image: PSNR ${p:-?}"
grep -q "tensor parallelism: 2 ranks" "$RANKS_LOG" && ok "--tp 2: the DiT ran tensor parallel" || fail "--tp 2: no TP log line"
lora="g['90'] = {'class_type': 'LoraLoaderModelOnly', 'inputs': {'model': ['75:70', 0], 'lora_name': 'lora-kohya.safetensors', 'strength_model': 1.0}}
g['75:63']['inputs']['model'] = ['90', 0]"
comfy tp-lora 5 "$lora" || true
grep -q "LoRA-patched weights cannot be split" "$SCRATCH/body" && ok "--tp 2: a LoRA graph is refused by name" \
  || fail "--tp 2: the LoRA graph was not refused by name: $(head -c 400 "$SCRATCH/body")"
# /interrupt in the middle of a job: every rank stops at the same step (rank 0 broadcasts the decision after each)
slow=$(comfy_body slow 3 "g['75:66']['inputs'].update(width=512, height=512); g['75:62']['inputs'].update(width=512, height=512, steps=40)" \
  | curl -s -d @- "$(url /prompt)" | python3 -c "import json,sys; print(json.load(sys.stdin)['prompt_id'])")
for _ in $(seq 1 300); do
  curl -s "$(url /queue)" | python3 -c "import json,sys; sys.exit(0 if json.load(sys.stdin)['queue_running'] else 1)" && break
  sleep 0.05
done
sleep 0.5
curl -s -o /dev/null -X POST -d '{}' "$(url /interrupt)"
wait_history "$slow" || fail "--tp 2: the interrupted job never ended"
grep -q execution_interrupted "$SCRATCH/body" && ok "--tp 2: /interrupt stops a running job" \
  || fail "--tp 2: the job was not interrupted: $(head -c 300 "$SCRATCH/body")"
# /free: every rank drops its engine (the next open splits the TP groups again: a collective of all ranks)
curl -s -o /dev/null -X POST -d '{"unload_models": true}' "$(url /free)"
comfy tp-after 5 && same_pixels "$SCRATCH/tp-comfy.png" "$SCRATCH/tp-after.png" \
  && ok "--tp 2: after the refusal, the interrupt and /free the ranks are still in step (the same image)" \
  || fail "--tp 2: the request after the refusal, the interrupt and /free"
kill -TERM "$(rank_pid 0)"
res=$(wait_ranks 30); [ "${res%% *}" = 0 ] && ok "--tp 2: SIGTERM ends every rank" || { fail "--tp 2: stopping: $res"; kill_job; }

# --- --sp that does not match the ranks: refused by name before anything starts
out=$(timeout 60 mpirun --oversubscribe -np 2 -x ASAN_OPTIONS "$KILN_BIN" serve --port 0 --models "$MODELS" --output "$OUT" --sp 3 2>&1 || true)
grep -q -- "--sp 3 x --tp 1 = 3 ranks, but 2 were started" <<<"$out" && ok "--sp 3 on 2 ranks is refused by name" \
  || fail "--sp 3 on 2 ranks: $out"

# --- rank 1 killed while idle: the job ends within seconds, the request does not hang
start_ranks 2 --sp 2
kill -9 "$(rank_pid 1)"
curl -s -m 60 -o /dev/null -w '%{http_code}' "$(url /v1/images/generations)" -H 'Content-Type: application/json' \
  -d '{"prompt":"a fox","size":"64x64"}' >"$SCRATCH/code" || true
res=$(wait_ranks 30)
if [ -n "$res" ] && [ "${res%% *}" != 0 ] && grep -q "rank 1 .*exited on signal 9" "$RANKS_LOG"; then
  ok "rank 1 killed while idle: every rank ended in ${res#* } s (status ${res%% *}, mpirun names rank 1)"
else fail "rank 1 killed while idle: $res: $(tail -5 "$RANKS_LOG")"; kill_job; fi
[ "$(cat "$SCRATCH/code")" != 200 ] && ok "rank 1 killed: the request failed ($(cat "$SCRATCH/code")) instead of hanging" \
  || fail "rank 1 killed: the request answered 200"

# --- rank 1 stopped while idle: rank 0's next request times out in a collective, every rank exits
KILN_COMM_TIMEOUT=3 start_ranks 2 --sp 2
r1=$(rank_pid 1)
kill -STOP "$r1"
curl -s -m 60 -o /dev/null -w '%{http_code}' "$(url /v1/images/generations)" -H 'Content-Type: application/json' \
  -d '{"prompt":"a fox","size":"64x64"}' >"$SCRATCH/code" || true
res=$(wait_ranks 40)
kill -CONT "$r1" 2>/dev/null || true
if [ -n "$res" ] && [ "${res%% *}" != 0 ] && grep -q "timed out after" "$RANKS_LOG"; then
  ok "rank 1 hung: rank 0's request timed out in a collective, every rank ended in ${res#* } s: $(grep -m1 -o 'rank 0 of 2: .*timed out after [0-9]* s' "$RANKS_LOG")"
else fail "rank 1 hung: $res: $(tail -5 "$RANKS_LOG")"; kill_job; fi
finish

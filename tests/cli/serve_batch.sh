#!/usr/bin/env bash
# serve_batch.sh - compatible queued jobs share one forward (--batch-images, default 4) on the tiny model:
# two jobs queued while the worker is busy run together (their history says so: execution_success's kiln
# extension carries batch_images and batched_with), their PNGs are byte-identical to the same jobs run with
# --batch-images 1, and a job of another size queued beside them is not batched.
source "$(dirname "$0")/lib/serve_common.bash"
make_models

# body NAME W H STEPS SEED TEXT: writes the template graph's request to $SCRATCH/NAME.req
body() {
  graph_body flux2_klein_t2i_template_api.json "
g['75:66']['inputs'].update(width=$2, height=$3); g['75:62']['inputs'].update(width=$2, height=$3, steps=$4)
g['75:73']['inputs']['noise_seed'] = $5; g['75:74']['inputs']['text'] = '$6'
g['9']['inputs']['filename_prefix'] = 'batch/$1'" >"$SCRATCH/$1.req"
}
body busy 256 256 6 9 'a slow one'
body a 64 64 2 1 'a red fox in the snow'
body b 64 64 2 2 'a lighthouse at dusk'
body c 80 64 2 3 'a red fox in the snow'
submit() { curl -s -d @"$SCRATCH/$1.req" "$(url /prompt)" | python3 -c "import json,sys; print(json.load(sys.stdin)['prompt_id'])"; }

# run_set: a slow job of another size keeps the worker busy while a, b (compatible) and c (other size) queue
run_set() {
  busy=$(submit busy); a=$(submit a); b=$(submit b); c=$(submit c)
  curl -s -o "$SCRATCH/body" "$(url /queue)"
  python3 -c "import json,sys; q=json.load(open(sys.argv[1])); sys.exit(0 if len(q['queue_pending']) == 3 else 1)" \
    "$SCRATCH/body" && ok "a, b, c queued while the worker is busy" || fail "the worker was not busy: $(head -c 300 "$SCRATCH/body")"
  for id in "$busy" "$a" "$b" "$c"; do wait_history "$id" || fail "job $id never finished"; done
  curl -s -o "$SCRATCH/history.json" "$(url /history)"
}

# kiln extension of a job's execution_success
ext() {
  python3 -c "
import json,sys
e = json.load(open(sys.argv[1]))[sys.argv[2]]
assert e['status']['status_str'] == 'success', e['status']
m = [d for t, d in e['status']['messages'] if t == 'execution_success']
print(json.dumps(m[0]['kiln'], sort_keys=True))" "$SCRATCH/history.json" "$1"
}

start_server
run_set
ea=$(ext "$a"); eb=$(ext "$b"); ec=$(ext "$c"); ebusy=$(ext "$busy")
python3 - "$ea" "$eb" "$a" "$b" <<'PY' && ok "a and b shared one forward of 2 images" || fail "a/b not batched: $ea $eb"
import json, sys
ea, eb = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert ea["batch_images"] == 2 and eb["batch_images"] == 2, (ea, eb)
assert ea["batched_with"] == [sys.argv[4]] and eb["batched_with"] == [sys.argv[3]], (ea, eb)
PY
case "$ec$ebusy" in *batched_with*) fail "c or busy was batched: $ec $ebusy" ;; *) ok "c (other size) and busy ran alone" ;; esac
stop_server
mv "$OUT" "$SCRATCH/out-batched"

start_server --batch-images 1
run_set
case "$(ext "$a")$(ext "$b")" in *batched_with*) fail "--batch-images 1 still batched" ;; *) ok "--batch-images 1: one job at a time" ;; esac
stop_server
for n in a b c; do
  f=batch/${n}_00001_.png
  if [ -s "$OUT/$f" ] && cmp -s "$OUT/$f" "$SCRATCH/out-batched/$f"; then ok "$f byte-identical batched and alone"
  else fail "$f differs between --batch-images 4 and 1"; fi
done
cmp -s "$OUT/batch/a_00001_.png" "$OUT/batch/b_00001_.png" && fail "a and b are the same image" || ok "a and b differ"
finish

#!/usr/bin/env bash
# serve_output_commit.sh - output files are committed exactly once when a node dies at the worst moments
# (src/server/output_commit.c). KILN_FAULT_PAUSE holds the worker at a point of the job, the test kills the
# server with -9 there and restarts it (the job store re-queues the running job, as a lease expiry does on
# PostgreSQL):
#   after-stage  the graph's files are written (staged) but not committed: the restart re-runs the graph; the
#                output folder then holds exactly the job's files - none from the dead attempt, and no trace of a
#                half-written file planted in its staging folder;
#   after-link   the files are committed (linked under their final names) but the job is not recorded finished:
#                the restart runs nothing again, records the same names, and no file is duplicated.
# In both, /history names exactly the files on disk, every file is a whole PNG, the staging folder is gone, and
# a normal job leaves no staging folder behind.
source "$(dirname "$0")/lib/serve_common.bash"
make_models
submit() { # submit PREFIX: prints the prompt id
  graph_body flux2_klein_t2i_template_api.json "
g['75:66']['inputs'].update(width=64, height=64, batch_size=2); g['75:62']['inputs'].update(width=64, height=64, steps=1)
g['9']['inputs']['filename_prefix'] = 'commit/$1'" >"$SCRATCH/req"
  curl -s -o "$SCRATCH/body" -d @"$SCRATCH/req" "$(url /prompt)"
  python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['prompt_id'])" "$SCRATCH/body"
}
wait_for() { for _ in $(seq 1 600); do eval "$1" && return 0; sleep 0.1; done; return 1; }
# check_files PREFIX ID: the history's files for the job are exactly commit/PREFIX_*.png on disk (the first
# two when there are more), whole PNGs
check_files() {
  curl -s -o "$SCRATCH/body" "$(url "/history/$2")"
  python3 - "$SCRATCH/body" "$2" "$OUT/commit" "$1" <<'PY'
import json, os, sys
h = json.load(open(sys.argv[1]))[sys.argv[2]]
assert h["status"]["status_str"] == "success", h["status"]
named = sorted(i["filename"] for o in h["outputs"].values() for i in o.get("images", []) if i["type"] == "output")
disk = sorted(f for f in os.listdir(sys.argv[3]) if f.startswith(sys.argv[4] + "_"))
assert named == disk and len(disk) == 2, (named, disk)
for f in disk:
    d = open(os.path.join(sys.argv[3], f), "rb").read()
    assert d[:8] == b"\x89PNG\r\n\x1a\n" and d[-8:-4] == b"IEND", f
PY
}
staged() { ls "$OUT/.kiln-staging/$1/commit/" 2>/dev/null | grep -c '\.png$' || true; }

# ---- killed with the files staged, nothing committed
export KILN_FAULT_PAUSE=after-stage:60
start_server
id=$(submit a)
wait_for '[ "$(staged "$id")" = 2 ]' && ok "files staged, held before the commit" || fail "never staged"
[ -z "$(ls "$OUT/commit" 2>/dev/null)" ] && ok "nothing in the output folder before the commit" || fail "files before the commit: $(ls "$OUT/commit")"
printf 'half a png' >"$OUT/.kiln-staging/$id/commit/a_00003_.png" # what a kill mid-write leaves
kill -9 "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""
unset KILN_FAULT_PAUSE
start_server
wait_history "$id" && ok "the job ran again after the restart" || fail "job never finished"
check_files a "$id" && ok "after-stage: exactly the job's 2 files, whole, as /history names them" || fail "after-stage files"
[ ! -e "$OUT/.kiln-staging/$id" ] && ok "staging folder removed" || fail "staging left: $(ls -R "$OUT/.kiln-staging")"
stop_server

# ---- killed with the files committed, the job not recorded finished
export KILN_FAULT_PAUSE=after-link:60
start_server
id=$(submit b)
wait_for '[ -s "$OUT/.kiln-staging/$id/commit.json" ] && [ "$(ls "$OUT/commit" | grep -c "^b_")" = 2 ]' \
  && ok "files committed, held before the finish" || fail "never committed"
before=$(ls "$OUT/commit" | grep "^b_" | tr '\n' ' ')
kill -9 "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""
unset KILN_FAULT_PAUSE
start_server
wait_history "$id" && ok "the job finished after the restart" || fail "job never finished"
check_files b "$id" && ok "after-link: no duplicate, the same 2 files" || fail "after-link files"
after=$(ls "$OUT/commit" | grep "^b_" | tr '\n' ' ')
[ "$before" = "$after" ] && ok "the names committed before the kill are the ones kept ($after)" || fail "names changed: $before -> $after"
grep -q "earlier attempt's outputs are planned" "$SCRATCH/server.log" && ok "the graph did not run again" || fail "no resume in the log"
[ ! -e "$OUT/.kiln-staging/$id" ] && ok "staging folder removed" || fail "staging left"

# ---- a normal job: final names continue the folder's counter, no staging left
id=$(submit b)
wait_history "$id" && ok "a normal job finished" || fail "normal job"
curl -s -o "$SCRATCH/body" "$(url "/history/$id")"
python3 - "$SCRATCH/body" "$id" "$OUT/commit" <<'PY' && ok "its names continue the counter: b_00003, b_00004" || fail "names: $(ls "$OUT/commit")"
import json, os, sys
h = json.load(open(sys.argv[1]))[sys.argv[2]]
named = sorted(i["filename"] for o in h["outputs"].values() for i in o.get("images", []) if i["type"] == "output")
assert named == ["b_00003_.png", "b_00004_.png"], named
assert sorted(f for f in os.listdir(sys.argv[3]) if f.startswith("b_")) == ["b_%05d_.png" % i for i in (1, 2, 3, 4)]
PY
[ -z "$(ls "$OUT/.kiln-staging" 2>/dev/null)" ] && ok "no staging folder left" || fail "staging: $(ls "$OUT/.kiln-staging")"
finish

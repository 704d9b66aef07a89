#!/usr/bin/env bash
# serve_usage.sh - `kiln serve` refuses bad command lines (bad values, --memory-limit out of its range) with exit
# code 2 and a message, refuses a port that is taken, and stops cleanly on SIGTERM (exit 0) with its database intact.
source "$(dirname "$0")/lib/serve_common.bash"
expect_exit() { # CODE DESCRIPTION args...
  local want=$1 what=$2; shift 2
  set +e; "$KILN_BIN" serve "$@" >"$SCRATCH/out.txt" 2>&1; local got=$?; set -e
  if [ "$got" = "$want" ]; then ok "$what (exit $got)"; else fail "$what: exit $got, want $want: $(head -c 300 "$SCRATCH/out.txt")"; fi
}
expect_exit 0 "--help" --help
grep -q -- "--models DIR" "$SCRATCH/out.txt" && ok "help names the options" || fail "help text"
expect_exit 2 "no --output" --models "$SCRATCH"
expect_exit 2 "bad port" --port 70000 --output "$SCRATCH/o"
expect_exit 2 "port not a number" --port http --output "$SCRATCH/o"
expect_exit 2 "unknown option" --frobnicate 1 --output "$SCRATCH/o"
expect_exit 2 "missing value" --output
expect_exit 2 "bad device" --device tpu --output "$SCRATCH/o"
expect_exit 2 "empty token" --token "" --output "$SCRATCH/o"
expect_exit 2 "listen not an address" --listen example.org --port 0 --output "$SCRATCH/o"
# --memory-limit GB: 0.001..1e6 (1 MB .. 1 PB), a plain number
for bad in 0 -1 0.0009 2e6 nan inf 1GB " 1" ""; do
  expect_exit 2 "--memory-limit '$bad'" --memory-limit "$bad" --output "$SCRATCH/o"
done
grep -q -- "--memory-limit needs a number in 0.001..1e+06" "$SCRATCH/out.txt" && ok "--memory-limit names its range" \
  || fail "--memory-limit's message: $(head -c 300 "$SCRATCH/out.txt")"
make_models
start_server
expect_exit 5 "port already in use" --port "$PORT" --output "$SCRATCH/o2" --user-dir "$SCRATCH/u2"
grep -q "cannot listen" "$SCRATCH/out.txt" && ok "port-in-use message" || fail "port-in-use message"
# A second live server on the same SQLite queue (here: another output folder beside the first, so the same user/)
# would queue the first one's running job again and take jobs submitted to the first, saving their images where
# the first one's /view cannot find them: refused, naming the database and the owner's pid.
expect_exit 2 "a second server on the same job database" --port 0 --output "$SCRATCH/o2"
grep -q "kiln-jobs.sqlite is in use by another kiln serve (pid $SERVER_PID)" "$SCRATCH/out.txt" \
  && ok "the refusal names the database and the owner" || fail "second-owner message: $(head -c 300 "$SCRATCH/out.txt")"
kill -TERM "$SERVER_PID"
set +e; wait "$SERVER_PID"; rc=$?; set -e
SERVER_PID=""
[ "$rc" = 0 ] && ok "SIGTERM: clean exit" || fail "SIGTERM exit $rc"
python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('select count(*) from jobs').fetchone()" "$SCRATCH/user/kiln-jobs.sqlite" \
  && ok "job database readable after the stop (user/ beside the output folder)" || fail "job database"
[ ! -e "$OUT/kiln-jobs.sqlite" ] && ok "no database inside the output folder" || fail "database inside the output folder"
expect_exit 2 "front-end root not a folder" --front-end-root "$SCRATCH/nope" --port 0 --output "$SCRATCH/o3"
finish

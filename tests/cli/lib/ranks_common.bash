# ranks_common.bash - `mpirun ... kiln serve` for the multi-rank server tests (sourced after serve_common.bash by
# tests/cli/serve_ranks.sh and ranks_memory.sh): start a job in the background, find a rank's PID, wait for the
# job's end. Every mpirun runs under `timeout`, so a hang fails the test instead of blocking it.
command -v mpirun >/dev/null || { echo "FAIL mpirun not found (scripts/install-deps.sh installs openmpi-bin)"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 KILN_THREADS=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 # Open MPI's own allocations at exit
export KILN_LOG=${KILN_LOG:-warn} KILN_COMM_TIMEOUT=${KILN_COMM_TIMEOUT:-300} # passed to every rank (-x)
MPI_PID=""
RANKS_LOG=$SCRATCH/ranks.log
# what every rank's kiln serve is given (rank_pid finds the ranks by it)
serve_args() { echo serve --port 0 --port-file "$SCRATCH/port" --models "$MODELS" --output "$OUT" --front-end-root none; }

# launch_ranks APP...: mpirun with APP (its -np and command lines, several joined by ':' for MPMD) in the
# background; waits for rank 0's /health.
launch_ranks() {
  rm -f "$SCRATCH/port" "$SCRATCH/mpi.rc"
  : >"$RANKS_LOG"
  ( rc=0; timeout 300 mpirun --oversubscribe -x KILN_THREADS -x ASAN_OPTIONS -x KILN_COMM_TIMEOUT -x KILN_LOG "$@" \
      >>"$RANKS_LOG" 2>&1 || rc=$?; echo "$rc" >"$SCRATCH/mpi.rc" ) & # (set -e: || keeps the subshell alive)
  MPI_PID=$!
  for _ in $(seq 1 300); do
    if [ -s "$SCRATCH/port" ]; then
      PORT=$(cat "$SCRATCH/port")
      curl -s -o /dev/null "$(url /health)" && return 0
    fi
    [ -s "$SCRATCH/mpi.rc" ] && break
    sleep 0.1
  done
  cat "$RANKS_LOG"; echo "FAIL: mpirun $* did not come up"; exit 1
}
# start_ranks NP [kiln serve flags]: every rank the same command
start_ranks() {
  local np=$1; shift
  # shellcheck disable=SC2046 # serve_args' words are paths without spaces (mktemp's)
  launch_ranks -np "$np" "$KILN_BIN" $(serve_args) "$@"
}
# rank_pid R: the PID of rank R of the running job (Open MPI puts the rank in each process's environment)
rank_pid() {
  local p
  for p in $(pgrep -f "serve --port 0 --port-file $SCRATCH/port"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then echo "$p"; return 0; fi
  done
  return 1
}
# wait_ranks SECONDS: waits for mpirun to end; prints its exit status and the seconds it took ("" if it did not)
wait_ranks() {
  local t0=$SECONDS
  for _ in $(seq 1 $(($1 * 10))); do
    if [ -s "$SCRATCH/mpi.rc" ]; then echo "$(cat "$SCRATCH/mpi.rc") $((SECONDS - t0))"; wait "$MPI_PID" 2>/dev/null; MPI_PID=""; return 0; fi
    sleep 0.1
  done
  echo ""
}
kill_job() { # whatever is left of a failed job
  [ -n "$MPI_PID" ] || return 0
  pkill -9 -f "serve --port 0 --port-file $SCRATCH/port" 2>/dev/null || true
  wait "$MPI_PID" 2>/dev/null || true
  MPI_PID=""
}
trap 'kill_job; cleanup' EXIT

# graphs.bash - sourced by the emulated-GPU scripts (pipeline.sh, serve_requests.sh); the caller defines ok and fail.
# check_graphs LOG MIN: the CUDA backend's close line in LOG ("cuda: memory peak: ... N graphs captured, M replays",
# KILN_LOG=info) reports at least MIN captures and MIN replays.
check_graphs() {
  local line cap rep
  line=$(grep "cuda: memory peak" "$1" | tail -1)
  cap=$(printf '%s' "$line" | sed -n 's/.* \([0-9]*\) graphs captured.*/\1/p')
  rep=$(printf '%s' "$line" | sed -n 's/.* captured, \([0-9]*\) replays.*/\1/p')
  if [ "${cap:-0}" -ge "$2" ] && [ "${rep:-0}" -ge "$2" ]; then
    ok "graphs: $cap captured, $rep replays"
  else
    fail "graphs (want >= $2 of each): '${line:-no close line}'"
  fi
}

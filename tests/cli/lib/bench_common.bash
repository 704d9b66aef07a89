# bench_common.bash - the preamble of the `kiln bench` tests that drive one ComfyUI-API test double
# (sourced by tests/cli/bench_http.sh, bench_hostile.sh, bench_nvml.sh): strict mode, the two paths CTest
# passes, the committed bench data, a scratch folder and the double's PID, both cleaned up on exit.
set -euo pipefail
: "${KILN_BIN:?}" "${KILN_SOURCE_DIR:?}"
data="$KILN_SOURCE_DIR/tests/data/bench"
tmp=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

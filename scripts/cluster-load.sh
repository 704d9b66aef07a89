#!/usr/bin/env bash
# The issue's cluster run at full size: three kiln serve nodes on a throwaway PostgreSQL, 200 clients for 60 s,
# nodes killed -9 and restarted every 5 s (tests/cli/serve_cluster.sh, which ctest runs at 16 clients for 20 s).
# Usage: scripts/cluster-load.sh [CLIENTS] [SECONDS]     (after `make build`)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export KILN_BIN=${KILN_BIN:-$ROOT/build/kiln} KILN_SOURCE_DIR=$ROOT
export KILN_CLUSTER_CLIENTS=${1:-200} KILN_CLUSTER_SECONDS=${2:-60}
# each closed-loop client leaves at most one job queued when the load stops: 200 jobs at ~1 job/s on 2 cores
export KILN_CLUSTER_DRAIN=${KILN_CLUSTER_DRAIN:-600}
exec bash "$ROOT/tests/cli/serve_cluster.sh"

#!/usr/bin/env bash
# Mutation testing: plants each bug listed in tests/mutants/*.txt in a scratch copy of the tree, builds it and
# checks the tests named for it fail. The logic is in scripts/mutants.py (see its header and docs/testing.md).
# Usage: scripts/mutants.sh [--list [--markdown] [--ctest-dir DIR]] [--sample N [--seed S]] [--only ID] [--build DIR]
set -euo pipefail
exec python3 "$(dirname "$0")/mutants.py" "$@"

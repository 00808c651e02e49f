#!/usr/bin/env bash
# The soak of issue 12: bench/soak.py against a real `tpserve serve --tp 2` for SOAK_SECONDS (default 30
# minutes), writing bench/results/soak/soak.json. `make test` runs a 40-second version (tests/python/test_soak.py).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p bench/results/soak
exec python3 bench/soak.py --seconds "${SOAK_SECONDS:-1800}" --json bench/results/soak/soak.json "$@"

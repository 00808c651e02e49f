#!/usr/bin/env bash
# serve-sweep.sh: serving benchmarks of SmolLM2-135M through the real server (tpserve serve) with
# tpserve-bench. For each TP degree in $TPS (default "1 2"):
#   1. closed-loop concurrency sweep C in $CONCURRENCIES (default 1 2 4 8 16 32 64), 2*C requests
#      per point, input $INPUT_LEN (64) / output $OUTPUT_LEN (32) token ids, ignore_eos;
#   2. continuous vs static batching of the same requests at C=$STATIC_C (16): 3*C requests with
#      lengths varied by --range-ratio 0.5. The coordinator has no static mode, so static batching
#      is emulated client-side (tpserve-bench --static-batch: send C, wait for all C, next batch).
# Then, at TP 1, prefix caching: $PREFIX_N requests at concurrency 1 sharing a $PREFIX_LEN-token
# prefix (+16 own tokens, 8 output), once on a server with prefix caching and once on one started
# with `tpserve serve --no-prefix-cache`; the TTFT ratio is the gain.
# Prints one table per part with each figure beside its peer as a ratio (TP2/TP1, continuous/static,
# no-cache/cache). Writes bench/results/serve_*.json (one per run, tpserve-bench's JSON) and appends
# a section to bench/results/summary.md.
# Env: BUILD (default build: needs client/tpserve, coordinator/tpserve-coordinator,
#      worker/tpserve-worker, bench/tpserve-bench), TPSERVE, BENCH (override single binaries),
#      MODEL, PORT, TPS, CONCURRENCIES, INPUT_LEN, OUTPUT_LEN, STATIC_C, PREFIX_LEN, PREFIX_N,
#      RESULTS (default bench/results), SKIP_PREFIX=1.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
TPSERVE=${TPSERVE:-$BUILD/client/tpserve}
BENCH=${BENCH:-$BUILD/bench/tpserve-bench}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
PORT=${PORT:-$((20000 + RANDOM % 20000))}
TPS=${TPS:-"1 2"}
CONCURRENCIES=${CONCURRENCIES:-"1 2 4 8 16 32 64"}
INPUT_LEN=${INPUT_LEN:-64}
OUTPUT_LEN=${OUTPUT_LEN:-32}
STATIC_C=${STATIC_C:-16}
PREFIX_LEN=${PREFIX_LEN:-1000}
PREFIX_N=${PREFIX_N:-8}
RESULTS=${RESULTS:-bench/results}
SERVER=tcp://127.0.0.1:$PORT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export TPSERVE_COORDINATOR=${TPSERVE_COORDINATOR:-$BUILD/coordinator/tpserve-coordinator}
export TPSERVE_WORKER=${TPSERVE_WORKER:-$BUILD/worker/tpserve-worker}

for bin in "$TPSERVE" "$BENCH" "$TPSERVE_COORDINATOR" "$TPSERVE_WORKER"; do
  [ -x "$bin" ] || { echo "serve-sweep: $bin is missing (build it, or set BUILD / TPSERVE / BENCH)" >&2; exit 1; }
done
[ -f "$MODEL" ] || { echo "serve-sweep: $MODEL is missing" >&2; exit 1; }
mkdir -p "$RESULTS"

SERVE_PID=
stop_server() {
  if [ -n "$SERVE_PID" ] && kill -0 "$SERVE_PID" 2>/dev/null; then
    kill -TERM "$SERVE_PID" 2>/dev/null || true
    wait "$SERVE_PID" 2>/dev/null || true
  fi
  SERVE_PID=
}
trap stop_server EXIT

start_server() {  # start_server TP [extra serve flags...]
  local tp=$1; shift
  local threads=$(( $(nproc) / tp > 0 ? $(nproc) / tp : 1 ))
  "$TPSERVE" serve --model "$MODEL" --tp "$tp" --port "$PORT" --worker-port $((PORT + 1)) \
    --threads "$threads" "$@" >"$RESULTS/serve_server.log" 2>&1 &
  SERVE_PID=$!
  for _ in $(seq 1 240); do
    if "$TPSERVE" health --server "$SERVER" >/dev/null 2>&1; then return 0; fi
    kill -0 "$SERVE_PID" 2>/dev/null || { echo "serve-sweep: tpserve serve exited; see $RESULTS/serve_server.log" >&2; exit 1; }
    sleep 0.5
  done
  echo "serve-sweep: server not healthy after 120 s" >&2; exit 1
}

bench() {  # bench NAME [tpserve-bench flags...]; quiet, JSON to $RESULTS/serve_NAME.json
  local name=$1; shift
  "$BENCH" --server "$SERVER" --seed 1 --max-duration-s 300 --label "$name" --json "$RESULTS/serve_$name.json" \
    --progress-every 100000 "$@" >"$RESULTS/serve_$name.txt" 2>&1 \
    || { echo "serve-sweep: tpserve-bench $name failed:" >&2; cat "$RESULTS/serve_$name.txt" >&2; exit 1; }
  echo "  done: $name"
}

START=$(date +%s)
echo "== serve sweep on $MODEL (host: $(nproc) cores), results in $RESULTS"
for tp in $TPS; do
  echo "== TP $tp: starting tpserve serve"
  start_server "$tp"
  for c in $CONCURRENCIES; do
    bench "tp${tp}_c${c}" --token-salt $((100 * tp + c)) --num-requests $((2 * c)) --concurrency "$c" --input-len "$INPUT_LEN" --output-len "$OUTPUT_LEN"
  done
  for mode in continuous static; do
    flag=; [ "$mode" = static ] && flag=--static-batch
    salt=$((1000 * tp)); [ "$mode" = static ] && salt=$((salt + 1))  # same lengths, no cross-run cache hits
    bench "tp${tp}_${mode}_c${STATIC_C}" --token-salt $salt --num-requests $((3 * STATIC_C)) --concurrency "$STATIC_C" \
      --input-len "$INPUT_LEN" --output-len "$OUTPUT_LEN" --range-ratio 0.5 $flag
  done
  if [ "$tp" = "$(echo $TPS | cut -d' ' -f1)" ] && [ "${SKIP_PREFIX:-0}" != 1 ]; then
    bench "tp${tp}_prefix_cached" --token-salt 5000 --num-requests "$PREFIX_N" --concurrency 1 --shared-prefix-len "$PREFIX_LEN" \
      --input-len 16 --output-len 8
    stop_server
    echo "== TP $tp: restarting with --no-prefix-cache"
    start_server "$tp" --no-prefix-cache
    bench "tp${tp}_prefix_uncached" --token-salt 5001 --num-requests "$PREFIX_N" --concurrency 1 --shared-prefix-len "$PREFIX_LEN" \
      --input-len 16 --output-len 8
  fi
  stop_server
done
ELAPSED=$(( $(date +%s) - START ))

python3 bench/loadgen/serve_summary.py "$RESULTS" "$TPS" "$CONCURRENCIES" "$STATIC_C" "$ELAPSED" "$MODEL"

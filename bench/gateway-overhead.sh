#!/bin/bash
# The OpenAI gateway's overhead: one `tpserve serve --tp 1 --http-port` server, the same load through
# tpserve-bench's ZeroMQ backend (tcp://) and its openai http backend (http://, POST /v1/completions
# streamed through tpserve-http), interleaved for ROUNDS rounds at each concurrency in CONCURRENCIES.
# Every run has its own --token-salt, so no run takes prompt blocks from another's prefix cache.
# Writes $RESULTS/gw_rR_cC_{zmq,http}.json (tpserve-bench's JSON) and prints the 1-minute load
# average before each run. bench/README.md "OpenAI API: gateway overhead" was measured with it.
# Environment: BUILD (default build), MODEL, ROUNDS (3), CONCURRENCIES ("1 8"), NUM_REQUESTS (32),
#              INPUT_LEN (64), OUTPUT_LEN (64), VOCAB (49152: the model's vocabulary, which the
#              gateway does not report), RESULTS (bench/results/gateway_overhead).
set -euo pipefail
BUILD=${BUILD:-build}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
ROUNDS=${ROUNDS:-3}
CONCURRENCIES=${CONCURRENCIES:-"1 8"}
NUM_REQUESTS=${NUM_REQUESTS:-32}
INPUT_LEN=${INPUT_LEN:-64}
OUTPUT_LEN=${OUTPUT_LEN:-64}
VOCAB=${VOCAB:-49152}
RESULTS=${RESULTS:-bench/results/gateway_overhead}
PORT=$((20000 + RANDOM % 20000))
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$RESULTS"

source "$(dirname "$0")/serve-with-gateway.sh"
trap stop_server EXIT
serve_with_gateway "$RESULTS/server.log" --model "$MODEL" --tp 1

for round in $(seq "$ROUNDS"); do
  for c in $CONCURRENCIES; do
    for path in zmq http; do
      gateway_target "$path"
      salt=$([ "$path" = zmq ] && echo 0 || echo 1)
      echo "== round $round C=$c $path, load average $(cut -d' ' -f1 /proc/loadavg)"
      "$BUILD/bench/tpserve-bench" --server "$url" "${extra[@]}" --num-requests "$NUM_REQUESTS" \
        --input-len "$INPUT_LEN" --output-len "$OUTPUT_LEN" --concurrency "$c" --seed 11 \
        --token-salt $((round * 100 + c * 10 + salt)) --progress-every 100000 --label "round $round C=$c $path" \
        --json "$RESULTS/gw_r${round}_c${c}_$path.json" | grep -E "Median TPOT|Output token throughput|Failed"
    done
  done
done

#!/bin/bash
# tpserve against llama.cpp's llama-server through the same OpenAI endpoint: tpserve-bench's openai http
# backend (POST /v1/completions, streamed) on `tpserve serve --tp 1 --http-port` and on llama-server, the
# same GGUF, threads, requests and seed, interleaved for ROUNDS rounds at each concurrency. Prints each
# run's TPOT p50, TTFT p50 and output tokens/s, and the load average before it; JSON under $RESULTS.
# Environment: BUILD (build), MODEL, LLAMA_SERVER (third_party/llama.cpp/build/bin/llama-server), ROUNDS (2),
#              CONCURRENCIES ("1 8"), NUM_REQUESTS (16), INPUT_LEN (64), OUTPUT_LEN (64), THREADS (nproc),
#              RESULTS (bench/results/openai_vs_llama).
set -euo pipefail
BUILD=${BUILD:-build}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
LLAMA_SERVER=${LLAMA_SERVER:-third_party/llama.cpp/build/bin/llama-server}
ROUNDS=${ROUNDS:-2}
CONCURRENCIES=${CONCURRENCIES:-"1 8"}
NUM_REQUESTS=${NUM_REQUESTS:-16}
INPUT_LEN=${INPUT_LEN:-64}
OUTPUT_LEN=${OUTPUT_LEN:-64}
THREADS=${THREADS:-$(nproc)}
RESULTS=${RESULTS:-bench/results/openai_vs_llama}
PORT=$((20000 + RANDOM % 20000))
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$RESULTS"
[ -x "$LLAMA_SERVER" ] || { echo "openai-vs-llama: $LLAMA_SERVER missing (bench/peers/build-llama-cpp.sh)" >&2; exit 1; }

"$BUILD/client/tpserve" serve --model "$MODEL" --tp 1 --threads "$THREADS" --port "$PORT" --worker-port $((PORT + 1)) \
  --http-port $((PORT + 2)) >"$RESULTS/tpserve.log" 2>&1 &
TPSERVE_PID=$!
"$LLAMA_SERVER" -m "$MODEL" -t "$THREADS" -tb "$THREADS" --parallel 8 --cont-batching -c 8192 --kv-unified \
  --cache-ram 0 --no-webui --host 127.0.0.1 --port $((PORT + 3)) >"$RESULTS/llama_server.log" 2>&1 &
LLAMA_PID=$!
trap 'kill $TPSERVE_PID $LLAMA_PID 2>/dev/null; wait 2>/dev/null || true' EXIT
for url in "http://127.0.0.1:$((PORT + 2))" "http://127.0.0.1:$((PORT + 3))"; do
  for _ in $(seq 180); do curl -sf "$url/health" >/dev/null && break; sleep 1; done
  curl -sf "$url/health" >/dev/null || { echo "openai-vs-llama: $url never healthy" >&2; exit 1; }
done

for round in $(seq "$ROUNDS"); do
  for c in $CONCURRENCIES; do
    for server in tpserve llama-server; do
      if [ "$server" = tpserve ]; then url=http://127.0.0.1:$((PORT + 2)); extra=(--vocab-size 49152); else
        url=http://127.0.0.1:$((PORT + 3)); extra=(); fi
      echo "== round $round C=$c $server, load average $(cut -d' ' -f1 /proc/loadavg)"
      "$BUILD/bench/tpserve-bench" --server "$url" "${extra[@]}" --num-requests "$NUM_REQUESTS" \
        --input-len "$INPUT_LEN" --output-len "$OUTPUT_LEN" --concurrency "$c" --seed 11 \
        --token-salt $((round * 100 + c)) --progress-every 100000 --label "round $round C=$c $server" \
        --json "$RESULTS/r${round}_c${c}_$server.json" | grep -E "Median TPOT|Median TTFT|Output token throughput|Failed"
    done
  done
done

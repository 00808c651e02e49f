#!/bin/bash
# A flame graph of a serving run: one `tpserve serve --tp TP --http-port` under tpserve-bench's OpenAI http
# backend (STREAMS concurrent streams of INPUT_LEN prompt / OUTPUT_LEN output tokens, greedy), every process of
# the server (coordinator, gateway, worker ranks; not the load generator) sampled by `perf record -e cpu-clock`
# with DWARF call graphs while the load runs. Writes $RESULTS/$LABEL.folded (perf's stackcollapse) and
# $LABEL.svg (bench/flamegraph.py), and prints each process's share and the shares of the model's forward pass,
# the sampler and the step's wire work beside the run's median TPOT and tokens/s.
# perf adds its own cost to every sample: compare TPOT from bench/serving-vs-engine.sh, not from here.
# Environment: BUILD (build), MODEL, TP (1), THREADS (per rank; default cores / TP), STREAMS (1), REQUESTS (4),
#              INPUT_LEN (64), OUTPUT_LEN (128), FREQ (499 Hz), LABEL (serving-tpTP-cSTREAMS), VOCAB (49152),
#              RESULTS (bench/results/flamegraph).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
TP=${TP:-1}
THREADS=${THREADS:-$(($(nproc) / TP > 0 ? $(nproc) / TP : 1))}
STREAMS=${STREAMS:-1}
REQUESTS=${REQUESTS:-4}
INPUT_LEN=${INPUT_LEN:-64}
OUTPUT_LEN=${OUTPUT_LEN:-128}
FREQ=${FREQ:-499}
LABEL=${LABEL:-serving-tp$TP-c$STREAMS}
RESULTS=${RESULTS:-bench/results/flamegraph}
PORT=$((20000 + RANDOM % 20000))
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
command -v perf >/dev/null || { echo "perf not found (Debian: apt-get install linux-perf)" >&2; exit 1; }
mkdir -p "$RESULTS"
work=$(mktemp -d)

source bench/serve-with-gateway.sh
trap 'stop_server; rm -rf "$work"' EXIT
serve_with_gateway "$work/server.log" --model "$MODEL" --tp "$TP" --threads "$THREADS"
# The server's processes: the coordinator, the gateway and the ranks (mpirun's children).
pids=$(pgrep -d, -f "tpserve-(coordinator|http|worker) .*($PORT|$((PORT + 1)))")

perf record -e cpu-clock -F "$FREQ" --call-graph dwarf,16384 -p "$pids" -o "$work/perf.data" 2>"$work/perf.log" &
PERF_PID=$!
for _ in $(seq 100); do [ -s "$work/perf.data" ] && break; sleep 0.1; done  # perf has attached
gateway_target http
"$BUILD/bench/tpserve-bench" --server "$url" "${extra[@]}" --num-requests "$REQUESTS" \
  --input-len "$INPUT_LEN" --output-len "$OUTPUT_LEN" --concurrency "$STREAMS" --seed 7 --progress-every 100000 \
  --label "$LABEL" | grep -E "Median TPOT|Output token throughput|Failed"
kill -INT $PERF_PID
wait $PERF_PID || true
perf script report stackcollapse -i "$work/perf.data" >"$RESULTS/$LABEL.folded" 2>/dev/null
python3 bench/flamegraph.py "$RESULTS/$LABEL.folded" "$RESULTS/$LABEL.svg" \
  --title "tpserve serve, TP $TP x $THREADS thread(s), $STREAMS stream(s), $(git rev-parse --short HEAD)" \
  --frames "LlamaModel::Forward,SampleTokens,capnp,zmq::,ThreadPool::WorkerLoop,sched_yield"

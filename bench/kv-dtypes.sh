#!/usr/bin/env bash
# KV cache element types (tpserve-worker --kv-dtype, issue 17) on one model, 2 threads, per type:
#   1. engine: tpserve-bench-engine --kv-dtype T --prompt 512 --batches $BATCHES --context $CONTEXT
#      --decode-steps 32: prefill pp512 and decode at B=1 and B=32 over a $CONTEXT-token context;
#   2. serving: tpserve serve --tp 1 --kv-memory-mb $SERVE_KV_MB --kv-dtype T, then tpserve-bench with
#      $SERVE_C concurrent streams ($SERVE_N requests, input $SERVE_IN, output $SERVE_OUT token ids): the
#      same KV memory holds 1x, 2x, 2x and 3.8x the sequences for f32, f16, bf16, q8_0.
# Results: $RESULTS/engine_T.json and $RESULTS/serve_T.json; `bench/kv-dtypes.sh` prints a summary line
# per type. Environment: BUILD (build), MODEL (models/SmolLM2-135M-Instruct.Q4_1.gguf), TYPES
# ("f32 f16 bf16 q8_0"), CONTEXT (512), BATCHES (1,32), SERVE_KV_MB (128), SERVE_C (64), SERVE_N (64), SERVE_IN (128),
# SERVE_OUT (64), RESULTS (bench/results/kv_dtypes).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
TYPES=${TYPES:-f32 f16 bf16 q8_0}
CONTEXT=${CONTEXT:-512}
BATCHES=${BATCHES:-1,32}
SERVE_KV_MB=${SERVE_KV_MB:-128}
SERVE_C=${SERVE_C:-64}
SERVE_N=${SERVE_N:-64}
SERVE_IN=${SERVE_IN:-128}
SERVE_OUT=${SERVE_OUT:-64}
RESULTS=${RESULTS:-bench/results/kv_dtypes}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$RESULTS"

for t in $TYPES; do
  "$BUILD/bench/tpserve-bench-engine" --model "$MODEL" --threads 2 --prompt 512 --batches "$BATCHES" --context "$CONTEXT" \
    --decode-steps 32 --kv-dtype "$t" --json "$RESULTS/engine_$t.json" >"$RESULTS/engine_$t.txt" 2>&1
  port=$((20000 + RANDOM % 20000))
  "$BUILD/client/tpserve" serve --model "$MODEL" --tp 1 --threads 2 --port "$port" --worker-port $((port + 1)) \
    --kv-memory-mb "$SERVE_KV_MB" --kv-dtype "$t" 2>"$RESULTS/serve_$t.log" &
  serve_pid=$!
  for _ in $(seq 1 240); do "$BUILD/client/tpserve" health --server "tcp://127.0.0.1:$port" >/dev/null 2>&1 && break; sleep 0.5; done
  "$BUILD/bench/tpserve-bench" --server "tcp://127.0.0.1:$port" --seed 1 --label "kv_$t" --num-requests "$SERVE_N" \
    --concurrency "$SERVE_C" --input-len "$SERVE_IN" --output-len "$SERVE_OUT" --progress-every 100000 \
    --json "$RESULTS/serve_$t.json" >"$RESULTS/serve_$t.txt" 2>&1
  "$BUILD/client/tpserve" stats --server "tcp://127.0.0.1:$port" >"$RESULTS/stats_$t.txt"
  kill -TERM "$serve_pid"
  wait "$serve_pid" || true
  python3 - "$RESULTS" "$t" <<'PY'
import json, sys
res, t = sys.argv[1], sys.argv[2]
e = json.load(open(f"{res}/engine_{t}.json"))
s = json.load(open(f"{res}/serve_{t}.json"))
stats = dict(line.split(": ", 1) for line in open(f"{res}/stats_{t}.txt").read().splitlines() if ": " in line)
dec = {d["batch"]: d["tok_s"] for d in e["decode"]}
print(f"{t:5s} pp512 {e['prefill']['tok_s']:.1f} tok/s; decode B=1 {dec.get(1, 0):.1f}, B=32 {dec.get(32, 0):.1f} tok/s "
      f"at context {e['decode_context']}; serving: output {s.get('output_throughput', 0):.1f} tok/s, "
      f"preemptions {stats.get('preemptions', '?')}, KV pages {stats.get('blocks_total', '?')}")
PY
done

#!/bin/bash
# The server against the engine alone (issue 14's serving targets), on one `tpserve serve --tp TP --http-port`:
#  1. one stream: tpserve-bench at concurrency 1 through the ZeroMQ protocol (tcp://) and through the OpenAI
#     gateway (http://, POST /v1/completions streamed), median TPOT, beside the engine's batch-1 decode step
#     (tpserve-bench-engine, same TP, threads per rank and context); target: within 1.15x;
#  2. STREAMS (64) streams: output tokens/s of 2 x STREAMS requests at concurrency STREAMS, both paths, beside
#     what the engine's own figures predict for the same mix, one prefill of INPUT_LEN tokens and OUTPUT_LEN
#     decode tokens per request: OUTPUT_LEN / (INPUT_LEN / prefill tok/s + OUTPUT_LEN / decode tok/s at batch
#     STREAMS); target: at least 0.9x.
# Rounds interleave the engine and the server runs. Writes $RESULTS/engine_rR.json, served_rR_{1,S}_{zmq,http}.json
# and serving_vs_engine.md (the table; also printed).
# Environment: BUILD (build), MODEL, TP (1), THREADS (per rank; default cores / TP), ROUNDS (2), INPUT_LEN (64),
#              OUTPUT_LEN (128), STREAMS (64), VOCAB (49152, which the gateway does not report),
#              RESULTS (bench/results/serving_vs_engine).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
TP=${TP:-1}
THREADS=${THREADS:-$(($(nproc) / TP > 0 ? $(nproc) / TP : 1))}
ROUNDS=${ROUNDS:-2}
INPUT_LEN=${INPUT_LEN:-64}
OUTPUT_LEN=${OUTPUT_LEN:-128}
STREAMS=${STREAMS:-64}
VOCAB=${VOCAB:-49152}
RESULTS=${RESULTS:-bench/results/serving_vs_engine}
PORT=$((20000 + RANDOM % 20000))
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$RESULTS"
rm -f "$RESULTS"/engine_r*.json "$RESULTS"/served_r*.json

# KV for every stream's whole sequence with room to spare: 48 KB per token covers SmolLM2's F32 K and V (46 KB).
kv_mb=$((STREAMS * (INPUT_LEN + OUTPUT_LEN + 16) * 48 / 1024 + 64))
source bench/serve-with-gateway.sh
trap stop_server EXIT
serve_with_gateway "$RESULTS/server.log" --model "$MODEL" --tp "$TP" --threads "$THREADS" --max-num-seqs "$STREAMS" \
  --kv-memory-mb "$kv_mb"

for round in $(seq "$ROUNDS"); do
  echo "== round $round: engine, load average $(cut -d' ' -f1 /proc/loadavg)"
  "$BUILD/bench/tpserve-bench-engine" --model "$MODEL" --tp "$TP" --threads "$THREADS" --batches "1,$STREAMS" \
    --prompt "$INPUT_LEN" --context $((INPUT_LEN + OUTPUT_LEN / 2)) --decode-steps 32 \
    --json "$RESULTS/engine_r$round.json" | grep -E "^(prefill|decode)"
  for c in 1 "$STREAMS"; do
    n=$((c == 1 ? 3 : 2 * c))
    for path in zmq http; do
      gateway_target "$path"
      salt=$([ "$path" = zmq ] && echo 0 || echo 1)
      echo "== round $round: $c stream(s) through $path, load average $(cut -d' ' -f1 /proc/loadavg)"
      "$BUILD/bench/tpserve-bench" --server "$url" "${extra[@]}" --num-requests "$n" --input-len "$INPUT_LEN" \
        --output-len "$OUTPUT_LEN" --concurrency "$c" --seed 7 --token-salt $((round * 1000 + c * 10 + salt)) \
        --progress-every 100000 --label "round $round C=$c $path" --json "$RESULTS/served_r${round}_${c}_$path.json" |
        grep -E "Median TPOT|Output token throughput|Failed"
    done
  done
done

python3 - "$RESULTS" "$ROUNDS" "$STREAMS" "$INPUT_LEN" "$OUTPUT_LEN" "$TP" "$THREADS" <<'PY' | tee "$RESULTS/serving_vs_engine.md"
import json, statistics, sys
results, rounds, streams, inp, out, tp, threads = sys.argv[1], *map(int, sys.argv[2:])
load = lambda name: json.load(open(f"{results}/{name}.json"))
print(f"TP {tp}, {threads} thread(s) per rank; {inp} prompt / {out} output tokens per request, greedy, ignore_eos\n")
print("| round | engine step B=1 ms | TPOT ZeroMQ ms | ratio | TPOT HTTP ms | ratio | engine-predicted "
      f"tok/s at {streams} | ZeroMQ tok/s | ratio | HTTP tok/s | ratio |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
ratios = []  # per round: the four ratios, in the table's order
for r in range(1, rounds + 1):
    engine = load(f"engine_r{r}")
    step = {d["batch"]: d for d in engine["decode"]}
    predicted = out / (inp / engine["prefill"]["tok_s"] + out / step[streams]["tok_s"])
    row = [str(r), f"{step[1]['step_ms']:.2f}"]
    ratios.append([])
    for path in ("zmq", "http"):
        tpot = load(f"served_r{r}_1_{path}")["tpot_ms"]["median"]
        ratios[-1].append(tpot / step[1]["step_ms"])
        row += [f"{tpot:.2f}", f"{ratios[-1][-1]:.2f}x"]
    row.append(f"{predicted:.1f}")
    for path in ("zmq", "http"):
        served = load(f"served_r{r}_{streams}_{path}")
        assert served["failed"] == 0, f"round {r} {path}: {served['failed']} failed requests"
        ratios[-1].append(served["output_throughput"] / predicted)
        row += [f"{served['output_throughput']:.1f}", f"{ratios[-1][-1]:.2f}x"]
    print("| " + " | ".join(row) + " |")
if rounds > 1:  # the median of each ratio over the rounds: one round's stall on a shared host does not decide
    med = [f"**{statistics.median(col):.2f}x**" for col in zip(*ratios)]
    print(f"| median | | | {med[0]} | | {med[1]} | | | {med[2]} | | {med[3]} |")
PY

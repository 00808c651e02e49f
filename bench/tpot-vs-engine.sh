#!/bin/bash
# One stream through the server against the engine alone (issue 14's serving target: TPOT through
# `tpserve serve` within 1.15x of the engine's batch-1 step). Per round, interleaved: one 200-token greedy
# request through `tpserve serve --tp TP` (`tpserve batch`, its mean TPOT), then the same prompt through
# `tpserve-run --tp TP` on the same threads per rank (decode ms per step). Prints both and the ratio.
# Environment: BUILD (build), MODEL, TP (2), THREADS (per rank; default 2 / TP), ROUNDS (3), TOKENS (200).
set -euo pipefail
BUILD=${BUILD:-build}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
TP=${TP:-2}
THREADS=${THREADS:-$((2 / TP > 0 ? 2 / TP : 1))}
ROUNDS=${ROUNDS:-3}
TOKENS=${TOKENS:-200}
PROMPT="Tell me a long story about the sea and the ships"
PORT=$((20000 + RANDOM % 20000))
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

"$BUILD/client/tpserve" serve --model "$MODEL" --tp "$TP" --threads "$THREADS" --port "$PORT" \
  --worker-port $((PORT + 1)) >/tmp/tpot-vs-engine.log 2>&1 &
SERVE_PID=$!
trap 'kill $SERVE_PID 2>/dev/null; wait $SERVE_PID 2>/dev/null || true' EXIT
for _ in $(seq 120); do
  "$BUILD/client/tpserve" health --server "tcp://127.0.0.1:$PORT" --timeout-s 2 >/dev/null 2>&1 && break
  kill -0 $SERVE_PID 2>/dev/null || { cat /tmp/tpot-vs-engine.log >&2; exit 1; }
  sleep 0.5
done

echo "TP $TP, $THREADS thread(s) per rank, $TOKENS tokens, greedy; served TPOT vs the engine's decode step"
for round in $(seq "$ROUNDS"); do
  served=$("$BUILD/client/tpserve" batch --server "tcp://127.0.0.1:$PORT" --prompt "$PROMPT" \
    --max-tokens "$TOKENS" --ignore-eos 2>&1 | sed -n 's/.*mean TPOT \([0-9.]*\) ms.*/\1/p')
  engine=$("$BUILD/worker/tpserve-run" --model "$MODEL" --prompt "$PROMPT" --max-tokens "$TOKENS" --ignore-eos \
    --tp "$TP" --threads "$THREADS" 2>&1 >/dev/null |
    sed -n 's/.* decode steps: \([0-9.]*\) ms (\([0-9.]*\) tok\/s).*/\2/p')
  awk -v r="$round" -v s="$served" -v e="$engine" -v l="$(cut -d' ' -f1 /proc/loadavg)" \
    'BEGIN { step = 1000 / e; printf "round %d: served TPOT %.2f ms, engine step %.2f ms: %.2fx (load %s)\n", r, s, step, s / step, l }'
done

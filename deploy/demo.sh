#!/usr/bin/env bash
# `make demo`: a 2-rank CPU cluster on SmolLM2-135M-Instruct, driven through the real protocol.
#   1. `tpserve serve --tp 2` starts tpserve-coordinator and `mpirun -np 2 tpserve-worker`;
#   2. waits for the worker group to register (tpserve health);
#   3. streams a chat answer (tpserve generate --chat);
#   4. sends 8 completions at once on one connection (tpserve batch) and prints throughput;
#   5. a beam search of width 4 on the chat question, its 2 best hypotheses with their scores;
#   6. prints the coordinator's stats, then SIGTERM: the coordinator drains, shuts the group
#      down, everything exits 0 and no process is left behind.
# Env: BUILD (build dir, default build), MODEL, PORT / WORKER_PORT (default: random free-ish),
#      TP (default 2), MAX_TOKENS (default 48).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${BUILD:-build}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
TP=${TP:-2}
MAX_TOKENS=${MAX_TOKENS:-48}
PORT=${PORT:-$((20000 + RANDOM % 20000))}
WORKER_PORT=${WORKER_PORT:-$((PORT + 1))}
SERVER=tcp://127.0.0.1:$PORT
TPSERVE=$BUILD/client/tpserve
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

for bin in "$TPSERVE" "$BUILD/coordinator/tpserve-coordinator" "$BUILD/worker/tpserve-worker"; do
  [ -x "$bin" ] || { echo "demo: $bin is missing; run 'make build' first" >&2; exit 1; }
done
[ -f "$MODEL" ] || { echo "demo: $MODEL is missing; run 'make model' first" >&2; exit 1; }

# Two ranks share the machine: one kernel thread each keeps threads x ranks <= cores.
THREADS=${THREADS:-$(( $(nproc) / TP > 0 ? $(nproc) / TP : 1 ))}

echo "== starting: tpserve serve --model $MODEL --tp $TP --port $PORT (threads per rank: $THREADS)"
"$TPSERVE" serve --model "$MODEL" --tp "$TP" --port "$PORT" --worker-port "$WORKER_PORT" \
  --threads "$THREADS" &
SERVE_PID=$!
cleanup() {
  if kill -0 "$SERVE_PID" 2>/dev/null; then
    kill -TERM "$SERVE_PID" 2>/dev/null || true
    wait "$SERVE_PID" 2>/dev/null || true
  fi
}
trap cleanup EXIT

echo "== waiting for the worker group to register"
for i in $(seq 1 240); do
  if "$TPSERVE" health --server "$SERVER" >/dev/null 2>&1; then break; fi
  kill -0 "$SERVE_PID" 2>/dev/null || { echo "demo: tpserve serve exited early" >&2; exit 1; }
  sleep 0.5
done
"$TPSERVE" health --server "$SERVER"

echo
echo "== chat (streamed): What is the capital of France?"
# (SmolLM2's template would add its own default system prompt, with which this small quantised
# model answers oddly; a plain one keeps the demo readable.)
SYSTEM="You are a helpful assistant."
"$TPSERVE" generate --server "$SERVER" --system "$SYSTEM" \
  --chat "What is the capital of France? Answer in one sentence." --max-tokens 64

echo
echo "== 8 concurrent completions (greedy, $MAX_TOKENS tokens max each)"
"$TPSERVE" batch --server "$SERVER" --max-tokens "$MAX_TOKENS" --as-chat --system "$SYSTEM" \
  --prompt "Write a haiku about the sea." \
  --prompt "Name three primary colors." \
  --prompt "What is 12 times 12?" \
  --prompt "Give one tip for learning to code." \
  --prompt "What does a CPU do?" \
  --prompt "Describe a cat in one sentence." \
  --prompt "Why is the sky blue?" \
  --prompt "Suggest a name for a friendly robot."

echo
echo "== beam search (width 4, the 2 best): What is the capital of France?"
"$TPSERVE" generate --server "$SERVER" --chat "What is the capital of France?" --max-tokens 24 \
  --beam-width 4 --n 2 --json 2>/dev/null |
  python3 -c 'import json, sys
for line in sys.stdin:
    s = json.loads(line)
    print("  %d: score %.3f (%s) %r" % (s["sample"], s["beam"]["score"], s["finish_reason"], s["text"]))'

echo
echo "== coordinator stats"
"$TPSERVE" stats --server "$SERVER"

echo
echo "== shutting down (SIGTERM: drain, then the worker group exits)"
kill -TERM "$SERVE_PID"
status=0
wait "$SERVE_PID" || status=$?
trap - EXIT
if pgrep -f "tpserve-worker --model $MODEL --coordinator tcp://127.0.0.1:$WORKER_PORT" >/dev/null ||
   pgrep -f "tpserve-coordinator --model $MODEL --host 127.0.0.1 --port $PORT" >/dev/null; then
  echo "demo: stray processes left behind" >&2
  exit 1
fi
echo "== done (tpserve serve exit code $status)"
exit "$status"

#!/usr/bin/env bash
# serve-sweep.sh: serving benchmarks of SmolLM2-135M through the real server (tpserve serve) with
# tpserve-bench, and the same load on llama.cpp's llama-server as the peer. For each TP degree in
# $TPS (default "1 2"):
#   1. closed-loop concurrency sweep C in $CONCURRENCIES (default 1 2 4 8 16 32 64), 2*C requests
#      per point, input $INPUT_LEN (64) / output $OUTPUT_LEN (32) token ids, ignore_eos;
#   2. continuous vs static batching of the same requests at C=$STATIC_C (16): 3*C requests with
#      lengths varied by --range-ratio 0.5. The coordinator has no static mode, so static batching
#      is emulated client-side (tpserve-bench --static-batch: send C, wait for all C, next batch).
# Then, at TP 1, prefix caching: $PREFIX_N requests at concurrency 1 sharing a $PREFIX_LEN-token
# prefix (+16 own tokens, 8 output), once on a server with prefix caching and once on one started
# with `tpserve serve --no-prefix-cache`; the TTFT ratio is the gain.
# Then, at TP 1, an open loop: $OPEN_N requests arriving as a Poisson process at $OPEN_RATE req/s with
# ShareGPT-like (lognormal) lengths of means $INPUT_LEN / $OUTPUT_LEN, goodput under TTFT <= $GOODPUT_TTFT_MS
# and TPOT <= $GOODPUT_TPOT_MS ms; llama-server gets the same arrivals with $OPEN_SLOTS slots.
# Then the peer: llama.cpp's llama-server through the same tpserve-bench (its openai http backend: POST /v1/completions, streamed) with
# the same requests (same seed and salt) at the same concurrency points as TP 1: the same GGUF, the
# same thread count as TP 1 (-t/-tb = nproc), --parallel C slots (restarted per point), continuous
# batching on, and the same KV memory as tpserve's --kv-memory-mb $KV_MB, as one unified pool
# (llama.cpp keeps K/V in F16 and tpserve in F32, so llama.cpp holds twice the tokens in it).
# Prints one table per part with each figure beside its peer as a ratio (TP2/TP1, continuous/static,
# no-cache/cache, tpserve/llama.cpp). Writes bench/results/serve_*.json (one per run, tpserve-bench's
# JSON) and serve_sweep.json (this sweep's parameters), which bench/summarize.py reads for
# bench/README.md's serving tables.
# Env: BUILD (default build: needs client/tpserve, coordinator/tpserve-coordinator,
#      worker/tpserve-worker, bench/tpserve-bench), TPSERVE, BENCH (override single binaries),
#      MODEL, PORT, TPS, CONCURRENCIES, INPUT_LEN, OUTPUT_LEN, STATIC_C, PREFIX_LEN, PREFIX_N, KV_MB (256),
#      OPEN_N (16), OPEN_RATE (0.5: below TP 1 capacity, so goodput means something), OPEN_SLOTS (64: tpserve's max_num_seqs), GOODPUT_TTFT_MS (2000), GOODPUT_TPOT_MS (200),
#      SKIP_OPEN=1,
#      RESULTS (default bench/results), SKIP_PREFIX=1, SKIP_TPSERVE=1 (the peer only), SKIP_LLAMA=1,
#      LLAMA_SERVER (default third_party/llama.cpp/build/bin/llama-server, from bench/peers/build-llama-cpp.sh),
#      LLAMA_SERVER_ARGS (extra llama-server flags, e.g. "--poll 0": its threads spin-wait by default, which a
#      loaded shared host punishes far more than tpserve's condition-variable pool).
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
KV_MB=${KV_MB:-256}
OPEN_N=${OPEN_N:-16}
OPEN_RATE=${OPEN_RATE:-0.5}
OPEN_SLOTS=${OPEN_SLOTS:-64}
GOODPUT_TTFT_MS=${GOODPUT_TTFT_MS:-2000}
GOODPUT_TPOT_MS=${GOODPUT_TPOT_MS:-200}
RESULTS=${RESULTS:-bench/results}
LLAMA_SERVER=${LLAMA_SERVER:-third_party/llama.cpp/build/bin/llama-server}
SERVER=tcp://127.0.0.1:$PORT
LLAMA_URL=http://127.0.0.1:$PORT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export TPSERVE_COORDINATOR=${TPSERVE_COORDINATOR:-$BUILD/coordinator/tpserve-coordinator}
export TPSERVE_WORKER=${TPSERVE_WORKER:-$BUILD/worker/tpserve-worker}

need=("$BENCH")
[ "${SKIP_TPSERVE:-0}" = 1 ] || need+=("$TPSERVE" "$TPSERVE_COORDINATOR" "$TPSERVE_WORKER")
for bin in "${need[@]}"; do
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

wait_healthy() {  # wait_healthy NAME LOG CHECK...: until CHECK succeeds, while $SERVE_PID lives
  local name=$1 log=$2; shift 2
  for _ in $(seq 1 240); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    kill -0 "$SERVE_PID" 2>/dev/null || { echo "serve-sweep: $name exited; see $log" >&2; exit 1; }
    sleep 0.5
  done
  echo "serve-sweep: $name not healthy after 120 s" >&2; exit 1
}

start_server() {  # start_server TP [extra serve flags...]
  local tp=$1; shift
  local threads=$(( $(nproc) / tp > 0 ? $(nproc) / tp : 1 ))
  "$TPSERVE" serve --model "$MODEL" --tp "$tp" --port "$PORT" --worker-port $((PORT + 1)) \
    --threads "$threads" --kv-memory-mb "$KV_MB" "$@" >"$RESULTS/serve_server.log" 2>&1 &
  SERVE_PID=$!
  wait_healthy "tpserve serve" "$RESULTS/serve_server.log" "$TPSERVE" health --server "$SERVER"
}

start_llama_server() {  # start_llama_server SLOTS KV_TOKENS
  "$LLAMA_SERVER" -m "$MODEL" -t "$(nproc)" -tb "$(nproc)" --parallel "$1" --cont-batching -c "$2" --kv-unified \
    --cache-ram 0 --no-webui --host 127.0.0.1 --port "$PORT" ${LLAMA_SERVER_ARGS:-} >"$RESULTS/serve_llama_server.log" 2>&1 &
  SERVE_PID=$!
  wait_healthy llama-server "$RESULTS/serve_llama_server.log" curl -sf "$LLAMA_URL/health"
}

open_loop() {  # open_loop URL NAME: the open-loop run, the same arrivals and requests for every server
  bench "$1" "$2" --token-salt 7000 --num-requests "$OPEN_N" --request-rate "$OPEN_RATE" --dataset sharegpt-like \
    --input-len "$INPUT_LEN" --output-len "$OUTPUT_LEN" --goodput "ttft:$GOODPUT_TTFT_MS,tpot:$GOODPUT_TPOT_MS"
}

bench() {  # bench URL NAME [tpserve-bench flags...]; quiet, JSON to $RESULTS/serve_NAME.json
  local url=$1 name=$2; shift 2
  "$BENCH" --server "$url" --seed 1 --max-duration-s 300 --label "$name" --json "$RESULTS/serve_$name.json" \
    --progress-every 100000 "$@" >"$RESULTS/serve_$name.txt" 2>&1 \
    || { echo "serve-sweep: tpserve-bench $name failed:" >&2; cat "$RESULTS/serve_$name.txt" >&2; exit 1; }
  echo "  done: $name"
}

START=$(date +%s)
echo "== serve sweep on $MODEL (host: $(nproc) cores), results in $RESULTS"
first_tp=$(echo $TPS | cut -d' ' -f1)
if [ "${SKIP_TPSERVE:-0}" != 1 ]; then
  for tp in $TPS; do
    echo "== TP $tp: starting tpserve serve"
    start_server "$tp"
    for c in $CONCURRENCIES; do
      bench "$SERVER" "tp${tp}_c${c}" --token-salt $((100 + c)) --num-requests $((2 * c)) --concurrency "$c" \
        --input-len "$INPUT_LEN" --output-len "$OUTPUT_LEN"
    done
    for mode in continuous static; do
      flag=; [ "$mode" = static ] && flag=--static-batch
      salt=$((1000 * tp)); [ "$mode" = static ] && salt=$((salt + 1))  # same lengths, no cross-run cache hits
      bench "$SERVER" "tp${tp}_${mode}_c${STATIC_C}" --token-salt $salt --num-requests $((3 * STATIC_C)) \
        --concurrency "$STATIC_C" --input-len "$INPUT_LEN" --output-len "$OUTPUT_LEN" --range-ratio 0.5 $flag
    done
    if [ "$tp" = "$first_tp" ] && [ "${SKIP_OPEN:-0}" != 1 ]; then
      open_loop "$SERVER" "tp${tp}_open"
    fi
    if [ "$tp" = "$first_tp" ] && [ "${SKIP_PREFIX:-0}" != 1 ]; then
      bench "$SERVER" "tp${tp}_prefix_cached" --token-salt 5000 --num-requests "$PREFIX_N" --concurrency 1 \
        --shared-prefix-len "$PREFIX_LEN" --input-len 16 --output-len 8
      stop_server
      echo "== TP $tp: restarting with --no-prefix-cache"
      start_server "$tp" --no-prefix-cache
      bench "$SERVER" "tp${tp}_prefix_uncached" --token-salt 5001 --num-requests "$PREFIX_N" --concurrency 1 \
        --shared-prefix-len "$PREFIX_LEN" --input-len 16 --output-len 8
    fi
    stop_server
  done
fi

if [ "${SKIP_LLAMA:-0}" != 1 ] && [ -x "$LLAMA_SERVER" ]; then
  # tpserve's KV memory in llama.cpp's F16 K/V: KV_MB MiB / (L x 2 x Hkv x D x 2 bytes) tokens.
  kv_tokens=$(python3 -c '
import sys
from gguf import GGUFReader
r = GGUFReader(sys.argv[1])
arch = bytes(r.fields["general.architecture"].parts[-1]).decode()
get = lambda key: int(r.fields[arch + "." + key].parts[-1][0])
head_dim = get("embedding_length") // get("attention.head_count")
print(int(sys.argv[2]) * 2**20 // (get("block_count") * 2 * get("attention.head_count_kv") * head_dim * 2))' "$MODEL" "$KV_MB")
  echo "== llama.cpp llama-server: $kv_tokens KV tokens ($KV_MB MiB F16), $(nproc) threads, --parallel C"
  for c in $CONCURRENCIES; do
    start_llama_server "$c" "$kv_tokens"
    # The salt of tpserve's TP runs: the very same requests.
    bench "$LLAMA_URL" "llama_c${c}" --token-salt $((100 + c)) --num-requests $((2 * c)) --concurrency "$c" \
      --input-len "$INPUT_LEN" --output-len "$OUTPUT_LEN"
    stop_server
  done
  if [ "${SKIP_OPEN:-0}" != 1 ]; then
    start_llama_server "$OPEN_SLOTS" "$kv_tokens"
    open_loop "$LLAMA_URL" llama_open
    stop_server
  fi
elif [ "${SKIP_LLAMA:-0}" != 1 ]; then
  echo "serve-sweep: $LLAMA_SERVER is missing (bench/peers/build-llama-cpp.sh builds it): no llama.cpp peer"
fi
ELAPSED=$(( $(date +%s) - START ))

cat >"$RESULTS/serve_sweep.json" <<EOF
{"tps": "$TPS", "concurrencies": "$CONCURRENCIES", "static_c": $STATIC_C, "elapsed_s": $ELAPSED,
 "model": "$MODEL", "input_len": $INPUT_LEN, "output_len": $OUTPUT_LEN, "kv_mb": $KV_MB, "threads": $(nproc)}
EOF
python3 bench/loadgen/serve_summary.py "$RESULTS"

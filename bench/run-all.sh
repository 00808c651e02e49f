#!/usr/bin/env bash
# `make bench`: every benchmark of the project on this machine, in one run (about 30 minutes on 2 quiet cores).
#  1. limits: STREAM (tpserve-bench-stream), kernels vs triad / FMA peak (tpserve-bench-kernels --quick),
#     decode attention vs triad (tpserve-bench-attention --quick)
#  2. engine: tpserve-bench-engine on SmolLM2 Q4_1 and synthetic F32 / Q8_0 models of 135M and 1B shape,
#     TP 1 and 2 (TP 4 oversubscribed on a 2-core host, labelled so), decode at batch 1, 8, 32 and 64; the
#     TP degrees in turns, three rounds (ENGINE_ROUNDS), each figure the median round's
#  3. all-reduce: tpserve-bench-allreduce under mpirun -np 2
#  4. peer: llama.cpp's llama-bench (pp512 / tg128) on the same files and thread count
#  5. the floor: tpserve-bench-naive (generation without a KV cache)
#  6. serving: bench/serve-sweep.sh (tpserve serve TP 1/2 under tpserve-bench, and llama.cpp's llama-server
#     under the same load as the peer)
#  7. the server against the engine alone (bench/serving-vs-engine.sh, TP 1 and 2): one stream's TPOT through
#     ZeroMQ and the OpenAI gateway beside the engine's batch-1 step, 64 streams beside the engine's prediction;
#     three rounds and their median ratios
#  8. every weight type beside llama.cpp at 1 and all threads (bench/types-vs-llama.sh: SmolLM2 requantised
#     by llama-quantize, pp512 / tg128 of both engines back to back, the bandwidth bound in the same rows);
#     three interleaved rounds, as issue 14 measured them, and their median ratios
#  9. bench/results/summary.md + calibration.json + the H200 projection (bench/summarize.py, which runs
#     bench/scaling_model.py on this calibration), bench/README.md's tables, the roofline PNG (bench/roofline.py)
# Environment: BUILD (default build), BENCH_QUICK=1 for a short smoke run (~5 minutes: small sizes, one
# serving point), BENCH_TMP (default /tmp/tpserve-bench), BENCH_RESULTS (default bench/results; elsewhere,
# the page is written there too, not over bench/README.md: for trial runs that must not touch the committed results).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${BUILD:-build}
results=${BENCH_RESULTS:-bench/results}
export BENCH_RESULTS=$results
tmp=${BENCH_TMP:-/tmp/tpserve-bench}
quick=${BENCH_QUICK:-0}
mkdir -p "$results" "$tmp"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
threads=$(nproc)
start=$(date +%s)

need() {  # builds each target whose program is not in the build tree yet
  for t in "$@"; do
    if [ -z "$(find "$build" -maxdepth 2 -type f -name "$t" -perm -u+x 2>/dev/null | head -1)" ]; then
      cmake --build "$build" --target "$t" -j "$threads"
    fi
  done
}
need tpserve-bench-stream tpserve-bench-kernels tpserve-bench-attention tpserve-bench-engine tpserve-bench-allreduce tpserve-mkmodel \
  tpserve-bench-naive tpserve-bench tpserve tpserve-coordinator tpserve-worker
mkmodel=$build/model/tpserve-mkmodel
engine=$build/bench/tpserve-bench-engine

step() { echo; echo "=== $* ($(($(date +%s) - start)) s)"; }

step "machine"
lscpu | grep -E "Model name|^CPU\(s\)|Thread\(s\) per core|L3" | tee "$results/machine.txt"

step "STREAM"
"$build/bench/tpserve-bench-stream" | tee "$results/stream.txt"

step "kernels (--quick)"
"$build/bench/tpserve-bench-kernels" --quick --shape small | tee "$results/kernels.txt"

step "decode attention (--quick)"
"$build/bench/tpserve-bench-attention" --quick | tee "$results/attention.txt"

step "synthetic models"
smollm=models/SmolLM2-135M-Instruct.Q4_1.gguf
declare -A files=([smollm2-q4_1]=$smollm)
for spec in "synth135m-f32 smollm2-135m f32" "synth135m-q8_0 smollm2-135m q8_0" "synth1b-q8_0 llama-1b q8_0"; do
  read -r name preset type <<<"$spec"
  if [ "$quick" = 1 ] && [ "$name" = synth1b-q8_0 ]; then continue; fi
  out=$tmp/$name.gguf
  [ -s "$out" ] || "$mkmodel" --preset "$preset" --type "$type" --seed 1 --out "$out"
  files[$name]=$out
done

step "engine"
steps=16
batches=1,8,32,64
# The TP degrees of a model run in turns, ENGINE_ROUNDS times, and each figure is the median round's: the
# figures of one run on this VM drift by ±10 % within minutes, so TP 2 ÷ TP 1 from two single runs
# minutes apart moved between 0.85 and 1.05 from round to round.
rounds=${ENGINE_ROUNDS:-3}
[ "$quick" = 1 ] && steps=4 && batches=1,8 && rounds=1
rm -rf "$results"/engine_*.json "$results/engine_rounds"
mkdir -p "$results/engine_rounds"
for name in smollm2-q4_1 synth135m-q8_0 synth135m-f32 synth1b-q8_0; do
  file=${files[$name]:-}
  [ -n "$file" ] || continue
  prompt=512
  model_steps=$steps
  model_batches=$batches
  if [ "$name" = synth1b-q8_0 ]; then
    prompt=128  # pp512 is 1.3 TFLOP: over a minute per rep on 2 cores
    model_steps=$((steps < 4 ? steps : 4))  # a batch-32 step is 80 GFLOP
    model_batches=${batches%,64}  # batch 64 adds a 1,024-token prefill per TP degree: ~1 minute in all
  fi
  [ "$quick" = 1 ] && prompt=64
  tps="1 2 4"
  [ "$name" = synth135m-f32 ] && tps="1 2"
  [ "$quick" = 1 ] && tps="1 2"
  for round in $(seq "$rounds"); do
    for tp in $tps; do
      # pp512 at TP 1 (llama-bench's figure); a shorter prompt at TP > 1 keeps the run within ~15 minutes.
      tp_prompt=$prompt
      [ "$tp" -gt 1 ] && [ "$prompt" -gt 128 ] && tp_prompt=128
      label="TP$tp"
      [ "$tp" -gt "$threads" ] && label="TP$tp (oversubscribed: $tp ranks on $threads cores)"
      step "engine $name $label, round $round of $rounds"
      "$engine" --model "$file" --tp "$tp" --tp-label "$label" --batches "$model_batches" --prompt "$tp_prompt" \
        --decode-steps "$model_steps" --json "$results/engine_rounds/engine_${name}_tp${tp}_r$round.json" ||
        echo "engine $name TP$tp failed (continuing)"
    done
  done
done
python3 bench/median_round.py "$results/engine_rounds" "$results"

step "all-reduce (mpirun -np 2)"
mpirun --allow-run-as-root --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 -np 2 \
  "$build/bench/tpserve-bench-allreduce" --max-bytes $((16 << 20)) | tee "$results/allreduce_np2.txt" ||
  echo "allreduce bench failed (continuing)"

step "llama.cpp peer"
llama_bench=third_party/llama.cpp/build/bin/llama-bench
if [ ! -x "$llama_bench" ] || [ ! -x third_party/llama.cpp/build/bin/llama-server ]; then bench/peers/build-llama-cpp.sh || true; fi
rm -f "$results"/llamacpp_*.json
if [ -x "$llama_bench" ]; then
  # llama.cpp's threads busy-wait at barriers, which a loaded shared host punishes: one repetition each
  # keeps the run short; the 1B model is left out (minutes per figure here).
  for name in smollm2-q4_1 synth135m-q8_0 synth135m-f32; do
    file=${files[$name]:-}
    [ -n "$file" ] || continue
    p=512; n=128; reps=1
    [ "$quick" = 1 ] && p=64 && n=8 && reps=1
    "$llama_bench" -m "$file" -t "$threads" -p "$p" -n "$n" -r "$reps" -o json >"$results/llamacpp_$name.json" \
      2>"$tmp/llamacpp_$name.err" || { echo "llama-bench failed on $name:"; tail -3 "$tmp/llamacpp_$name.err"; rm -f "$results/llamacpp_$name.json"; }
  done
else
  echo "llama-bench not available: no peer figures"
fi

step "the floor: generation without a KV cache"
"$build/bench/tpserve-bench-naive" --model models/SmolLM2-135M-Instruct.Q4_1.gguf --threads "$threads" |
  tee "$results/naive.txt" || echo "naive bench failed (continuing)"

step "serving: concurrency sweep, continuous vs static batching, prefix caching, llama-server peer"
rm -f "$results"/serve_*.json "$results"/serve_*.txt
if [ "$quick" = 1 ]; then  # one small point of each part: checks the path, measures little
  BUILD="$build" RESULTS="$results" TPS=1 CONCURRENCIES=2 STATIC_C=2 INPUT_LEN=32 OUTPUT_LEN=8 SKIP_PREFIX=1 OPEN_N=4 OPEN_RATE=4 \
    bench/serve-sweep.sh || echo "serve sweep failed (continuing)"
else
  BUILD="$build" RESULTS="$results" bench/serve-sweep.sh || echo "serve sweep failed (continuing)"
fi

step "speculative decoding: prompt lookup beside llama-server's ngram-simple"
if [ "$quick" = 1 ]; then
  python3 bench/speculative.py --build "$build" --rounds 1 --batches 1 --max-tokens 16 --results "$tmp/speculative" ||
    echo "speculative bench failed (continuing)"
else
  python3 bench/speculative.py --build "$build" --rounds 2 --batches 1,4,16 --results "$results/speculative" |
    tee "$results/speculative.md" || echo "speculative bench failed (continuing)"
fi

step "beam search: width 2 and 4 beside n = W sampling of the same batch"
if [ "$quick" = 1 ]; then
  python3 bench/beam_search.py --build "$build" --rounds 1 --widths 2 --concurrency 1 --max-tokens 8 \
    --results "$tmp/beam_search" || echo "beam search bench failed (continuing)"
else
  python3 bench/beam_search.py --build "$build" --rounds 2 --concurrency 1,4 --max-tokens 32 \
    --results "$results/beam_search" | tee "$results/beam_search.md" || echo "beam search bench failed (continuing)"
fi

step "the server against the engine alone: one stream and 64 streams, ZeroMQ and HTTP"
for tp in 1 2; do
  rm -rf "$results/serving_vs_engine_tp$tp"
  if [ "$quick" = 1 ]; then
    TP=$tp ROUNDS=1 STREAMS=4 OUTPUT_LEN=16 BUILD="$build" RESULTS="$tmp/serving_vs_engine_tp$tp" \
      bench/serving-vs-engine.sh || echo "serving vs engine failed (continuing)"
  else
    TP=$tp ROUNDS=3 BUILD="$build" RESULTS="$results/serving_vs_engine_tp$tp" bench/serving-vs-engine.sh ||
      echo "serving vs engine failed (continuing)"
  fi
done

step "every weight type beside llama.cpp, 1 and $threads threads"
for t in 1 "$threads"; do
  rm -rf "$results/types_vs_llama_t$t" "$results/types_vs_llama_t$t.md"
  if [ "$quick" = 1 ]; then
    TYPES=Q4_1 ROUNDS=1 THREADS=$t BUILD="$build" RESULTS="$tmp/types_vs_llama_t$t" bench/types-vs-llama.sh ||
      echo "types bench failed (continuing)"
  else
    ROUNDS=3 THREADS=$t BUILD="$build" RESULTS="$results/types_vs_llama_t$t" bench/types-vs-llama.sh \
      >"$results/types_vs_llama_t$t.md" && cat "$results/types_vs_llama_t$t.md" || echo "types bench failed (continuing)"
  fi
  [ "$t" = "$threads" ] && break
done

step "summary, calibration, roofline"
python3 -c "import matplotlib" 2>/dev/null || python3 -m pip install --quiet matplotlib
python3 bench/summarize.py
python3 bench/roofline.py
step "done"
cat "$results/summary.md"

#!/usr/bin/env bash
# Every weight type beside llama.cpp on the same file and threads (issues 13 and 14): SmolLM2-135M-Instruct
# requantized by llama.cpp's own llama-quantize (--allow-requantize, from the Q4_1 file) to each type, then
# per round and type `llama-bench -p 512 -n 128` and `tpserve-bench-engine --batches 1 --prompt 512
# --decode-steps 128`, the two engines back to back (interleaved, so both see the same neighbours' load).
# Prints one markdown table (pp512 and tg128 tok/s of both, ratio tpserve ÷ llama.cpp per round and their
# median, tg128 against the bandwidth bound at the median of the runs' triads) and keeps
# the raw JSON under $RESULTS.
# Environment: BUILD (build), LLAMA (third_party/llama.cpp/build/bin), TYPES ("Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K_M
#              Q5_K_M Q6_K F16 BF16 F32"), ROUNDS (2), THREADS (nproc), RESULTS (bench/results/types_vs_llama),
#              BENCH_TMP (/tmp/tpserve-bench: the requantized files), ISA (unset: each engine's best for this
#              CPU; avx2: tpserve at TPSERVE_ISA=avx2 beside llama.cpp built for AVX2 alone,
#              `bench/peers/build-llama-cpp.sh avx2`: what a CPU without AVX-512 gets).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LLAMA=${LLAMA:-third_party/llama.cpp/build/bin}
quantize=$LLAMA/llama-quantize
if [ "${ISA:-}" = avx2 ]; then
  export TPSERVE_ISA=avx2
  quantize=third_party/llama.cpp/build/bin/llama-quantize  # the files are the same whoever quantizes them
  LLAMA=third_party/llama.cpp/build-avx2/bin
elif [ -n "${ISA:-}" ]; then
  echo "types-vs-llama: ISA=$ISA: only avx2 has a peer build" >&2
  exit 1
fi
TYPES=${TYPES:-"Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K_M Q5_K_M Q6_K F16 BF16 F32"}
ROUNDS=${ROUNDS:-2}
THREADS=${THREADS:-$(nproc)}
RESULTS=${RESULTS:-bench/results/types_vs_llama}
tmp=${BENCH_TMP:-/tmp/tpserve-bench}
source_file=models/SmolLM2-135M-Instruct.Q4_1.gguf
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for tool in "$LLAMA/llama-bench" "$quantize"; do
  [ -x "$tool" ] || { echo "types-vs-llama: $tool missing (bench/peers/build-llama-cpp.sh ${ISA:-})" >&2; exit 1; }
done
[ -f "$source_file" ] || scripts/fetch-model.sh
mkdir -p "$RESULTS" "$tmp"

file_of() {  # the SmolLM2 file of type $1 (the original for Q4_1)
  if [ "$1" = Q4_1 ]; then echo "$source_file"; else echo "$tmp/smollm2-$1.gguf"; fi
}
for type in $TYPES; do
  out=$(file_of "$type")
  [ -s "$out" ] || "$quantize" --allow-requantize "$source_file" "$out" "$type" "$THREADS" >/dev/null 2>&1 ||
    { echo "types-vs-llama: llama-quantize to $type failed" >&2; exit 1; }
done

for round in $(seq "$ROUNDS"); do
  for type in $TYPES; do
    file=$(file_of "$type")
    echo "== round $round $type, load average $(cut -d' ' -f1 /proc/loadavg)" >&2
    "$LLAMA/llama-bench" -m "$file" -t "$THREADS" -p 512 -n 128 -r 1 -o json >"$RESULTS/r${round}_${type}_llamacpp.json" \
      2>/dev/null
    "$BUILD/bench/tpserve-bench-engine" --model "$file" --threads "$THREADS" --batches 1 --prompt 512 \
      --decode-steps 128 --json "$RESULTS/r${round}_${type}_tpserve.json" >/dev/null
  done
done

python3 - "$RESULTS" "$ROUNDS" "$THREADS" $TYPES <<'EOF'
import json, os, statistics, sys
results, rounds, threads, types = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
def load(path):
    with open(path) as f:
        return json.load(f)
runs = {(t, r): (load(f"{results}/r{r}_{t}_tpserve.json"), load(f"{results}/r{r}_{t}_llamacpp.json"))
        for t in types for r in range(1, rounds + 1)}
# One bandwidth for the whole table: the median of every run's triad. Each run measures its own, and on a shared
# host one reading can be far off (27-36 GB/s at one thread within minutes here), which moved a type's share of
# the bound more than its speed did.
triad = statistics.median(ours["triad_gbs"] for ours, _ in runs.values())
isa = os.environ.get("TPSERVE_ISA")
print(f"| SmolLM2-135M, {threads} threads{', both engines AVX2' if isa == 'avx2' else ''} | pp512 tok/s tpserve / llama.cpp | "
      "pp512 ratio per round (median) | tg128 tok/s tpserve / llama.cpp | tg128 ratio per round (median) | "
      f"tg128, % of the bandwidth bound (median tok/s; triad {triad:.1f} GB/s, the median of the table's runs) |")
print("|---|---|---|---|---|---|")
for t in types:
    pp, tg, step_bytes = [], [], []
    for r in range(1, rounds + 1):
        ours, peer_runs = runs[(t, r)]
        peer = {("pp" if x["n_gen"] == 0 else "tg"): x["avg_ts"] for x in peer_runs}
        d1 = next(d for d in ours["decode"] if d["batch"] == 1)
        pp.append((ours["prefill"]["tok_s"], peer["pp"]))
        tg.append((d1["tok_s"], peer["tg"]))
        step_bytes.append(d1["bytes_per_step"])
    cell = lambda xs: ", ".join(f"{a:.0f} / {b:.0f}" for a, b in xs)
    ratio = lambda xs: (", ".join(f"{a / b:.2f}x" for a, b in xs)
                        + (f" (**{statistics.median(a / b for a, b in xs):.2f}x**)" if len(xs) > 1 else ""))
    bound = triad * 1e9 / statistics.median(step_bytes)
    share = statistics.median(a for a, _ in tg) / bound
    print(f"| {t} | {cell(pp)} | {ratio(pp)} | {cell(tg)} | {ratio(tg)} | {share:.0%} |")
EOF

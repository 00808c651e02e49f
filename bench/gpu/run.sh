#!/usr/bin/env bash
# The one prepared GPU run (bench/README.md, "GPU"). Two modes:
#
#   bash bench/gpu/run.sh pack     HERE, on the development machine (no GPU needed): builds the GPU
#                                  targets (Release, CUDA on, portable -march=x86-64-v3) and packs the
#                                  binaries plus the non-CUDA shared libraries they load into .gpu-pack/
#                                  (~30 MB, git-ignored through .git/info/exclude), so the lent machine
#                                  spends no device time compiling and needs none of MPI, ZeroMQ,
#                                  Cap'n Proto or GoogleTest installed. The SmolLM2 file (98 MB) is over
#                                  the 64 MiB a call may carry: it is split into .gpu-stage-a and
#                                  .gpu-stage-b for the optional staging calls below.
#   bash bench/gpu/run.sh [run]    THERE, on the lent GPU machine (carry .gpu-pack), under 10 minutes:
#                                  GPU tests (tests_gpu; the NCCL MPI tests where mpirun and enough GPUs
#                                  exist), tpserve-run --device cuda against --device cpu, the engine sweep
#                                  (decode tokens/s at batch 1/8/32/64 and prefill pp512 on SmolLM2 Q4_1 —
#                                  or, when its file was not staged, a synthetic model of its exact shape
#                                  and types — and on 1B-shape synthetic models, Q8_0 and F16, each against
#                                  the 4.8 TB/s HBM roofline) and the NCCL all-reduce sweep over the GPUs
#                                  present. Without .gpu-pack it configures and builds there instead.
#   bash bench/gpu/run.sh stage    THERE: keeps a carried .gpu-stage-a or .gpu-stage-b in /tmp (the machine
#                                  stays warm 30 s between calls); the run reassembles SmolLM2 from both.
#
# Device calls (the run tool): optionally stage first, each call right after the previous one,
#   run(command="bash bench/gpu/run.sh stage", carry=[".gpu-stage-a"], timeout_s=120)
#   run(command="bash bench/gpu/run.sh stage", carry=[".gpu-stage-b"], timeout_s=120)
# then
#   run(command="bash bench/gpu/run.sh", carry=[".gpu-pack"], timeout_s=600)
# Everything lands in $OUT (at most 8 files come back): summary.md, results.json, logs.txt
# (every step's log, appended as each step ends, so a timeout keeps what ran).
# A failed step is recorded and the run goes on.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
MODE=${1:-run}
PACK=$ROOT/.gpu-pack
MODEL_NAME=SmolLM2-135M-Instruct.Q4_1.gguf
STAGE=/tmp/tpserve-stage

pack() {
  local build=$ROOT/build-gpu-pack
  local targets="tests_gpu cuda_executor_mpi_test nccl_communicator_mpi_test tpserve-run tpserve-run-cuda
                 tpserve-mkmodel tpserve-bench-gpu-engine tpserve-bench-nccl"
  cmake -S "$ROOT" -B "$build" -DCMAKE_BUILD_TYPE=Release -DTPSERVE_NATIVE=OFF \
        -DCMAKE_CXX_FLAGS=-march=x86-64-v3 > /tmp/tpserve-gpu-pack-cmake.log || return 1
  grep -q "CUDA backend ON" /tmp/tpserve-gpu-pack-cmake.log || { echo "pack: CMake found no CUDA + NCCL" >&2; return 1; }
  # shellcheck disable=SC2086
  nice cmake --build "$build" --target $targets -j"$(nproc)" || return 1
  rm -rf "$PACK" && mkdir -p "$PACK/bin" "$PACK/lib"
  local bins=("$build/tests/tests_gpu" "$build/tests/cuda_executor_mpi_test" "$build/tests/nccl_communicator_mpi_test"
              "$build/worker/tpserve-run" "$build/worker/tpserve-run-cuda" "$build/model/tpserve-mkmodel"
              "$build/bench/gpu/tpserve-bench-gpu-engine"
              "$build/bench/gpu/tpserve-bench-nccl")
  for bin in "${bins[@]}"; do
    [ -x "$bin" ] || { echo "pack: $bin was not built" >&2; return 1; }
    strip --strip-unneeded -o "$PACK/bin/$(basename "$bin")" "$bin"
  done
  # The shared libraries they load, except glibc's and CUDA's (the lent machine has its own CUDA 13).
  ldd "${bins[@]}" | awk '/=> \// {print $1, $3}' | sort -u | while read -r name path; do
    case "$name" in
      linux-vdso*|ld-linux*|libc.so*|libm.so*|libpthread*|libdl.so*|librt.so*|libcuda.so*|libcudart*|libcublas*|libnccl*) ;;
      *) cp -L "$path" "$PACK/lib/$name" ;;
    esac
  done
  (cd "$ROOT" && git rev-parse HEAD && git status --short) > "$PACK/SOURCE" 2>/dev/null
  local exclude
  exclude=$(git -C "$ROOT" rev-parse --git-path info/exclude)
  case "$exclude" in /*) ;; *) exclude=$ROOT/$exclude ;; esac
  mkdir -p "$(dirname "$exclude")"
  grep -qxF '/.gpu-pack/' "$exclude" 2>/dev/null || echo '/.gpu-pack/' >> "$exclude"
  grep -qxF '/.gpu-stage-*/' "$exclude" 2>/dev/null || echo '/.gpu-stage-*/' >> "$exclude"
  if [ -f "$ROOT/models/$MODEL_NAME" ]; then
    rm -rf "$ROOT/.gpu-stage-a" "$ROOT/.gpu-stage-b"
    mkdir -p "$ROOT/.gpu-stage-a" "$ROOT/.gpu-stage-b"
    split -n 2 -d "$ROOT/models/$MODEL_NAME" /tmp/tpserve-model-part.
    mv /tmp/tpserve-model-part.00 "$ROOT/.gpu-stage-a/part.00"
    mv /tmp/tpserve-model-part.01 "$ROOT/.gpu-stage-b/part.01"
    (cd "$ROOT/models" && sha256sum "$MODEL_NAME") | tee "$ROOT/.gpu-stage-a/SHA256SUMS" > "$ROOT/.gpu-stage-b/SHA256SUMS"
  fi
  du -sh "$PACK" "$ROOT"/.gpu-stage-* 2>/dev/null
}

stage() {
  mkdir -p "$STAGE"
  for dir in "$ROOT"/.gpu-stage-a "$ROOT"/.gpu-stage-b; do
    [ -d "$dir" ] && cp "$dir"/* "$STAGE"/ && echo "staged $(ls "$dir")"
  done
  ls -la "$STAGE"
}

if [ "$MODE" = pack ]; then pack; exit; fi
if [ "$MODE" = stage ]; then stage; exit; fi
[ "$MODE" = run ] || { echo "usage: bash bench/gpu/run.sh [pack|stage|run]" >&2; exit 2; }

# ---- run: on the GPU machine ----
START=$(date +%s)
OUT=${OUT:-$ROOT/bench/gpu/out}
WORK=/tmp/tpserve-gpu
mkdir -p "$OUT" "$WORK/json"
LOGS=$OUT/logs.txt
STEPS=$WORK/steps.tsv
: > "$LOGS"
: > "$STEPS"

# step NAME TIMEOUT_S COMMAND...: runs it, appends its log to logs.txt, records name/rc/seconds.
step() {
  local name=$1 limit=$2
  shift 2
  local t0 rc
  t0=$(date +%s)
  echo "== $name: $*" | tee -a "$LOGS"
  timeout --kill-after=10 "$limit" "$@" > "$WORK/$name.log" 2>&1
  rc=$?
  cat "$WORK/$name.log" >> "$LOGS"
  printf '%s\t%s\t%s\n' "$name" "$rc" "$(( $(date +%s) - t0 ))" >> "$STEPS"
  echo "== $name: rc $rc after $(( $(date +%s) - t0 )) s" | tee -a "$LOGS"
  return $rc
}

step system 30 bash -c 'nvidia-smi; nvcc --version; uname -a; cat /etc/os-release | head -2; nproc; free -g;
  command -v mpirun && mpirun --version | head -1; true'
NUM_GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')

# CUDA 13 libraries of this machine: the toolkit's, or the ones pip installed beside PyTorch.
cuda_dirs=""
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  found=$(find /usr/local/cuda* /usr/lib/x86_64-linux-gnu /opt /usr/local/lib -name "$lib" 2>/dev/null | head -1)
  [ -n "$found" ] && cuda_dirs="$cuda_dirs:$(dirname "$found")"
done
if [ -d "$PACK/bin" ]; then
  BIN=$PACK/bin
  # Carried libraries only where this machine lacks them (its own MPI, if any, stays in charge).
  mkdir -p "$WORK/lib"
  for lib in "$PACK"/lib/*; do
    name=$(basename "$lib")
    if [ "$name" = libstdc++.so.6 ]; then
      system=$(ldconfig -p | awk '/libstdc\+\+\.so\.6 .*x86-64/ {print $NF; exit}')
      strings "$system" 2>/dev/null | grep -q GLIBCXX_3.4.30 && continue
    elif ldconfig -p | grep -q "^[[:space:]]*$name "; then
      continue
    fi
    ln -sf "$lib" "$WORK/lib/$name"
  done
  export LD_LIBRARY_PATH="${cuda_dirs#:}:$WORK/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  step libraries 30 bash -c "cat '$PACK/SOURCE'; echo LD_LIBRARY_PATH=\$LD_LIBRARY_PATH; ls '$WORK/lib';
    for b in '$BIN'/*; do ldd \"\$b\" | grep -q 'not found' && { echo \"\$b:\"; ldd \"\$b\" | grep 'not found'; exit 1; }; done; echo all resolved"
else
  BIN=$WORK/bin
  export LD_LIBRARY_PATH="${cuda_dirs#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  step build 420 bash -c "cmake -S '$ROOT' -B '$ROOT/build-gpu-device' -DCMAKE_BUILD_TYPE=Release -G Ninja &&
    cmake --build '$ROOT/build-gpu-device' -j16 --target tests_gpu cuda_executor_mpi_test nccl_communicator_mpi_test \
      tpserve-run tpserve-run-cuda tpserve-mkmodel tpserve-bench-gpu-engine tpserve-bench-nccl"
  mkdir -p "$BIN"
  for b in tests/tests_gpu tests/cuda_executor_mpi_test tests/nccl_communicator_mpi_test worker/tpserve-run \
           worker/tpserve-run-cuda model/tpserve-mkmodel bench/gpu/tpserve-bench-gpu-engine bench/gpu/tpserve-bench-nccl; do
    ln -sf "$ROOT/build-gpu-device/$b" "$BIN/"
  done
fi

# The real SmolLM2 when it was staged (sha256 checked), else a synthetic model of its shape and types.
SMOL=$ROOT/models/$MODEL_NAME
if [ ! -f "$SMOL" ] && [ -f "$STAGE/part.00" ] && [ -f "$STAGE/part.01" ]; then
  mkdir -p "$ROOT/models"
  cat "$STAGE/part.00" "$STAGE/part.01" > "$SMOL"
  (cd "$ROOT/models" && sha256sum -c "$STAGE/SHA256SUMS") >> "$LOGS" 2>&1 || rm -f "$SMOL"
fi
if [ -f "$SMOL" ]; then
  SMOL_LABEL="SmolLM2-135M Q4_1"
else
  SMOL=$WORK/smollm2-shape-q4_1.gguf
  SMOL_LABEL="SmolLM2-135M shape, synthetic Q4_1 (the real file was not staged)"
  step mkmodel_smollm2 60 "$BIN/tpserve-mkmodel" --out "$SMOL" --preset smollm2-135m --type q4_1
fi

# Each test suite in its own process: one that crashes (a heap overrun, a device fault) loses only its own
# results (2026-12-04: a table overrun in one CudaKernelsTest case aborted the process and the rest never ran).
for suite in $("$BIN/tests_gpu" --gtest_list_tests | grep -E '^[A-Za-z]' | tr -d '.'); do
  step "tests_gpu_$suite" 120 "$BIN/tests_gpu" --gtest_filter="$suite.*" --gtest_output=json:"$WORK/json/tests_$suite.json"
done

if command -v mpirun >/dev/null; then
  MPIRUN=(mpirun --allow-run-as-root --oversubscribe -x LD_LIBRARY_PATH)
  step nccl_communicator_np1 60 "${MPIRUN[@]}" -np 1 "$BIN/nccl_communicator_mpi_test"
  if [ "$NUM_GPUS" -ge 2 ]; then
    step nccl_communicator_np2 90 "${MPIRUN[@]}" -np 2 "$BIN/nccl_communicator_mpi_test"
    step cuda_executor_tp2 120 "${MPIRUN[@]}" -np 2 "$BIN/cuda_executor_mpi_test"
  else
    echo "== NCCL TP 2 tests: skipped, $NUM_GPUS GPU (TP > 1 needs one GPU per rank)" | tee -a "$LOGS"
  fi
else
  echo "== NCCL MPI tests: skipped, no mpirun on this machine" | tee -a "$LOGS"
fi

# tpserve-run on the GPU prints the same greedy ids as on the CPU (16 tokens; --device cuda re-executes its twin
# tpserve-run-cuda, which must sit beside it; on SmolLM2 this prompt's tokens win by logit margins >= 0.3, see
# tests/gpu/cuda_executor_test.cc).
PROMPT="def fibonacci(n):"
step run_cpu 120 "$BIN/tpserve-run" --model "$SMOL" --prompt "$PROMPT" --max-tokens 16 --print-ids --ignore-eos --device cpu
step run_cuda 60 "$BIN/tpserve-run" --model "$SMOL" --prompt "$PROMPT" --max-tokens 16 --print-ids --ignore-eos --device cuda
cpu_ids=$(grep -E '^[0-9 ]+$' "$WORK/run_cpu.log" | tail -1)
cuda_ids=$(grep -E '^[0-9 ]+$' "$WORK/run_cuda.log" | tail -1)
if [ -n "$cpu_ids" ] && [ "$cpu_ids" = "$cuda_ids" ]; then same=1; else same=0; fi
printf 'run_ids_equal\t%s\t0\n' "$([ $same = 1 ] && echo 0 || echo 1)" >> "$STEPS"
echo "== tpserve-run ids: cpu [$cpu_ids] cuda [$cuda_ids] equal=$same" | tee -a "$LOGS"

# The sweep: decode at batch 1/8/32/64 (128 cached tokens each, 32 steps) and prefill pp512.
step bench_smollm2 120 "$BIN/tpserve-bench-gpu-engine" --model "$SMOL" --label "$SMOL_LABEL" \
  --json "$WORK/json/engine_smollm2.json"
step mkmodel_1b_q8_0 90 "$BIN/tpserve-mkmodel" --out "$WORK/llama1b-q8_0.gguf" --preset llama-1b --type q8_0
step bench_1b_q8_0 120 "$BIN/tpserve-bench-gpu-engine" --model "$WORK/llama1b-q8_0.gguf" \
  --label "Llama-3.2-1B shape, synthetic Q8_0" --json "$WORK/json/engine_1b_q8_0.json"
rm -f "$WORK/llama1b-q8_0.gguf"
if [ $(( $(date +%s) - START )) -lt 360 ]; then
  step mkmodel_1b_f16 90 "$BIN/tpserve-mkmodel" --out "$WORK/llama1b-f16.gguf" --preset llama-1b --type f16
  step bench_1b_f16 120 "$BIN/tpserve-bench-gpu-engine" --model "$WORK/llama1b-f16.gguf" \
    --label "Llama-3.2-1B shape, synthetic F16" --json "$WORK/json/engine_1b_f16.json"
  rm -f "$WORK/llama1b-f16.gguf"
else
  echo "== 1B F16: skipped, $(( $(date +%s) - START )) s spent" | tee -a "$LOGS"
fi
step nccl_allreduce 90 "$BIN/tpserve-bench-nccl" --json "$WORK/json/nccl_allreduce.json"

python3 "$ROOT/bench/gpu/summarize.py" --steps "$STEPS" --json-dir "$WORK/json" --tests-dir "$WORK/json" \
  --num-gpus "$NUM_GPUS" --out-md "$OUT/summary.md" --out-json "$OUT/results.json" >> "$LOGS" 2>&1 ||
  echo "summarize.py failed (see logs.txt)" | tee -a "$LOGS"
echo "== total $(( $(date +%s) - START )) s" | tee -a "$LOGS"
cat "$OUT/summary.md" 2>/dev/null

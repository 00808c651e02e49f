#!/usr/bin/env bash
# Runs every libFuzzer target of a fuzz build for SECONDS each, from the seed corpora in
# tests/fuzz/corpus (new inputs go to a scratch directory, not the repository), after replaying the
# crash regressions in tests/fuzz/regressions/<target>/. Prints executions per target; exits
# non-zero when a target crashes (its input is left in FUZZ_BUILD/fuzz-artifacts/).
# Usage: tests/fuzz/run.sh FUZZ_BUILD_DIR SECONDS [TARGET...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd) seconds=$2
shift 2
targets=("$@")
if ((${#targets[@]} == 0)); then
  targets=(client_message worker_message gguf safetensors json tokenizer_json chat_template tokenizer http_request)
fi
artifacts=$build/fuzz-artifacts
mkdir -p "$artifacts"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export TPSERVE_SOURCE_DIR=${here%/tests/fuzz}
status=0
printf '%-16s %12s %10s %8s\n' target executions exec/s result
for t in "${targets[@]}"; do
  bin=$build/tests/fuzz/${t}_fuzz
  log=$scratch/$t.log
  result=ok
  if [ -d "$here/regressions/$t" ] && ! "$bin" "$here/regressions/$t"/* >"$log" 2>&1; then
    result="REGRESSION"
  else
    mkdir -p "$scratch/$t"
    if ! "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$artifacts/$t-" "$scratch/$t" "$here/corpus/$t" >"$log" 2>&1; then
      result=CRASH
    fi
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  printf '%-16s %12s %10s %8s\n' "$t" "${execs:-?}" "${rate:-?}" "$result"
  if [ "$result" != ok ]; then
    status=1
    grep -E "ERROR|SUMMARY|==[0-9]+==|#[0-9]+ 0x" "$log" | head -30 || true
  fi
done
exit $status

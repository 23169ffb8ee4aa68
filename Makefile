# Thin wrapper over CMake. The two commands a newcomer needs:
#   make demo   install deps, build, prepare the fortunes corpus, train the demo model
#   make test   install deps, build, run every test suite (ctest), the CUDA emulation's too
BUILD  ?= build
JOBS   ?= $(shell nproc)
CMAKE_FLAGS ?=
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Everything comes from Debian packages; `fortunes` is the demo's English corpus;
# protobuf-c encodes TensorBoard's event files (logging.tensorboard);
# clang-format checks the sources' format (ctest's "format"); clang and its
# runtime build the libFuzzer targets (make fuzz); bc times the failure tests;
# unicode-data (read through bzip2) is Unicode's own NFC conformance test.
# With a CUDA toolkit, the header-only cudnn-frontend comes from PyPI (pip).
DEB_PACKAGES := build-essential cmake pkg-config python3-pip \
  libopenmpi-dev openmpi-bin libdnnl-dev \
  libsentencepiece-dev libspdlog-dev libfmt-dev libtomlplusplus-dev nlohmann-json3-dev zlib1g-dev \
  libprotobuf-c-dev protobuf-c-compiler libgtest-dev fortunes python3-matplotlib clang-format \
  clang libclang-rt-dev bc unicode-data bzip2 python3-jinja2

FORTUNES_DATA := data/fortunes/train_000.bin

.PHONY: all deps configure build build-train demo test bench scaling plot clean gpu-kit gpu-kit-rehearse fuzz fuzz-build

all: build

# Safe to run twice: installs only when a package is missing.
deps:
	@dpkg -s $(DEB_PACKAGES) >/dev/null 2>&1 || { \
	  echo "installing Debian packages: $(DEB_PACKAGES)"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(DEB_PACKAGES); }
	@if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then bash tools/fetch_cudnn_frontend.sh; fi

configure:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DLLM_CUDA=ON $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# Only ./train and its library, without the CUDA backend: what the demo runs
# on the CPU, without nvcc's share of the build or the test suites. `make`
# and `make test` configure the same build folder with CUDA again and reuse
# everything else it compiled.
build-train:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DLLM_CUDA=OFF $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS) --target train

$(FORTUNES_DATA): | build-train
	./train prepare --input /usr/share/games/fortunes --out data/fortunes --vocab-size 4096

demo: deps build-train $(FORTUNES_DATA)
	./train --config configs/demo.toml

# The build with the CUDA backend under emulation too (docs/emulation.md),
# every ctest suite (label "emulation" among them), then each fuzz target for
# FUZZ_SMOKE_SECONDS; the fuzz build runs beside ctest at idle CPU priority
# (tools/make_test.sh).
test: deps
	MAKE="$(MAKE)" BUILD=$(BUILD) FUZZ_BUILD=$(FUZZ_BUILD) JOBS=$(JOBS) \
	  FUZZ_SECONDS=$(FUZZ_SMOKE_SECONDS) CMAKE_FLAGS="$(CMAKE_FLAGS)" bash tools/make_test.sh

# libFuzzer targets of every reader (test/fuzz, docs/testing.md#fuzzing), in a
# build of their own with clang, ASan and UBSan; `make test` runs each for
# FUZZ_SMOKE_SECONDS as a smoke test, a campaign sets FUZZ_SECONDS.
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_SMOKE_SECONDS ?= 20
fuzz-build: deps
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Fuzz -DCMAKE_C_COMPILER=clang \
	  -DCMAKE_CXX_COMPILER=clang++ -DLLM_FUZZ=ON -DLLM_CUDA=OFF -DLLM_TESTS=OFF
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_targets

fuzz: fuzz-build
	bash tools/run_fuzzers.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

bench: deps build
	./train bench --config configs/3m.toml
	./train bench --config configs/demo.toml
	./train bench --config configs/25m.toml

# Scaling curves (docs/scaling.*): the FSDP paper's two figures on its A100
# cluster (predicted: T5 611M / 2.28B / 11.3B x four strategies; 11.3B at
# batch 8 and 16 per GPU), this machine calibrated (cost_models/hardware/
# cpu_dev_vm.toml) and its measured step times against that profile, and the
# validation table (docs/scaling_validation.csv). Timings want a quiet machine.
scaling: deps build
	./train scale --calibrate
	./train scale --hardware cost_models/hardware/a100_80gb_roce.toml --out results/scaling --no-plot
	./train scale --hardware cost_models/hardware/cpu_dev_vm.toml --configs configs/scale_cpu.toml --gpus 1,2,4 --measure --repeats 3 --out results/scaling_cpu --no-plot
	./train scale --validate --repeats 3 --out results/validation
	mkdir -p docs
	cp results/scaling/scaling.csv docs/scaling.csv
	cp results/scaling_cpu/scaling.csv docs/scaling_cpu.csv
	cp results/validation/validation.csv docs/scaling_validation.csv
	/usr/bin/python3 tools/plot_scaling.py --out docs/scaling.png docs/scaling.csv --step-time docs/scaling_cpu.csv

# Loss curves from runs' metrics.jsonl (tools/plot_metrics.py); by default the
# demo's, into docs/demo_loss.png: make plot RUNS="checkpoints/a checkpoints/b" PLOT=ab.png
RUNS ?= checkpoints/demo
PLOT ?= docs/demo_loss.png
plot:
	/usr/bin/python3 tools/plot_metrics.py $(RUNS) --out $(PLOT)

# A bare GPU machine (docs/gpu.md, the GPU kit): pack the Debian dependencies
# into gpu_kit/ (carried to it), and rehearse its run here against only the kit.
gpu-kit:
	bash tools/gpu_kit/pack.sh

gpu-kit-rehearse:
	bash tools/gpu_kit/rehearse.sh

clean:
	rm -rf $(BUILD) train third_party data/fortunes data/tiny/*.bin data/tiny/tokenizer.*

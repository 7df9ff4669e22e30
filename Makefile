# kiln's entry points. `make run` and `make test` are all a new user needs:
# each installs what is missing (scripts/setup.sh), builds, then runs.

MODEL ?= ../shared/models/tiny-qwen2
PORT ?= 8000
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all setup build run test check sanitize fuzz bench format clean

all: build

setup:
	@scripts/setup.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: setup $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# The main job: serve the default model over the OpenAI API on
# 127.0.0.1:$(PORT), printing a curl command that queries it (Ctrl-C stops).
run: build
	scripts/serve-demo.sh $(BUILD) $(MODEL) $(PORT)

# Every test: unit and end-to-end (CTest), then the sanitizer and fuzz
# builds, which start compiling beside the tests (scripts/test_all.sh).
test: build
	BUILD=$(BUILD) JOBS=$(JOBS) scripts/test_all.sh

# The Release build's tests only (quick during development).
check: build
	cd $(BUILD) && ctest -j $(JOBS) --output-on-failure

# Sanitizer builds of the targets that need them.
sanitize: setup
	scripts/sanitize.sh

# libFuzzer targets, each for a bounded time (FUZZ_SECONDS, default 20).
fuzz: setup
	scripts/fuzz.sh

bench: build
	scripts/bench.sh

format:
	find src include tests bench examples -name '*.h' -o -name '*.cc' -o -name '*.c' | xargs clang-format -i

clean:
	rm -rf $(BUILD) build-asan build-tsan

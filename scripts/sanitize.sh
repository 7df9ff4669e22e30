#!/usr/bin/env bash
# Sanitizer builds of the targets that need them, one independent function
# per run (how they are compiled: scripts/sanitizer_build.sh).
# `scripts/sanitize.sh` runs every run; `scripts/sanitize.sh server` runs the
# named ones. Each run configures its own build folder, builds only
# the targets it tests, and fails on any sanitizer report (leaks included).
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/sanitizer_build.sh

# The HTTP server under AddressSanitizer (with LeakSanitizer) and
# UndefinedBehaviorSanitizer: its GoogleTest cases in process, then the raw
# HTTP, load and disconnect tests against an instrumented `kiln serve`. Every
# server those tests start is stopped with SIGTERM and must exit 0, which a
# leak or an error report at exit prevents.
run_server() {
  local build=${SERVER_ASAN_BUILD:-build-asan}
  echo "sanitize: server (address, undefined) in $build"
  sanitizer_build "$build" address,undefined test_server kiln_cli
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:strict_string_checks=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  export OMP_WAIT_POLICY=PASSIVE
  "$build/tests/test_server"
  KILN_BIN="$build/bin/kiln" /usr/bin/python3 -m pytest -q -p no:cacheprovider \
    tests/server/test_raw_http.py tests/server/test_load.py tests/server/test_disconnect.py
}

# The parsers of untrusted files (safetensors, GGUF, tokenizer.json,
# tokenizer.model, chat templates, prompt files, ONNX files; UTF-8, JSON,
# .npy and byte sizes in core), the tensor ops' kernels with their corpus of broken files, the engine's scheduling and
# paging, and the C API boundary, under ASan and UBSan in the same build as
# the server (the library objects are shared).
run_library() {
  local build=${SERVER_ASAN_BUILD:-build-asan}
  echo "sanitize: parsers, engine and C API (address, undefined) in $build"
  sanitizer_build "$build" address,undefined test_core test_format test_tokenizer test_engine test_capi test_cli \
    test_onnx test_tensor_ops kiln_cli
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:strict_string_checks=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  "$build/tests/test_core"
  "$build/tests/test_format"
  "$build/tests/test_tokenizer"
  # The batch-composition and speculation sweeps are the Release build's
  # job: they repeat the same kernels hundreds of times (the draft-model
  # sweeps alone took a quarter of an hour here, the engine's 20,000 sampled
  # draws minutes more). One case of each path still runs: the proposer,
  # the verifier's distributions, and speculation from the CLI.
  "$build/tests/test_engine" \
    --gtest_filter='-BatchEqualsAloneTest.*:SpeculativeDecodingTest.Tiny*:SpeculativeDecodingTest.Gguf*:SpeculativeDecodingTest.Every*:DraftModelTest.SelfQ4_0Tiny*:DraftModelTest.SelfAtItsOwnDtype*:DraftModelTest.TinyQwen2DraftsForTinyQwen3:RejectionSamplingTest.EngineSampled*'
  "$build/tests/test_capi"
  "$build/tests/test_cli"
  # ONNX files, the importer and the tensor kernels (the node suite runs
  # every claimed op on the test data's inputs).
  OMP_WAIT_POLICY=PASSIVE "$build/tests/test_onnx"
  OMP_WAIT_POLICY=PASSIVE "$build/tests/test_tensor_ops"
}

# The stand-in accelerators under ThreadSanitizer: their worker threads,
# the events between streams and the host's waits, through the plugin
# boundary (test_devices loads libkiln_backend_testaccel{,-mm}.so). Builds only
# test_devices and the plugins it loads, in a folder of its own. The tests
# named Unsynchronized* drop a synchronization on purpose (to show that the
# poisoning makes it fail), so they race by design and are left out.
run_devices() {
  local build=${DEVICES_TSAN_BUILD:-build-tsan}
  echo "sanitize: devices (thread) in $build"
  sanitizer_build "$build" thread test_devices kiln_testaccel_plugins
  export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
  export OMP_WAIT_POLICY=PASSIVE
  KILN_BACKEND_PATH="$build/plugins" "$build/tests/test_devices" --gtest_filter='-*Unsynchronized*'
}

all_runs=(server library devices)
runs=("$@")
if [ ${#runs[@]} -eq 0 ]; then runs=("${all_runs[@]}"); fi
for run in "${runs[@]}"; do
  if ! declare -F "run_$run" >/dev/null; then
    echo "sanitize: unknown run '$run' (known: ${all_runs[*]})" >&2
    exit 2
  fi
  "run_$run"
done
echo "sanitize: ${runs[*]} passed"

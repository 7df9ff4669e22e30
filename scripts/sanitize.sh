#!/usr/bin/env bash
# Sanitizer builds of the targets that need them (how they are compiled:
# scripts/sanitizer_build.sh), in runs: `scripts/sanitize.sh` does every
# run, `scripts/sanitize.sh server` the named ones. The address runs share
# one build folder: their targets are built in one go, then their tests run
# side by side, a core each. Every run fails on any sanitizer report (leaks
# included).
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/sanitizer_build.sh

# run_parallel LOGDIR NAME=COMMAND...: runs each COMMAND (a shell command
# line) with its output in LOGDIR/NAME.log, ${JOBS:-$(nproc)} at a time
# (a sanitized test binary keeps about one core busy), and says how each
# ended and how long it took; a failed one's log ends are printed, and the
# call fails once all have ended.
run_parallel() {
  local logdir=$1 jobs=${JOBS:-$(nproc)} running=0 failed=() spec id
  local -A name_of=() start_of=()
  shift
  mkdir -p "$logdir"
  wait_one() {
    local status=0 name
    wait -n -p id || status=$?
    running=$((running - 1))
    name=${name_of[$id]}
    if [ "$status" -ne 0 ]; then
      tail -n 60 "$logdir/$name.log"
      echo "sanitize: $name FAILED (exit $status, $((SECONDS - start_of[$id])) s; log: $logdir/$name.log)"
      failed+=("$name")
    else
      echo "sanitize: $name passed in $((SECONDS - start_of[$id])) s"
    fi
  }
  for spec in "$@"; do
    if [ "$running" -ge "$jobs" ]; then wait_one; fi
    bash -c "${spec#*=}" >"$logdir/${spec%%=*}.log" 2>&1 &
    name_of[$!]=${spec%%=*}
    start_of[$!]=$SECONDS
    running=$((running + 1))
  done
  while [ "$running" -gt 0 ]; do wait_one; done
  [ ${#failed[@]} -eq 0 ]
}

# The HTTP server under AddressSanitizer (with LeakSanitizer) and
# UndefinedBehaviorSanitizer: its GoogleTest cases in process, then the raw
# HTTP, load and disconnect tests against an instrumented `kiln serve`; and
# `kiln router` the same way (in process over stand-in backends, then over
# two instrumented replicas). Every
# server those tests start is stopped with SIGTERM and must exit 0, which a
# leak or an error report at exit prevents. (Each server listens on a free
# port of its own, so these run beside the others.)
server_targets=(test_server test_router kiln_cli)
server_tests() {
  local build=$1
  echo "test_server=$build/tests/test_server"
  echo "test_router=$build/tests/test_router"
  echo "server_http=KILN_BIN=$build/bin/kiln /usr/bin/python3 -m pytest -q -p no:cacheprovider \
tests/server/test_raw_http.py tests/server/test_load.py tests/server/test_disconnect.py tests/server/test_router.py"
}

# The parsers of untrusted files (safetensors, GGUF, tokenizer.json,
# tokenizer.model, chat templates, prompt files, ONNX files; UTF-8, JSON,
# .npy and byte sizes in core), the tensor ops' kernels with their corpus of
# broken files, the engine's scheduling and paging, and the C API boundary,
# in the same build as the server (the library objects are shared). The
# batch-composition and speculation sweeps are the Release build's job: they
# repeat the same kernels hundreds of times (the draft-model sweeps alone
# took a quarter of an hour here, the engine's 20,000 sampled draws minutes
# more). One case of each path still runs: the proposer, the verifier's
# distributions, and speculation from the CLI. The ONNX node suite runs
# every claimed op on the test data's inputs, the convolutions' test every
# path (the sweep over each ISA's plans stays in the Release build).
library_targets=(test_core test_format test_tokenizer test_engine test_capi test_cli test_onnx test_tensor_ops kiln_cli)
library_tests() {
  local build=$1
  local filter='-BatchEqualsAloneTest.*:SpeculativeDecodingTest.Tiny*:SpeculativeDecodingTest.Gguf*'
  filter+=':SpeculativeDecodingTest.Every*:DraftModelTest.SelfQ4_0Tiny*:DraftModelTest.SelfAtItsOwnDtype*'
  filter+=':DraftModelTest.TinyQwen2DraftsForTinyQwen3:RejectionSamplingTest.EngineSampled*'
  # Statistical and every-ISA sweeps, minutes each here: the same code as
  # the cases kept, many times over.
  filter+=':Sampler.AVocabularySizedDistributionIsDrawnFromWhole:RejectionSamplingTest.WrongVerifiersFailTheSameTest'
  # The BPE merges' sweep against a naive quadratic loop (the test's own
  # code, at -O0 here) is an algorithm check: the Release build's.
  echo "test_tokenizer=$build/tests/test_tokenizer --gtest_filter='-BpeTest.PriorityQueueMergingEqualsTheNaiveLoop'"
  echo "test_engine=$build/tests/test_engine --gtest_filter='$filter'"
  echo "test_tensor_ops=$build/tests/test_tensor_ops --gtest_filter='-Conv.EachIsaPlanMatchesTheReference'"
  local name
  for name in test_onnx test_capi test_cli test_format test_core; do
    echo "$name=$build/tests/$name"
  done
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
  KILN_BACKEND_PATH="$build/plugins" "$build/tests/test_devices" --gtest_filter='-*Unsynchronized*'
}

# --build-only: builds what the runs test (and the fuzz targets, which
# share the address build) without running anything; `make test` does so
# beside the Release tests.
build_only=0
if [ "${1:-}" = --build-only ]; then
  build_only=1
  shift
fi
all_runs=(server library devices)
runs=("$@")
if [ ${#runs[@]} -eq 0 ]; then runs=("${all_runs[@]}"); fi
for run in "${runs[@]}"; do
  if [[ " ${all_runs[*]} " != *" $run "* ]]; then
    echo "sanitize: unknown run '$run' (known: ${all_runs[*]})" >&2
    exit 2
  fi
done
requested() { [[ " ${runs[*]} " == *" $1 "* ]]; }

export OMP_WAIT_POLICY=PASSIVE
asan_build=${SERVER_ASAN_BUILD:-build-asan}
address_targets=()
address_tests=()
# The library's tests first: the engine's and the tokenizer's are the
# longest, and the cores should finish together.
if requested library; then
  address_targets+=("${library_targets[@]}")
  mapfile -t -O "${#address_tests[@]}" address_tests < <(library_tests "$asan_build")
fi
if requested server; then
  address_targets+=("${server_targets[@]}")
  mapfile -t -O "${#address_tests[@]}" address_tests < <(server_tests "$asan_build")
fi
if [ "$build_only" = 1 ]; then
  [ ${#address_targets[@]} -gt 0 ] && sanitizer_build "$asan_build" address,undefined "${address_targets[@]}" fuzz_targets
  if requested devices; then
    sanitizer_build "${DEVICES_TSAN_BUILD:-build-tsan}" thread test_devices kiln_testaccel_plugins
  fi
  exit 0
fi
if [ ${#address_targets[@]} -gt 0 ]; then
  echo "sanitize: address, undefined in $asan_build"
  sanitizer_build "$asan_build" address,undefined "${address_targets[@]}"
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:strict_string_checks=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  run_parallel "$asan_build/sanitize-logs" "${address_tests[@]}"
fi
if requested devices; then run_devices; fi
echo "sanitize: ${runs[*]} passed"

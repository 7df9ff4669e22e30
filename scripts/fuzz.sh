#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (address and undefined-behaviour
# sanitizers, in the build folder of scripts/sanitize.sh's address runs,
# whose library objects they share) and runs each for FUZZ_SECONDS (default
# 20); fails on any finding. Every tests/fuzz/<name>.cc target is run, starting from its seeds
# in tests/fuzz/seeds/<name>/ plus, where ../shared has them, the beginnings of
# real model files.
set -euo pipefail
cd "$(dirname "$0")/.."

build=${FUZZ_BUILD:-${SERVER_ASAN_BUILD:-build-asan}}
seconds=${FUZZ_SECONDS:-20}
jobs=${JOBS:-$(nproc)}
shared=${KILN_SHARED_DIR:-../shared}

. scripts/sanitizer_build.sh
sanitizer_build "$build" address,undefined fuzz_targets

# Extra seeds from ../shared for a target: the first 64 KiB of real files.
real_seeds() {
  local name=$1 dir=$2 pattern
  case $name in
    gguf_fuzz) pattern="$shared/models/gguf/*.gguf" ;;
    safetensors_fuzz) pattern="$shared/models/*/model.safetensors" ;;
    *) return 0 ;;
  esac
  for f in $pattern; do
    [ -f "$f" ] || continue
    head -c 65536 "$f" >"$dir/real-$(basename "$(dirname "$f")")-$(basename "$f")"
  done
}

# Runs one target; its log stays in its artifacts folder.
run_target() {
  local bin=$1 name corpus artifacts seeds=()
  name=$(basename "$bin")
  corpus=tests/fuzz/corpus-out/$name  # what the fuzzer finds (ignored by git)
  artifacts=$build/fuzz-artifacts/$name
  mkdir -p "$corpus" "$artifacts"
  real_seeds "$name" "$corpus"
  [ -d "tests/fuzz/seeds/$name" ] && seeds=("tests/fuzz/seeds/$name")
  echo "fuzz: $name for ${seconds}s"
  "$bin" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" "${seeds[@]}" >"$artifacts/log.txt" 2>&1
}

# One target per core at a time: each fuzzer is single-threaded.
targets=("$build"/fuzz/*_fuzz)
pids=()
names=()
failed=()
wait_oldest() {
  if ! wait "${pids[0]}"; then
    tail -n 40 "$build/fuzz-artifacts/${names[0]}/log.txt"
    failed+=("${names[0]}")
  else
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$build/fuzz-artifacts/${names[0]}/log.txt" |
      sed "s/^/fuzz: ${names[0]}: /"
  fi
  pids=("${pids[@]:1}")
  names=("${names[@]:1}")
}
for bin in "${targets[@]}"; do
  [ -x "$bin" ] || continue
  if [ ${#pids[@]} -ge "$jobs" ]; then wait_oldest; fi
  run_target "$bin" &
  pids+=($!)
  names+=("$(basename "$bin")")
done
while [ ${#pids[@]} -gt 0 ]; do wait_oldest; done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: findings in ${failed[*]} (inputs in $build/fuzz-artifacts/)" >&2
  exit 1
fi
echo "fuzz: no findings"

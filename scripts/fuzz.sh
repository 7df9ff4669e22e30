#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (address and undefined-behaviour
# sanitizers) and runs each for FUZZ_SECONDS (default 60); fails on any
# finding. Every tests/fuzz/<name>.cc target is run, starting from its seeds
# in tests/fuzz/seeds/<name>/ plus, where ../shared has them, the beginnings of
# real model files.
set -euo pipefail
cd "$(dirname "$0")/.."

build=${FUZZ_BUILD:-build-fuzz}
seconds=${FUZZ_SECONDS:-60}
jobs=${JOBS:-$(nproc)}
shared=${KILN_SHARED_DIR:-../shared}

CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DKILN_FUZZ=ON -DKILN_SANITIZE=address,undefined >/dev/null
cmake --build "$build" -j "$jobs" --target fuzz_targets

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

failed=()
for bin in "$build"/fuzz/*_fuzz; do
  [ -x "$bin" ] || continue
  name=$(basename "$bin")
  corpus=tests/fuzz/corpus-out/$name  # what the fuzzer finds (ignored by git)
  artifacts=$build/fuzz-artifacts/$name
  mkdir -p "$corpus" "$artifacts"
  real_seeds "$name" "$corpus"
  seeds=()
  [ -d "tests/fuzz/seeds/$name" ] && seeds=("tests/fuzz/seeds/$name")
  echo "fuzz: $name for ${seconds}s"
  if ! "$bin" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" "${seeds[@]}" 2>"$artifacts/log.txt"; then
    tail -n 40 "$artifacts/log.txt"
    failed+=("$name")
  else
    grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$artifacts/log.txt" | sed "s/^/fuzz: $name: /"
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: findings in ${failed[*]} (inputs in $build/fuzz-artifacts/)" >&2
  exit 1
fi
echo "fuzz: no findings"

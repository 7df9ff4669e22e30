#!/bin/sh
# Offline throughput benchmark: 64 requests with random inputs of 64-256 and
# outputs of 32-128 tokens on generated Qwen2.5-0.5B-shaped weights, served
# together at max-num-seqs 1, 4, 16 and 64. Extra arguments go to
# kiln_bench_throughput (e.g. --nano-vllm for 256 x 100-1024, --num-requests 16
# for a quick run, --preset llama-3.2-1b). BUILD_DIR selects the build tree.
set -e
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
bin=$build/bench/kiln_bench_throughput
if [ ! -x "$bin" ]; then
  cmake --build "$build" --target kiln_bench_throughput
fi
exec "$bin" "$@"

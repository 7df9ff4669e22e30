#!/usr/bin/env bash
# Runs the microbenchmarks.
set -euo pipefail
BUILD=${BUILD:-build}
for b in "$BUILD"/bench/*_bench; do
  [ -x "$b" ] || continue
  echo "== $(basename "$b")"
  "$b" --benchmark_min_time=0.2
done

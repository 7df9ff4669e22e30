#!/usr/bin/env bash
# Every test, as `make test` (and CI) runs them: the Release build's tests
# (CTest), then the sanitizer runs and the fuzzers. The tests leave a core
# idle about a quarter of the time (single-threaded tests, servers waiting
# on sockets), so the sanitizer builds compile beside them at the lowest
# priority and then have little left to do. A failure in that early build
# shows again, with its errors, when the sanitizer run builds.
set -euo pipefail
cd "$(dirname "$0")/.."

build=${BUILD:-build}
jobs=${JOBS:-$(nproc)}
mkdir -p "$build"
prebuild_log="$build/sanitizer-prebuild.log"
nice -n 19 scripts/sanitize.sh --build-only >"$prebuild_log" 2>&1 &
prebuild=$!
status=0
(cd "$build" && ctest -j "$jobs" --output-on-failure) || status=$?
if ! wait "$prebuild"; then
  echo "test: the sanitizer builds failed beside the tests (log: $prebuild_log); building them again"
fi
if [ "$status" -ne 0 ]; then exit "$status"; fi
scripts/sanitize.sh
scripts/fuzz.sh

# Sourced by scripts/sanitize.sh and scripts/fuzz.sh: configures and builds
# a sanitizer build folder. The address/undefined build uses clang with
# libFuzzer's coverage instrumentation, so that the fuzz targets and the
# sanitized tests share one build of the library.
#
# Everything is compiled at -O0 -g1 with assertions on, except the vector
# kernels (KILN_VECTOR_FILE_FLAGS=-O1): -O0 compiles in a third of -O1's
# time, line tables are all a report needs, and intrinsics at -O0 would run
# many times slower.

# sanitizer_build BUILD SANITIZERS TARGETS...: configures BUILD (clang and
# the fuzzing instrumentation for address,undefined; the default compiler
# otherwise) and builds TARGETS.
sanitizer_build() {
  local build=$1 sanitizers=$2 compilers=() fuzz=OFF
  shift 2
  if [ "$sanitizers" = address,undefined ]; then
    compilers=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++)
    fuzz=ON
  fi
  cmake -S . -B "$build" -G Ninja "${compilers[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DKILN_SANITIZE="$sanitizers" -DKILN_FUZZ="$fuzz" -DKILN_BUILD_BENCH=OFF \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O0 -g1" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O0 -g1" \
    -DKILN_VECTOR_FILE_FLAGS=-O1 -DKILN_TEST_FLAGS=-O0 >/dev/null
  cmake --build "$build" -j "${JOBS:-$(nproc)}" --target "$@"
}

# Sourced by scripts/sanitize.sh and scripts/fuzz.sh: configures and builds
# a sanitizer build folder.
#
# Both builds use clang at -O0 -g1 with assertions on, except the vector
# kernels (KILN_VECTOR_FILE_FLAGS=-O1): -O0 compiles in a third of -O1's
# time with these sanitizers, line tables are all a report needs, and
# intrinsics at -O0 would run many times slower. The address/undefined
# build adds libFuzzer's coverage instrumentation, so that the fuzz targets
# and the sanitized tests share one build of the library; its vector
# kernels go without UndefinedBehaviorSanitizer (AddressSanitizer still
# checks every access): its checks on their unrolled intrinsic loops made
# the two nchw16c convolution files take 100-150 s each to compile instead
# of 10. The tokenizer area compiles at -O1 there too: its tests load
# real vocabularies of up to 150,000 tokens again and again, and the test
# binary ran 270 s with it at -O0 (the template area's gain would not pay
# for its compile time). The thread build (the device tests only) took 550 s of CPU with
# GCC at -O1 for a two-second run.

# sanitizer_build BUILD SANITIZERS TARGETS...: configures BUILD for
# SANITIZERS and builds TARGETS.
sanitizer_build() {
  local build=$1 sanitizers=$2 opt="-O0 -g1"
  local flags=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DKILN_TEST_FLAGS=-O0)
  shift 2
  if [ "$sanitizers" = address,undefined ]; then
    flags+=(-DKILN_FUZZ=ON "-DKILN_VECTOR_FILE_FLAGS=-O1;-fno-sanitize=undefined" -DKILN_OPTIMIZED_AREAS=tokenizer)
  else
    flags+=(-DKILN_FUZZ=OFF -DKILN_VECTOR_FILE_FLAGS=-O1)
  fi
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_SANITIZE="$sanitizers" \
    -DKILN_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$opt" -DCMAKE_C_FLAGS_RELWITHDEBINFO="$opt" \
    "${flags[@]}" >/dev/null
  cmake --build "$build" -j "${JOBS:-$(nproc)}" --target "$@"
}

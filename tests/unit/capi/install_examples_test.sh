#!/usr/bin/env bash
# Installs the build into a fresh prefix, builds examples/ against it with
# the C compiler (through find_package(kiln) and through pkg-config), and
# checks that the examples generate what the installed `kiln generate` does
# (and that onnx_run runs an ONNX model) and report a missing model by its
# path.
# Usage: install_examples_test.sh CMAKE BUILD_DIR SOURCE_DIR MODEL_DIR
set -euo pipefail
cmake=$1 build=$2 source=$3 model=$4
work=$build/test_tmp/capi_install
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix

"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log"
for f in include/kiln/kiln.h bin/kiln; do
  [[ -e $prefix/$f ]] || { echo "not installed: $f"; exit 1; }
done
libdir=$(dirname "$(find "$prefix" -name 'libkiln.so' | head -n 1)")
[[ -e $libdir/libkiln.so ]] || { echo "libkiln.so not installed"; exit 1; }
[[ -e $libdir/cmake/kiln/kilnConfig.cmake ]] || { echo "kilnConfig.cmake not installed"; exit 1; }
[[ -e $libdir/pkgconfig/kiln.pc ]] || { echo "kiln.pc not installed"; exit 1; }

# find_package(kiln): configure and build the examples with the C compiler.
"$cmake" -S "$source/examples" -B "$work/examples" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  >"$work/configure.log"
"$cmake" --build "$work/examples" >"$work/build.log"

prompt="And God said, Let there be light: and there was"
expected=$("$prefix/bin/kiln" generate -m "$model" -p "$prompt" -n 24 --temperature 0 --threads 2 2>/dev/null)
[[ -n $expected ]] || { echo "kiln generate printed nothing"; exit 1; }

got=$("$work/examples/generate" "$model" "$prompt" 24 2>"$work/generate.err")
# The example prints the blocking completion, then the streamed one.
if [[ $got != "$expected"$'\n'"$expected" ]]; then
  printf 'generate example:\n%s\n--- expected (twice):\n%s\n' "$got" "$expected"
  exit 1
fi
got=$("$work/examples/session" "$model" "$prompt" 24 2>"$work/session.err")
if [[ $got != "$expected" ]]; then
  printf 'session example:\n%s\n--- expected:\n%s\n' "$got" "$expected"
  exit 1
fi

# An ONNX model on the example's own buffers: relu(relu(a)) of a's pattern
# -3 -2 -1 0 1 2 3 -3 sums to 6, relu(b) of -3 .. 2 to 3.
/usr/bin/python3 "$source/tests/unit/capi/make_capi_onnx_models.py" "$work/onnx" >/dev/null
got=$("$work/examples/onnx_run" "$work/onnx/two_relu.onnx" a:2,4 2>"$work/onnx_run.err")
expected_onnx=$'ya f32[2,4] sum 6\nyb f32[2,3] sum 3'
if [[ $got != "$expected_onnx" ]]; then
  printf 'onnx_run example:\n%s\n--- expected:\n%s\n' "$got" "$expected_onnx"
  cat "$work/onnx_run.err"
  exit 1
fi

# pkg-config, as a Makefile would use it.
export PKG_CONFIG_PATH=$libdir/pkgconfig
cc -std=c99 -Wall -Wextra -Werror "$source/examples/generate.c" -o "$work/generate_pc" \
  $(pkg-config --cflags --libs kiln) -Wl,-rpath,"$libdir"
got=$("$work/generate_pc" "$model" "$prompt" 24 2>/dev/null)
[[ $got == "$expected"$'\n'"$expected" ]] || { echo "pkg-config build differs: $got"; exit 1; }

# A missing model: exit status 1 and a message naming the path.
if "$work/examples/generate" "$work/no-such-model" "$prompt" 2>"$work/missing.err"; then
  echo "a missing model did not fail"
  exit 1
fi
grep -q "$work/no-such-model" "$work/missing.err" || { echo "message lacks the path:"; cat "$work/missing.err"; exit 1; }
echo "installed, built the examples against it, and they match kiln generate"

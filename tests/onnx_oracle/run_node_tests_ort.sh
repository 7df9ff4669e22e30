#!/usr/bin/env bash
# The ONNX node tests through onnxruntime (one node process for all of
# them), then kiln's node suite comparing its outputs with onnxruntime's too:
#   run_node_tests_ort.sh TEST_ONNX_BIN WORK_DIR
set -euo pipefail
test_bin="$1"
work="$2"
here="$(cd "$(dirname "$0")" && pwd)"
export OMP_WAIT_POLICY=PASSIVE
rm -rf "$work"
mkdir -p "$work"
/usr/bin/python3 "$here/node_test_jobs.py" /usr/share/libonnx-testdata/data/node "$work" >/dev/null
# Tests onnxruntime cannot run fail as jobs (one JSON line each, and a
# non-zero exit); kiln's outputs are compared only where onnxruntime wrote its own.
node "$here/ort_run.js" --jobs "$work/jobs.json" > "$work/ort_log.jsonl" 2> "$work/ort_stderr.txt" || true
grep -q '"ok":true' "$work/ort_log.jsonl" || { echo "onnxruntime ran none of the node tests" >&2; exit 1; }
KILN_NODE_TESTS_ORT_DIR="$work" "$test_bin" --gtest_filter='OnnxNodeSuite.*'

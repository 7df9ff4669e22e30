#!/usr/bin/env bash
# kiln against onnxruntime's CPU provider on the vision test models, side by
# side: each round runs `kiln bench latency -m MODEL.onnx --onnxruntime ...`
# once per model (kiln, then onnxruntime, same input, same threads), and the
# table gives the median over rounds of each runtime's p50.
#
#   bench/onnx/vs_onnxruntime.sh [--rounds N] [--runs N] [--threads N] [--models a,b] MODELS_DIR
#
# MODELS_DIR holds tests/onnx_oracle/make_vision_models.py's output (it is
# generated there when it has no manifest.json). The table is markdown, on
# stdout; each round's JSON stays in MODELS_DIR/bench/.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=3 runs=20 threads=2
models=resnet18,mobilenet_v3_small,shufflenet_v2_x0_5,squeezenet1_1,yolov8n_320,vit_tiny_opset14
while [ $# -gt 1 ]; do
  case $1 in
    --rounds) rounds=$2 ;;
    --runs) runs=$2 ;;
    --threads) threads=$2 ;;
    --models) models=$2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift 2
done
[ $# -eq 1 ] || { echo "usage: $0 [--rounds N] [--runs N] [--threads N] [--models a,b] MODELS_DIR" >&2; exit 2; }
dir=$1
kiln=${KILN_BIN:-build/bin/kiln}
python=/usr/bin/python3
# kiln runs with the OpenMP policy its command chooses (cli/openmp_policy.h);
# PyTorch, which generates the models, sleeps at once.
if [ ! -f "$dir/manifest.json" ]; then
  OMP_WAIT_POLICY=PASSIVE "$python" tests/onnx_oracle/make_vision_models.py --no-qdq --only "$models" "$dir" >&2
fi
mkdir -p "$dir/bench"
for round in $(seq 1 "$rounds"); do
  for name in ${models//,/ }; do
    args=$("$python" - "$dir" "$name" <<'PY'
import json, sys
d, name = sys.argv[1], sys.argv[2]
for m in json.load(open(f"{d}/manifest.json"))["models"]:
    if m["name"] == name:
        a = [f"{d}/{m['model']}"]
        for k, v in m["inputs"].items():
            a += ["--input", f"{k}={d}/{v}"]
        if m.get("dynamic"):
            for k, v in m["input_shapes"].items():
                a += ["--input-shape", f"{k}:{','.join(map(str, v))}"]
        print(" ".join(a))
        break
else:
    sys.exit(f"no model {name} in the manifest")
PY
)
    # shellcheck disable=SC2086
    "$kiln" bench latency -m $args --threads "$threads" --runs "$runs" --warmup 5 \
      --onnxruntime tests/onnx_oracle/ort_run.js --json "$dir/bench/$name.$round.json" >/dev/null
    echo "round $round: $name" >&2
  done
done
"$python" - "$dir" "$models" "$rounds" <<'PY'
import json, statistics, sys
d, models, rounds = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3])
print("| model | GFLOP | kiln p50 ms | ort p50 ms | kiln / ort | kiln GFLOP/s (of fp32 peak) |")
print("|---|---:|---:|---:|---:|---:|")
for name in models:
    rs = [json.load(open(f"{d}/bench/{name}.{r}.json")) for r in range(1, rounds + 1)]
    k = statistics.median(r["kiln"]["latency_s"]["median"] * 1e3 for r in rs)
    o = statistics.median(r["onnxruntime"]["p50_ms"] for r in rs)
    flop = rs[0]["flops_per_run"]
    peak = rs[0].get("roofline", {}).get("per_second")
    rate = flop / (k * 1e-3) / 1e9
    frac = f" ({100 * rate * 1e9 / peak:.0f} %)" if peak else ""
    print(f"| {name} | {flop / 1e9:.2f} | {k:.2f} | {o:.2f} | {k / o:.2f} | {rate:.1f}{frac} |")
print(f"\n{rounds} rounds; {rs[0]['machine']}")
PY

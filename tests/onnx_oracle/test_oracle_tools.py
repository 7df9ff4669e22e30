"""Tests of the reference tooling itself: the .npy reader/writer, ort_run.js
(single, batch, all intermediates, bench), compare_npy.py and the QDQ
quantizer, on small models written with onnx.helper. onnxruntime's results
are checked against numpy here, so that a broken reference cannot pass
kiln's comparisons silently.

    /usr/bin/python3 -m pytest -q tests/onnx_oracle/test_oracle_tools.py
"""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import qdq_quantize  # noqa: E402

ORT_RUN = os.path.join(HERE, "ort_run.js")
COMPARE = os.path.join(HERE, "compare_npy.py")


def node_js(*args, check=True):
    return subprocess.run(["node", *args], capture_output=True, text=True, check=check)


def save_model(path, nodes, inputs, outputs, initializers=(), opset=13):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return str(path)


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def test_npy_round_trip_is_byte_exact(tmp_path):
    arrays = {
        "f32": np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7,
        "f16": np.linspace(-2, 2, 10).astype(np.float16),
        "f64": np.array([1e-300, -2.5]),
        "i64": np.array([[-(2**40), 3]], np.int64),
        "i32": np.array([-5, 7], np.int32),
        "i8": np.array([-128, 127], np.int8),
        "u8": np.array([0, 255], np.uint8),
        "bool": np.array([[True, False, True]]),
        "scalar": np.float32(3.5),
        "empty": np.zeros((0, 3), np.float32),
    }
    for name, a in arrays.items():
        np.save(tmp_path / f"{name}.npy", a)
    script = ("const npy = require(%r);" % os.path.join(HERE, "npy.js") +
              "for (const n of %s) { const t = npy.readNpy(process.argv[1] + '/' + n + '.npy');" % json.dumps(list(arrays)) +
              " npy.writeNpy(process.argv[1] + '/rt_' + n + '.npy', t.type, t.dims, t.data); }")
    node_js("-e", script, str(tmp_path))
    for name, a in arrays.items():
        b = np.load(tmp_path / f"rt_{name}.npy")
        assert b.dtype == np.asarray(a).dtype and b.shape == np.asarray(a).shape, name
        assert (tmp_path / f"{name}.npy").read_bytes() == (tmp_path / f"rt_{name}.npy").read_bytes(), name


def test_npy_reader_rejects_bad_files(tmp_path):
    (tmp_path / "junk.npy").write_bytes(b"not numpy at all")
    np.save(tmp_path / "short.npy", np.zeros(4, np.float32))
    data = (tmp_path / "short.npy").read_bytes()
    (tmp_path / "short.npy").write_bytes(data[:-3])
    np.save(tmp_path / "c64.npy", np.zeros(2, np.complex64))
    for name, message in [("junk", "not a .npy file"), ("short", "data bytes"), ("c64", "unsupported")]:
        r = node_js("-e", "require(%r).readNpy(process.argv[1])" % os.path.join(HERE, "npy.js"),
                    str(tmp_path / f"{name}.npy"), check=False)
        assert r.returncode != 0 and message in r.stderr, (name, r.stderr)


@pytest.fixture
def conv_model(tmp_path):
    """Conv -> Relu -> two outputs with names that need sanitizing, plus an
    int64 and a bool output."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["conv"], pads=[1, 1, 1, 1], name="conv0"),
        helper.make_node("Relu", ["conv"], ["out/relu:0"], name="relu0"),
        helper.make_node("Shape", ["conv"], ["shape out"], name="shape0"),
        helper.make_node("Greater", ["conv", "zero"], ["positive"], name="greater0"),
    ]
    path = save_model(tmp_path / "conv.onnx", nodes, [vi("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                      [vi("out/relu:0", TensorProto.FLOAT, [1, 4, 8, 8]), vi("shape out", TensorProto.INT64, [4]),
                       vi("positive", TensorProto.BOOL, [1, 4, 8, 8])],
                      [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"),
                       numpy_helper.from_array(np.array(0, np.float32), "zero")])
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    return path, x, w, b


def conv_reference(x, w, b):
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((1, w.shape[0], 8, 8), np.float64)
    for i in range(8):
        for j in range(8):
            patch = xp[0, :, i:i + 3, j:j + 3]
            out[0, :, i, j] = np.tensordot(w, patch, axes=([1, 2, 3], [0, 1, 2]))
    return out + b.reshape(1, -1, 1, 1)


def test_ort_run_writes_sanitized_outputs_that_match_numpy(tmp_path, conv_model):
    path, x, w, b = conv_model
    node_js(ORT_RUN, "--model", path, "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", str(tmp_path / "out"))
    assert sorted(os.listdir(tmp_path / "out")) == ["out_relu_0.npy", "positive.npy", "shape_out.npy"]
    ref = conv_reference(x, w, b)
    relu = np.load(tmp_path / "out" / "out_relu_0.npy")
    assert relu.dtype == np.float32
    np.testing.assert_allclose(relu, np.maximum(ref, 0), rtol=1e-5, atol=1e-5)
    shape = np.load(tmp_path / "out" / "shape_out.npy")
    assert shape.dtype == np.int64 and shape.tolist() == [1, 4, 8, 8]
    positive = np.load(tmp_path / "out" / "positive.npy")
    assert positive.dtype == np.bool_ and (positive == (ref > 0)).all()


def test_ort_run_all_intermediates_and_errors(tmp_path, conv_model):
    path, x, w, b = conv_model
    node_js(ORT_RUN, "--model", path, "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", str(tmp_path / "all"),
            "--all-intermediates")
    assert "conv.npy" in os.listdir(tmp_path / "all")
    np.testing.assert_allclose(np.load(tmp_path / "all" / "conv.npy"), conv_reference(x, w, b), rtol=1e-5, atol=1e-5)

    missing = node_js(ORT_RUN, "--model", path, "--output-dir", str(tmp_path / "m"), check=False)
    assert missing.returncode == 1 and "no value given for input(s) x" in missing.stderr
    wrong = node_js(ORT_RUN, "--model", path, "--input", f"y={tmp_path / 'x.npy'}", "--output-dir",
                    str(tmp_path / "m"), check=False)
    assert wrong.returncode == 1 and "has no input 'y'" in wrong.stderr
    usage = node_js(ORT_RUN, "--model", path, "--bogus", check=False)
    assert usage.returncode == 2 and "unknown argument" in usage.stderr


def test_ort_run_jobs_and_bench(tmp_path, conv_model):
    path, x, w, b = conv_model
    jobs = [dict(model=os.path.basename(path), inputs={"x": "x.npy"}, output_dir="j0"),
            dict(model="absent.onnx", inputs={}, output_dir="j1"),
            dict(model=os.path.basename(path), inputs={"x": "x.npy"}, output_dir="j2", all_intermediates=True)]
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    r = node_js(ORT_RUN, "--jobs", str(tmp_path / "jobs.json"), check=False)
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert r.returncode == 1
    assert [entry["ok"] for entry in lines] == [True, False, True]
    assert "conv.npy" in os.listdir(tmp_path / "j2") and "conv.npy" not in os.listdir(tmp_path / "j0")

    bench = node_js(ORT_RUN, "--model", path, "--bench", "20", "--warmup", "2", "--threads", "1")
    report = json.loads(bench.stdout)
    assert report["runs"] == 20 and report["threads"] == 1
    assert 0 < report["min_ms"] <= report["p50_ms"] <= report["p90_ms"] <= report["p99_ms"]
    as_written = json.loads(node_js(ORT_RUN, "--model", path, "--bench", "2", "--optimization", "disabled").stdout)
    assert as_written["graph_optimization_level"] == "disabled"
    bad = node_js(ORT_RUN, "--model", path, "--bench", "2", "--optimization", "most", check=False)
    assert bad.returncode == 2 and "--optimization is one of" in bad.stderr


def run_compare(tmp_path, ref, test, *extra):
    (tmp_path / "r").mkdir(exist_ok=True)
    (tmp_path / "t").mkdir(exist_ok=True)
    for d in ("r", "t"):
        for f in os.listdir(tmp_path / d):
            os.remove(tmp_path / d / f)
    for name, a in ref.items():
        np.save(tmp_path / "r" / f"{name}.npy", a)
    for name, a in test.items():
        np.save(tmp_path / "t" / f"{name}.npy", a)
    return subprocess.run([sys.executable, COMPARE, str(tmp_path / "r"), str(tmp_path / "t"), *extra],
                          capture_output=True, text=True)


def test_compare_npy_criterion(tmp_path):
    big = np.linspace(-50, 50, 1000).astype(np.float32)
    # Within 1e-4 * 50 = 5e-3: passes; just outside: fails.
    assert run_compare(tmp_path, {"y": big}, {"y": big + np.float32(4e-3)}).returncode == 0
    assert run_compare(tmp_path, {"y": big}, {"y": big + np.float32(6e-3)}).returncode == 1
    # Small values: the tolerance floor is 1e-4 absolute.
    small = np.full(8, 0.01, np.float32)
    assert run_compare(tmp_path, {"y": small}, {"y": small + np.float32(5e-5)}).returncode == 0
    assert run_compare(tmp_path, {"y": small}, {"y": small + np.float32(2e-4)}).returncode == 1
    # Differences inside the tolerance but a wrong direction fail on cosine.
    tiny = np.array([1e-5, -1e-5, 1e-5, -1e-5], np.float32)
    r = run_compare(tmp_path, {"y": tiny}, {"y": -tiny})
    assert r.returncode == 1 and "FAIL" in r.stdout
    # Shapes, dtypes, integers, NaNs, missing files.
    assert run_compare(tmp_path, {"y": big}, {"y": big.reshape(10, 100)}).returncode == 1
    assert run_compare(tmp_path, {"y": big}, {"y": big.astype(np.float64)}).returncode == 1
    assert run_compare(tmp_path, {"i": np.arange(4)}, {"i": np.arange(4)}).returncode == 0
    assert run_compare(tmp_path, {"i": np.arange(4)}, {"i": np.arange(4) + 1}).returncode == 1
    nan = np.array([np.nan, 1.0], np.float32)
    assert run_compare(tmp_path, {"n": nan}, {"n": nan}).returncode == 0
    assert run_compare(tmp_path, {"n": nan}, {"n": np.array([0.0, 1.0], np.float32)}).returncode == 1
    assert run_compare(tmp_path, {"n": np.ones(2, np.float32)}, {"n": nan}).returncode == 1
    r = run_compare(tmp_path, {"a": big, "b": big}, {"a": big})
    assert r.returncode == 1 and "missing" in r.stdout
    # Looser limits on request (quantized models).
    assert run_compare(tmp_path, {"y": big}, {"y": big + np.float32(6e-3)}, "--rel", "1e-3").returncode == 0


def test_qdq_quantize_runs_on_onnxruntime_close_to_float(tmp_path):
    rng = np.random.default_rng(1)
    w = (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32) * 0.1
    w2 = (rng.standard_normal((8, 8, 1, 1)) * 0.3).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2"),
             helper.make_node("Add", ["c2", "r1"], ["y"], name="add")]
    float_path = save_model(tmp_path / "f.onnx", nodes, [vi("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                            [vi("y", TensorProto.FLOAT, [1, 8, 8, 8])],
                            [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"),
                             numpy_helper.from_array(w2, "w2")])
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    node_js(ORT_RUN, "--model", float_path, "--input", f"x={tmp_path / 'x.npy'}", "--output-dir",
            str(tmp_path / "calib"), "--all-intermediates")

    def arrays(name):
        return [x] if name == "x" else [np.load(tmp_path / "calib" / f"{name}.npy")]

    q = qdq_quantize.quantize(onnx.load(float_path), arrays)
    ops = [n.op_type for n in q.graph.node]
    assert ops.count("QuantizeLinear") == 5  # x, c1, r1, c2, y
    weights = {t.name: numpy_helper.to_array(t) for t in q.graph.initializer}
    assert weights["conv1_weight_quantized"].dtype == np.int8
    assert weights["conv1_weight_scale"].shape == (8,)
    assert weights["conv1_bias_quantized"].dtype == np.int32
    onnx.save(q, str(tmp_path / "q.onnx"))
    node_js(ORT_RUN, "--model", str(tmp_path / "q.onnx"), "--input", f"x={tmp_path / 'x.npy'}", "--output-dir",
            str(tmp_path / "qout"))
    yq = np.load(tmp_path / "qout" / "y.npy")
    yf = np.load(tmp_path / "calib" / "y.npy")
    assert np.abs(yq - yf).max() < 0.05 * np.abs(yf).max()
    assert not np.array_equal(yq, yf)


NODE_TESTS = "/usr/share/libonnx-testdata/data/node"


@pytest.mark.skipif(not os.path.isdir(NODE_TESTS), reason="libonnx-testdata is not installed (scripts/setup.sh)")
def test_node_test_jobs_reproduce_the_expected_outputs(tmp_path):
    subprocess.run([sys.executable, os.path.join(HERE, "node_test_jobs.py"), NODE_TESTS, str(tmp_path),
                    "--filter", "test_conv_with"], check=True, capture_output=True)
    jobs = json.loads((tmp_path / "jobs.json").read_text())
    assert len(jobs) >= 4
    node_js(ORT_RUN, "--jobs", str(tmp_path / "jobs.json"))
    for job in jobs:
        test = os.path.dirname(job["output_dir"])
        r = subprocess.run([sys.executable, COMPARE, str(tmp_path / test / "expected"), str(tmp_path / test / "ort")],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stdout


def test_yolo_reference_decode_matches_torchvision_nms_and_maps_back_through_the_letterbox():
    import torch
    import torchvision
    import yolo_reference_decode as yrd

    rng = np.random.default_rng(3)
    anchors, classes = 400, 5
    out = np.zeros((1, 4 + classes, anchors), np.float32)
    out[0, 0] = rng.uniform(0, 320, anchors)
    out[0, 1] = rng.uniform(40, 280, anchors)
    out[0, 2:4] = rng.uniform(10, 80, (2, anchors))
    out[0, 4:] = rng.uniform(0, 0.6, (classes, anchors))
    # A 480x360 picture letterboxed into 320x320: gain 2/3, 40 rows of padding on top.
    dets = yrd.decode(out, (480, 360), (320, 320), conf=0.25, iou=0.45, max_det=1000)

    pred = out[0].T.astype(np.float64)
    cls = pred[:, 4:].argmax(1)
    score = pred[:, 4:].max(1)
    keep = score >= 0.25
    cx, cy, w, h = pred[keep, 0], pred[keep, 1], pred[keep, 2], pred[keep, 3]
    boxes = torch.tensor(np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], 1))
    ref = torchvision.ops.batched_nms(boxes, torch.tensor(score[keep]), torch.tensor(cls[keep]), 0.45)
    assert len(dets) == len(ref) > 10
    for d, i in zip(dets, ref.tolist()):
        b = boxes[i].numpy()
        expect = [(b[0]) * 1.5, (b[1] - 40) * 1.5, (b[2]) * 1.5, (b[3] - 40) * 1.5]
        expect = [min(max(expect[0], 0), 480), min(max(expect[1], 0), 360),
                  min(max(expect[2], 0), 480), min(max(expect[3], 0), 360)]
        np.testing.assert_allclose(d["box"], expect, atol=2e-3)
        assert d["class"] == int(cls[keep][i])
    assert [d["score"] for d in dets] == sorted((d["score"] for d in dets), reverse=True)
    assert len(yrd.decode(out, (480, 360), (320, 320), conf=0.25, iou=0.45, max_det=1000, agnostic=True)) < len(dets)
    assert yrd.decode(out, (480, 360), (320, 320), conf=0.25, iou=0.45, max_det=7) == dets[:7]

#!/usr/bin/env python3
"""kiln run with a pipeline whose model takes two inputs and gives two
outputs, and whose later stages read its second output.

Usage: pipeline_multi_io_test.py KILN

`stats` (two inputs, two outputs): `mean` is the letterboxed picture's mean
per channel, f32[1, 3]; `scaled` is the first two channel means times the
`scale` input, f32[1, 2]. The pipeline feeds it the letterbox and a constant
tensor declared in the file; `doubled` (one input) reads stats' second
output, and `joined` (two inputs) reads both of stats' outputs. Each model
stage's outputs must equal what `kiln run MODEL.onnx --input ...` gives for
the same inputs, and onnxruntime's (where tests/onnx_oracle has it) and a
numpy reference, within 1e-6. The same pipeline compiled into an
artifact gives the same output; wiring mistakes are refused naming them.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from PIL import Image

SCALE = np.array([[0.5, 3.0]], np.float32)


def save(nodes, inputs, outputs, inits, path):
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="kiln-tests")
    onnx.checker.check_model(model)
    onnx.save(model, path)


def stats_model(path):
    save([helper.make_node("GlobalAveragePool", ["image"], ["pooled"]),
          helper.make_node("Flatten", ["pooled"], ["mean"]),
          helper.make_node("Slice", ["mean", "starts", "ends", "axes"], ["first_two"]),
          helper.make_node("Mul", ["first_two", "scale"], ["scaled"])],
         [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 8, 8]),
          helper.make_tensor_value_info("scale", TensorProto.FLOAT, [1, 2])],
         [helper.make_tensor_value_info("mean", TensorProto.FLOAT, [1, 3]),
          helper.make_tensor_value_info("scaled", TensorProto.FLOAT, [1, 2])],
         [numpy_helper.from_array(np.array([0], np.int64), "starts"),
          numpy_helper.from_array(np.array([2], np.int64), "ends"),
          numpy_helper.from_array(np.array([1], np.int64), "axes")], path)


def double_model(path):
    save([helper.make_node("Add", ["x", "x"], ["y"])],
         [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])], [], path)


def join_model(path):
    save([helper.make_node("Concat", ["a", "b"], ["joined"], axis=1)],
         [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 2]),
          helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 3])],
         [helper.make_tensor_value_info("joined", TensorProto.FLOAT, [1, 5])], [], path)


PIPELINE = {
    "models": {"stats": "stats.onnx", "double": "double.onnx", "join": "join.onnx"},
    "stages": [
        {"name": "letterbox", "kind": "letterbox", "image": "image", "width": 8, "height": 8},
        {"name": "scale", "kind": "constant", "dtype": "f32", "shape": [1, 2], "values": SCALE.ravel().tolist()},
        {"name": "stats", "kind": "model", "model": "stats", "inputs": {"image": "letterbox", "scale": "scale"}},
        {"name": "doubled", "kind": "model", "model": "double", "input": "stats.scaled"},
        {"name": "joined", "kind": "model", "model": "join", "inputs": {"a": "stats.scaled", "b": "stats.mean"}},
    ],
    "outputs": ["stats", "doubled", "joined"],
}


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, **kw)


def kiln_alone(kiln, tmp, model, inputs):
    """The model's outputs as `kiln run MODEL.onnx --input NAME=FILE.npy` gives them."""
    out_dir = os.path.join(tmp, "alone_" + model)
    args = [kiln, "run", os.path.join(tmp, model + ".onnx"), "--output-dir", out_dir, "--threads", "1"]
    for name, array in inputs.items():
        path = os.path.join(tmp, f"{model}_{name}.npy")
        np.save(path, array)
        args += ["--input", f"{name}={path}"]
    ran = run(args)
    assert ran.returncode == 0, ran.stderr
    return {f[:-4]: np.load(os.path.join(out_dir, f)) for f in os.listdir(out_dir)}


ORACLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "onnx_oracle")


def onnxruntime_alone(tmp, model, inputs):
    """The model's outputs as onnxruntime (tests/onnx_oracle/ort_run.js) gives
    them; None where onnxruntime-node is not installed (scripts/setup.sh)."""
    if not os.path.isdir(os.path.join(ORACLE, "node_modules", "onnxruntime-node")):
        return None
    out_dir = os.path.join(tmp, "ort_" + model)
    args = ["node", os.path.join(ORACLE, "ort_run.js"), "--model", os.path.join(tmp, model + ".onnx"),
            "--output-dir", out_dir]
    for name in inputs:
        args += ["--input", f"{name}={os.path.join(tmp, f'{model}_{name}.npy')}"]  # kiln_alone saved them
    ran = run(args)
    assert ran.returncode == 0, ran.stderr
    return {f[:-4]: np.load(os.path.join(out_dir, f)) for f in os.listdir(out_dir)}


def values(stage, output):
    (t,) = stage["outputs"][output]  # one run: no crops
    return np.array(t["values"], np.float32).reshape(t["shape"])


def main():
    kiln = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        stats_model(os.path.join(tmp, "stats.onnx"))
        double_model(os.path.join(tmp, "double.onnx"))
        join_model(os.path.join(tmp, "join.onnx"))
        spec = os.path.join(tmp, "multi.json")
        with open(spec, "w") as f:
            json.dump(PIPELINE, f)
        # Channels at 0 or 255: the letterbox's x / 255 is exactly 0 or 1.
        picture = np.zeros((8, 8, 3), np.uint8)
        picture[:4, :, 0] = 255
        picture[:, :2, 1] = 255
        image = os.path.join(tmp, "picture.png")
        Image.fromarray(picture).save(image)
        letterboxed = (picture.astype(np.float32) / 255).transpose(2, 0, 1)[None]

        out = os.path.join(tmp, "out.json")
        ran = run([kiln, "run", spec, "--image", image, "--json", out, "--threads", "1"])
        assert ran.returncode == 0, ran.stderr
        with open(out) as f:
            result = json.load(f)["stages"]

        # Each model stage against the model run alone on the same inputs.
        alone = kiln_alone(kiln, tmp, "stats", {"image": letterboxed, "scale": SCALE})
        for name in ("mean", "scaled"):
            assert np.array_equal(values(result["stats"], name), alone[name]), (name, result["stats"], alone)
        doubled = kiln_alone(kiln, tmp, "double", {"x": alone["scaled"]})
        assert np.array_equal(values(result["doubled"], "y"), doubled["y"]), result["doubled"]
        joined = kiln_alone(kiln, tmp, "join", {"a": alone["scaled"], "b": alone["mean"]})
        assert np.array_equal(values(result["joined"], "joined"), joined["joined"]), result["joined"]
        # And against onnxruntime, where it is installed, and numpy.
        for model, inputs, want in (("stats", {"image": 0, "scale": 0}, alone),
                                    ("double", {"x": 0}, doubled), ("join", {"a": 0, "b": 0}, joined)):
            ort = onnxruntime_alone(tmp, model, inputs)
            if ort is None:
                print("onnxruntime-node is not installed (scripts/setup.sh): compared with kiln run and numpy")
                break
            assert sorted(ort) == sorted(want), (ort, want)
            for name in ort:
                assert np.allclose(ort[name], want[name], atol=1e-6), (model, name, ort[name], want[name])
        else:
            print("each model stage's outputs equal onnxruntime's")
        mean = letterboxed.mean(axis=(2, 3))
        assert np.allclose(values(result["stats"], "mean"), mean, atol=1e-6), result["stats"]
        assert np.allclose(values(result["doubled"], "y"), 2 * mean[:, :2] * SCALE, atol=1e-6), result["doubled"]
        assert np.allclose(values(result["joined"], "joined"),
                           np.concatenate([mean[:, :2] * SCALE, mean], axis=1), atol=1e-6), result["joined"]
        assert result["stats"]["shapes"] == [[1, 3]], result["stats"]
        print("stats:", result["stats"]["outputs"], "doubled:", result["doubled"]["outputs"])

        # Compiled into one artifact, with the model files gone: the same.
        artifact = os.path.join(tmp, "multi.kiln")
        compiled = run([kiln, "compile", spec, "-o", artifact])
        assert compiled.returncode == 0, compiled.stderr
        inspected = run([kiln, "inspect", artifact])
        assert inspected.returncode == 0, inspected.stderr
        assert "a=stats.scaled b=stats.mean" in inspected.stdout, inspected.stdout
        assert "image=letterbox scale=scale" in inspected.stdout, inspected.stdout
        for model in ("stats", "double", "join"):
            os.rename(os.path.join(tmp, model + ".onnx"), os.path.join(tmp, model + ".onnx.away"))
        out2 = os.path.join(tmp, "out2.json")
        ran = run([kiln, "run", artifact, "--image", image, "--json", out2, "--threads", "1"])
        assert ran.returncode == 0, ran.stderr
        with open(out2) as f:
            assert json.load(f)["stages"] == result
        for model in ("stats", "double", "join"):
            os.rename(os.path.join(tmp, model + ".onnx.away"), os.path.join(tmp, model + ".onnx"))
        print("the compiled pipeline gives the same outputs")

        # Wiring mistakes, each refused naming what is wrong.
        def refused(change, expected):
            pipeline = json.loads(json.dumps(PIPELINE))
            change(pipeline["stages"])
            bad = os.path.join(tmp, "bad.json")
            with open(bad, "w") as f:
                json.dump(pipeline, f)
            r = run([kiln, "run", bad, "--image", image, "--json", out])
            assert r.returncode == 1 and expected in r.stderr, (expected, r.stderr)
            print("refused:", r.stderr.strip())

        def one_input(stages):
            stages[2] = {"name": "stats", "kind": "model", "model": "stats", "input": "letterbox"}
        refused(one_input, "model 'stats' takes 2 inputs (image, scale); wire each with \"inputs\"")
        refused(lambda s: s[2]["inputs"].pop("scale"), "model 'stats' input 'scale' is wired to nothing")
        refused(lambda s: s[2]["inputs"].update(extra="scale"), "model 'stats' has no input 'extra' (its inputs: image, scale)")
        refused(lambda s: s[3].update(input="stats.nothing"),
                "stage 'doubled': input 'input' reads output 'nothing' of 'stats', but model 'stats' gives mean, scaled")
        refused(lambda s: s[3].update(input="letterbox.x"), "reads output 'x' of 'letterbox', which is no model stage")
        refused(lambda s: s[1].update(shape=[1, 3]), "stage 'scale': shape [1,3] takes 3 values, and \"values\" holds 2")
        refused(lambda s: s[1].update(shape=[2, 1]),
                "stage 'stats': model 'stats' input 'scale' takes [1,2], but 'scale' gives [2,1]")
        refused(lambda s: s[1].update(dtype="i64", values=[1, 2]), "input scale takes f32, but is given i64[1,2]")
        refused(lambda s: s[1].update(dtype="f16"), "stage 'scale': dtype must be \"f32\", \"i64\" or \"i32\"")


if __name__ == "__main__":
    main()

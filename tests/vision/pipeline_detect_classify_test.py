#!/usr/bin/env python3
"""kiln run with a detector -> crop -> classifier pipeline of two tiny ONNX
models, from the pipeline file and from its compiled artifact.

Usage: pipeline_detect_classify_test.py KILN

The detector sees a 64x64 picture as four 32x32 cells (average pooling), and
its YOLOv8-layout head f32[1, 6, 4] puts a 28x28 box at each cell's center
whose class 0 score is the cell's mean red and class 1 score its mean blue
(a 1x1 convolution and a constant added to the boxes' rows). The classifier
takes each crop at 8x8 and scores red and blue the same way (global average
pooling and a 1x1 convolution). On a picture whose cells are red or blue of
four distinct intensities, the pipeline must find the four boxes, each
classified as its color, and the compiled artifact must give the same JSON
(with the .onnx files gone), and be refused once a byte of it is flipped.
"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from PIL import Image

CELLS = [(0, 0, (255, 0, 0)), (1, 0, (0, 0, 230)), (0, 1, (200, 0, 0)), (1, 1, (0, 0, 150))]  # x, y, color


def save(nodes, inputs, outputs, inits, path):
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="kiln-tests")
    onnx.checker.check_model(model)
    onnx.save(model, path)


def detector(path):
    weight = np.zeros((6, 3, 1, 1), np.float32)
    weight[4, 0] = 1  # class 0: red
    weight[5, 2] = 1  # class 1: blue
    boxes = np.zeros((1, 6, 4), np.float32)
    for anchor in range(4):
        x, y = anchor % 2, anchor // 2
        boxes[0, :4, anchor] = [16 + 32 * x, 16 + 32 * y, 28, 28]
    save([helper.make_node("AveragePool", ["images"], ["cells"], kernel_shape=[32, 32], strides=[32, 32]),
          helper.make_node("Conv", ["cells", "w"], ["scores"]),
          helper.make_node("Reshape", ["scores", "shape"], ["flat"]),
          helper.make_node("Add", ["flat", "boxes"], ["head"])],
         [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 64, 64])],
         [helper.make_tensor_value_info("head", TensorProto.FLOAT, [1, 6, 4])],
         [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(np.array([1, 6, 4], np.int64), "shape"),
          numpy_helper.from_array(boxes, "boxes")], path)


def classifier(path):
    weight = np.zeros((2, 3, 1, 1), np.float32)
    weight[0, 0] = 1
    weight[1, 2] = 1
    save([helper.make_node("GlobalAveragePool", ["x"], ["mean"]),
          helper.make_node("Conv", ["mean", "w"], ["scores"]),
          helper.make_node("Flatten", ["scores"], ["logits"])],
         [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
         [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 2])],
         [numpy_helper.from_array(weight, "w")], path)


def main():
    kiln = sys.argv[1]
    examples = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "pipelines")
    with open(os.path.join(examples, "detect_classify.json")) as f:
        pipeline = json.load(f)
    for stage in pipeline["stages"]:  # the example's shapes, at this test's sizes
        if stage["kind"] == "letterbox":
            stage["width"] = stage["height"] = 64
        if stage["kind"] == "resize":
            stage["width"] = stage["height"] = 8
            del stage["mean"], stage["std"]
    with tempfile.TemporaryDirectory() as tmp:
        detector(os.path.join(tmp, "detector.onnx"))
        classifier(os.path.join(tmp, "classifier.onnx"))
        spec = os.path.join(tmp, "detect_classify.json")
        with open(spec, "w") as f:
            json.dump(pipeline, f)
        picture = np.zeros((64, 64, 3), np.uint8)
        for x, y, color in CELLS:
            picture[32 * y:32 * y + 32, 32 * x:32 * x + 32] = color
        image = os.path.join(tmp, "cells.png")
        Image.fromarray(picture).save(image)

        out = os.path.join(tmp, "out.json")
        ran = subprocess.run([kiln, "run", spec, "--image", image, "--json", out, "--threads", "1"], check=True,
                             capture_output=True, text=True)
        with open(out) as f:
            result = json.load(f)
        # The two models' intermediates share one arena: the larger need,
        # not the sum.
        arena = re.search(r"activations: one arena of (\d+) bytes \(.*\) for (\d+) compiled graphs of 2 models; "
                          r"separate arenas would take (\d+) bytes", ran.stdout)
        assert arena, ran.stdout
        assert int(arena.group(2)) == 2 and 0 < int(arena.group(1)) < int(arena.group(3)), ran.stdout
        objects = result["stages"]["objects"]["detections"]
        classes = result["stages"]["classes"]["classes"]
        # By descending score: red 255, blue 230, red 200, blue 150.
        expected = [(0, 0, 0), (1, 0, 1), (0, 1, 0), (1, 1, 1)]
        assert [o["class"] for o in objects] == [c for _, _, c in expected], result
        for o, (x, y, _) in zip(objects, expected):
            assert o["box"] == [2 + 32 * x, 2 + 32 * y, 30 + 32 * x, 30 + 32 * y], o
        assert [c["class"] for c in classes] == [o["class"] for o in objects], result
        print("detected and classified:", [(o["class"], o["score"]) for o in objects])

        artifact = os.path.join(tmp, "detect_classify.kiln")
        subprocess.run([kiln, "compile", spec, "-o", artifact], check=True)
        plan = subprocess.run([kiln, "inspect", artifact, "--plan"], check=True, capture_output=True, text=True).stdout
        shared = re.search(r"activations: one arena for every model, (\d+) bytes \(.*\), the largest model's need; "
                           r"separate arenas: (\d+) bytes", plan)
        needs = [int(n) for n in re.findall(r"model \w+: needs (\d+) bytes", plan)]
        assert shared and len(needs) == 2, plan
        assert int(shared.group(1)) == max(needs) and int(shared.group(2)) == sum(needs), plan
        os.remove(os.path.join(tmp, "detector.onnx"))
        os.remove(os.path.join(tmp, "classifier.onnx"))
        subprocess.run([kiln, "run", artifact, "--image", image, "--json", out, "--threads", "1"], check=True)
        with open(out) as f:
            assert json.load(f) == result
        print("the compiled pipeline gives the same output")

        # A flipped byte in the stored pipeline is refused, naming the section.
        with open(artifact, "rb") as f:
            data = bytearray(f.read())
        count, = struct.unpack_from("<I", data, 12)
        table, = struct.unpack_from("<Q", data, 16)
        for i in range(count):
            entry = data[table + 64 * i:table + 64 * i + 64]
            if entry[:32].rstrip(b"\0") == b"pipeline":
                offset, = struct.unpack_from("<Q", entry, 32)
                data[offset + 5] ^= 1
        with open(artifact, "wb") as f:
            f.write(data)
        bad = subprocess.run([kiln, "run", artifact, "--image", image, "--json", out], capture_output=True, text=True)
        assert bad.returncode == 1 and "pipeline" in bad.stderr and "checksum" in bad.stderr, bad.stderr
        print("a damaged artifact is refused:", bad.stderr.strip())


if __name__ == "__main__":
    main()

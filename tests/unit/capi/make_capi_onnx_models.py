#!/usr/bin/env python3
"""Writes the small ONNX models the C API's and the Python binding's ONNX
tests run into OUT_DIR. Usage: make_capi_onnx_models.py OUT_DIR

  two_relu.onnx     inputs a: f32[n,4] (n bound per run) and b: f32[2,3];
                    outputs ya = Relu(Relu(a)) and yb = Relu(b)
  static_relu.onnx  x: f32[1,3,2,2] -> y = Relu(x), every shape fixed
  gather.onnx       ids: i64[n] picks rows of table: f32[6,2] -> rows: f32[n,2],
                    and column: i64[n,1] = Unsqueeze(ids, axes 1)
  reshape.onnx      x: f32[6] reshaped to the graph input shape: i64[2] -> y,
                    which compiles only with shape's value fixed
  unknown_op.onnx   x: f32[2] through an op of a domain no backend knows
  truncated.onnx    the first half of two_relu.onnx"""
import os
import sys

import onnx
from onnx import TensorProto, helper

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)


def save(graph, name, extra_opsets=()):
    imports = [helper.make_opsetid("", 13)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    model = helper.make_model(graph, opset_imports=imports, producer_name="kiln-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    data = model.SerializeToString()
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
    return data


def vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


two_relu = save(helper.make_graph(
    [helper.make_node("Relu", ["a"], ["a1"], name="relu_a1"),
     helper.make_node("Relu", ["a1"], ["ya"], name="relu_a2"),
     helper.make_node("Relu", ["b"], ["yb"], name="relu_b")],
    "two_relu", [vi("a", ["n", 4]), vi("b", [2, 3])], [vi("ya", ["n", 4]), vi("yb", [2, 3])]), "two_relu.onnx")

save(helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "static_relu",
                       [vi("x", [1, 3, 2, 2])], [vi("y", [1, 3, 2, 2])]), "static_relu.onnx")

save(helper.make_graph(
    [helper.make_node("Gather", ["table", "ids"], ["rows"], name="gather", axis=0),
     helper.make_node("Unsqueeze", ["ids", "axes"], ["column"], name="unsqueeze")],
    "gather",
    [helper.make_tensor_value_info("ids", TensorProto.INT64, ["n"]), vi("table", [6, 2])],
    [vi("rows", ["n", 2]), helper.make_tensor_value_info("column", TensorProto.INT64, ["n", 1])],
    [helper.make_tensor("axes", TensorProto.INT64, [1], [1])]), "gather.onnx")

save(helper.make_graph(
    [helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")], "reshape",
    [vi("x", [6]), helper.make_tensor_value_info("shape", TensorProto.INT64, [2])], [vi("y", ["r", "c"])]),
    "reshape.onnx")

unknown = helper.make_model(
    helper.make_graph([helper.make_node("Frobnicate", ["x"], ["y"], name="frob", domain="org.example.nowhere")],
                      "unknown_op", [vi("x", [2])], [vi("y", [2])]),
    opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("org.example.nowhere", 1)])
unknown.ir_version = 8
with open(os.path.join(OUT, "unknown_op.onnx"), "wb") as f:
    f.write(unknown.SerializeToString())

with open(os.path.join(OUT, "truncated.onnx"), "wb") as f:
    f.write(two_relu[: len(two_relu) // 2])

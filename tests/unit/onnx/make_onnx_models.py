#!/usr/bin/env python3
"""Writes the small ONNX models the ONNX reader's tests read into OUT_DIR:
valid ones (every element type and attribute kind, external data, a
subgraph, a PyTorch export when torch is there) and one broken file per
rule the reader enforces. Usage: make_onnx_models.py OUT_DIR"""
import os
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)


def save(model, name):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(model.SerializeToString())


def model(graph, opset=13, extra_opsets=()):
    imports = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    m = helper.make_model(graph, opset_imports=imports, producer_name="kiln-tests", producer_version="1.0")
    m.ir_version = 8
    return m


def typed(name, onnx_type, dims, field, values):
    t = TensorProto()
    t.name = name
    t.data_type = onnx_type
    t.dims.extend(dims)
    getattr(t, field).extend(values)
    return t


def raw(name, array):
    return numpy_helper.from_array(array, name)  # numpy_helper writes raw_data


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


# basic.onnx: every element type, both data encodings, every attribute kind,
# nodes out of order, an unnamed node, an initializer also listed as an input.
conv_w = np.arange(6, dtype=np.float32).reshape(2, 3, 1, 1) * 0.5
initializers = [
    raw("conv.weight", conv_w),
    typed("conv.bias", TensorProto.FLOAT, [2], "float_data", [0.25, -1.5]),
    typed("shape", TensorProto.INT64, [2], "int64_data", [1, -1]),
    raw("half", np.array([1.0, -2.0, 0.5], dtype=np.float16)),
    typed("half_typed", TensorProto.FLOAT16, [2], "int32_data",
          [int(np.array(3.0, np.float16).view(np.uint16)), int(np.array(-0.25, np.float16).view(np.uint16))]),
    typed("i32", TensorProto.INT32, [3], "int32_data", [7, -8, 2147483647]),
    raw("i32_raw", np.array([[1, 2], [3, 4]], dtype=np.int32)),
    typed("flags", TensorProto.BOOL, [3], "int32_data", [1, 0, 1]),
    raw("u8", np.array([0, 255, 17], dtype=np.uint8)),
    typed("i8", TensorProto.INT8, [2], "int32_data", [-128, 127]),
    raw("scalar", np.array(2.5, dtype=np.float32)),
    raw("empty", np.zeros((0, 4), dtype=np.float32)),
]
nodes = [
    helper.make_node("Relu", ["conv_out"], ["relu_out"], name="relu"),
    helper.make_node("Conv", ["images", "conv.weight", "conv.bias"], ["conv_out"], name="conv",
                     kernel_shape=[1, 1], strides=[1, 1], group=1, auto_pad="NOTSET"),
    helper.make_node("LeakyRelu", ["relu_out"], ["leaky_out"], alpha=0.125),  # unnamed
    helper.make_node("Constant", [], ["const_out"], name="const",
                     value=helper.make_tensor("c", TensorProto.FLOAT, [2], [3.5, 4.5])),
    helper.make_node("Reshape", ["leaky_out", "shape"], ["logits"], name="reshape"),
    helper.make_node("Identity", ["mask"], ["mask_out"], name="tagged",
                     tags=["a", "bc"], weights=[0.5, 1.5], note="hello"),
]
graph = helper.make_graph(
    nodes, "basic",
    [vi("images", TensorProto.FLOAT, ["batch", 3, 4, 4]), vi("mask", TensorProto.BOOL, [None, 2]),
     vi("conv.bias", TensorProto.FLOAT, [2])],
    [vi("logits", TensorProto.FLOAT, ["batch", None]), vi("mask_out", TensorProto.BOOL, None),
     vi("const_out", TensorProto.FLOAT, [2])],
    initializers)
save(model(graph), "basic.onnx")

# external.onnx: two initializers in weights.bin (the second at offset 64),
# one in weights_tail.bin with no length given.
ext_a = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
ext_b = np.array([5, 6, 7], dtype=np.int64)
blob = ext_a.tobytes().ljust(64, b"\0") + ext_b.tobytes()
with open(os.path.join(OUT, "weights.bin"), "wb") as f:
    f.write(blob)
with open(os.path.join(OUT, "weights_tail.bin"), "wb") as f:
    f.write(b"\x01\x02" + np.array([1.0, 2.0], dtype=np.float16).tobytes())


def external(name, onnx_type, dims, location, offset=None, length=None):
    t = TensorProto()
    t.name = name
    t.data_type = onnx_type
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    entries = [("location", location)]
    if offset is not None:
        entries.append(("offset", str(offset)))
    if length is not None:
        entries.append(("length", str(length)))
    for k, v in entries:
        e = t.external_data.add()
        e.key, e.value = k, v
    return t


def ext_model(tensors, name):
    nodes = [helper.make_node("Identity", [t.name], [t.name + "_out"], name="id_" + t.name) for t in tensors]
    g = helper.make_graph(nodes, "ext", [], [vi(t.name + "_out", t.data_type, list(t.dims)) for t in tensors], tensors)
    save(model(g), name)


ext_model([external("a", TensorProto.FLOAT, [3, 4], "weights.bin", 0, 48),
           external("b", TensorProto.INT64, [3], "weights.bin", 64, 24),
           external("c", TensorProto.FLOAT16, [2], "weights_tail.bin", 2)], "external.onnx")
ext_model([external("escape", TensorProto.FLOAT, [2], "../outside.bin", 0, 8)], "ext_escape.onnx")
ext_model([external("abs", TensorProto.FLOAT, [2], os.path.abspath(os.path.join(OUT, "weights.bin")))],
          "ext_absolute.onnx")
ext_model([external("beyond", TensorProto.FLOAT, [4], "weights.bin", 80, 16)], "ext_beyond.onnx")
ext_model([external("wrong_len", TensorProto.FLOAT, [3, 4], "weights.bin", 0, 40)], "ext_wrong_length.onnx")
ext_model([external("missing", TensorProto.FLOAT, [2], "no_such_file.bin")], "ext_missing_file.onnx")

# if_subgraph.onnx: an If whose branches read 'scaled' from the outer graph,
# listed before the node that makes it.
then_g = helper.make_graph([helper.make_node("Add", ["scaled", "scaled"], ["t_out"], name="then_add")], "then",
                           [], [vi("t_out", TensorProto.FLOAT, [2])])
else_g = helper.make_graph([helper.make_node("Neg", ["scaled"], ["e_out"], name="else_neg")], "else",
                           [], [vi("e_out", TensorProto.FLOAT, [2])])
graph = helper.make_graph(
    [helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then_g, else_branch=else_g),
     helper.make_node("Mul", ["x", "x"], ["scaled"], name="square")],
    "if_graph", [vi("cond", TensorProto.BOOL, []), vi("x", TensorProto.FLOAT, [2])], [vi("y", TensorProto.FLOAT, [2])])
save(model(graph), "if_subgraph.onnx")


# subgraph_missing.onnx: a branch reads 'ghost', which no graph makes.
ghost_g = helper.make_graph([helper.make_node("Add", ["x", "ghost"], ["g_out"], name="then_add")], "then",
                            [], [vi("g_out", TensorProto.FLOAT, [2])])
plain_g = helper.make_graph([helper.make_node("Neg", ["x"], ["p_out"], name="else_neg")], "else",
                            [], [vi("p_out", TensorProto.FLOAT, [2])])
graph = helper.make_graph(
    [helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=ghost_g, else_branch=plain_g)],
    "if_graph", [vi("cond", TensorProto.BOOL, []), vi("x", TensorProto.FLOAT, [2])], [vi("y", TensorProto.FLOAT, [2])])
save(model(graph), "subgraph_missing.onnx")


def nested_if(levels):
    """An If nested `levels` deep (each branch holds the next If)."""
    inner = helper.make_graph([helper.make_node("Identity", ["x"], ["o0"], name="leaf")], "leaf", [],
                              [vi("o0", TensorProto.FLOAT, [2])])
    for level in range(1, levels + 1):
        out = "o%d" % level
        inner = helper.make_graph(
            [helper.make_node("If", ["cond"], [out], name="if%d" % level, then_branch=inner, else_branch=inner)],
            "level%d" % level, [], [vi(out, TensorProto.FLOAT, [2])])
    g = helper.make_graph(list(inner.node), "nested", [vi("cond", TensorProto.BOOL, []), vi("x", TensorProto.FLOAT, [2])],
                          list(inner.output))
    return model(g)


save(nested_if(3), "nested3.onnx")


def simple(nodes, inputs=None, outputs=None, inits=(), opset=13, extra_opsets=(), name="g"):
    inputs = inputs if inputs is not None else [vi("x", TensorProto.FLOAT, [1, 2])]
    outputs = outputs if outputs is not None else [vi("y", TensorProto.FLOAT, [1, 2])]
    return model(helper.make_graph(nodes, name, inputs, outputs, list(inits)), opset, extra_opsets)


# One broken file per rule.
save(simple([helper.make_node("Relu", ["x"], ["r"], name="r")]), "missing_output.onnx")
save(simple([helper.make_node("Add", ["x", "b_out"], ["a_out"], name="cyc_a"),
             helper.make_node("Relu", ["a_out"], ["b_out"], name="cyc_b"),
             helper.make_node("Identity", ["a_out"], ["y"], name="out")]), "cycle.onnx")
save(simple([helper.make_node("MatMul", ["x", "fc.weight"], ["y"], name="fc")]), "missing_initializer.onnx")
save(simple([helper.make_node("Relu", ["x"], ["y"], name="r")],
            inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, None)]), "no_shape.onnx")
bad_raw = raw("bad.weight", np.zeros((2, 2), dtype=np.float32))
bad_raw.raw_data = bad_raw.raw_data[:12]
save(simple([helper.make_node("Add", ["x", "bad.weight"], ["y"], name="add")], inits=[bad_raw]), "bad_raw_size.onnx")
save(simple([helper.make_node("Add", ["x", "bad.bias"], ["y"], name="add")],
            inits=[typed("bad.bias", TensorProto.FLOAT, [1, 2], "float_data", [1.0, 2.0, 3.0])]), "bad_typed_count.onnx")
save(simple([helper.make_node("Frobnicate", ["x"], ["y"], name="frob", domain="com.example")],
            extra_opsets=[("com.example", 1)]), "unknown_domain.onnx")
save(simple([helper.make_node("Relu", ["x"], ["y"], name="r", domain="com.microsoft")]), "unimported_domain.onnx")
save(simple([helper.make_node("Relu", ["x"], ["y"], name="r")], opset=6), "opset6.onnx")
save(simple([helper.make_node("Relu", ["x"], ["y"], name="r")], opset=18), "opset18.onnx")
save(simple([helper.make_node("Relu", ["x"], ["y"], name="first"),
             helper.make_node("Neg", ["x"], ["y"], name="second")]), "duplicate_output.onnx")
huge = TensorProto()
huge.name = "huge"
huge.data_type = TensorProto.FLOAT
huge.dims.extend([1 << 20, 1 << 20, 1 << 10])
save(simple([helper.make_node("Add", ["x", "huge"], ["y"], name="add")], inits=[huge]), "huge_tensor.onnx")
save(simple([helper.make_node("Relu", ["x"], ["y"], name="r")],
            inputs=[vi("x", TensorProto.STRING, [2])]), "string_input.onnx")

# More element types and encodings: double_data, bfloat16 and int16 raw,
# uint64 (which kiln does not hold).
save(simple([helper.make_node("Identity", ["x"], ["y"], name="id")],
            inits=[typed("doubles", TensorProto.DOUBLE, [2], "double_data", [0.1, -2.0]),
                   raw("i16", np.array([-300, 7], dtype=np.int16)),
                   typed("bf16", TensorProto.BFLOAT16, [2], "int32_data", [0x3F80, 0xC000])]), "more_types.onnx")
save(simple([helper.make_node("Identity", ["x"], ["y"], name="id")],
            inits=[typed("big", TensorProto.UINT64, [1], "uint64_data", [1])]), "uint64_initializer.onnx")

# Features kiln refuses: a local function, a sparse initializer, a sequence
# input, an attribute holding a list of tensors.
fn = helper.make_function("local", "Twice", ["a"], ["b"], [helper.make_node("Add", ["a", "a"], ["b"])],
                          [helper.make_opsetid("", 13)])
m = simple([helper.make_node("Twice", ["x"], ["y"], name="call", domain="local")], extra_opsets=[("local", 1)])
m.functions.append(fn)
save(m, "local_function.onnx")
g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"], name="id")], "g",
                      [vi("x", TensorProto.FLOAT, [1, 2])], [vi("y", TensorProto.FLOAT, [1, 2])])
g.sparse_initializer.append(helper.make_sparse_tensor(
    helper.make_tensor("sparse_values", TensorProto.FLOAT, [1], [1.0]),
    helper.make_tensor("sparse_indices", TensorProto.INT64, [1], [0]), [4]))
save(model(g), "sparse_initializer.onnx")
save(simple([helper.make_node("Identity", ["x"], ["y"], name="id")],
            inputs=[helper.make_tensor_sequence_value_info("x", TensorProto.FLOAT, [2])]), "sequence_input.onnx")
save(simple([helper.make_node("Identity", ["x"], ["y"], name="listy",
                              blobs=[helper.make_tensor("t", TensorProto.FLOAT, [1], [1.0])])]),
     "tensors_attribute.onnx")

# Grouped convolutions (two groups of 3 and 4 input channels), which stay
# row-major and run on kiln's own GEMM over packed weight panels, for
# compiled artifacts.
rng = np.random.default_rng(3)
save(simple([helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="grouped1", pads=[1, 1, 1, 1], group=2),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2"], ["y"], name="grouped2", pads=[1, 1, 1, 1], group=2)],
            inputs=[vi("x", TensorProto.FLOAT, [1, 6, 20, 20])], outputs=[vi("y", TensorProto.FLOAT, None)],
            inits=[raw("w1", rng.standard_normal((8, 3, 3, 3)).astype(np.float32)),
                   raw("b1", rng.standard_normal(8).astype(np.float32)),
                   raw("w2", rng.standard_normal((12, 4, 3, 3)).astype(np.float32))]), "grouped_conv.onnx")

# A transposed convolution and quantized products (QLinearConv with two
# groups, QLinearMatMul) whose weights kiln packs once, for compiled
# artifacts to store packed.
save(simple([helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], name="up", strides=[2, 2],
                              pads=[1, 1, 1, 1], output_padding=[1, 1])],
            inputs=[vi("x", TensorProto.FLOAT, [1, 16, 10, 10])], outputs=[vi("y", TensorProto.FLOAT, None)],
            inits=[raw("w", rng.standard_normal((16, 8, 3, 3)).astype(np.float32)),
                   raw("b", rng.standard_normal(8).astype(np.float32))]), "conv_transpose.onnx")
save(simple([helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"], name="qx"),
             helper.make_node("QLinearConv", ["xq", "xs", "xz", "w", "ws", "wz", "cs", "cz", "cb"], ["cq"],
                              name="qconv", pads=[1, 1, 1, 1], group=2),
             helper.make_node("DequantizeLinear", ["cq", "cs", "cz"], ["c"], name="dqc"),
             helper.make_node("Flatten", ["c"], ["f"], name="flat"),
             helper.make_node("QuantizeLinear", ["f", "cs", "cz"], ["fq"], name="qf"),
             helper.make_node("QLinearMatMul", ["fq", "cs", "cz", "m", "ms", "mz", "ys", "yz"], ["yq"],
                              name="qmatmul"),
             helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"], name="dqy")],
            inputs=[vi("x", TensorProto.FLOAT, [1, 8, 6, 6])], outputs=[vi("y", TensorProto.FLOAT, None)],
            inits=[raw("xs", np.array(0.02, np.float32)), raw("xz", np.array(128, np.uint8)),
                   raw("w", rng.integers(-100, 100, (16, 4, 3, 3)).astype(np.int8)),
                   raw("ws", np.array(0.01, np.float32)), raw("wz", np.array(0, np.int8)),
                   raw("cs", np.array(0.05, np.float32)), raw("cz", np.array(128, np.uint8)),
                   raw("cb", rng.integers(-500, 500, 16).astype(np.int32)),
                   raw("m", rng.integers(-100, 100, (576, 24)).astype(np.int8)),
                   raw("ms", np.array(0.01, np.float32)), raw("mz", np.array(0, np.int8)),
                   raw("ys", np.array(0.1, np.float32)), raw("yz", np.array(128, np.uint8))]),
     "quantized_products.onnx")

# Products big enough (5 MFLOP or more each) for --precision mixed to
# multiply them in bf16: a convolution, a MatMul and a Gemm on weights.
brng = np.random.default_rng(5)
save(simple([helper.make_node("Conv", ["x", "cw", "cb"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Reshape", ["r", "rows"], ["f"], name="rows"),
             helper.make_node("MatMul", ["f", "mw"], ["m"], name="matmul"),
             helper.make_node("Gemm", ["m", "gw", "gb"], ["y"], name="gemm", transB=1, alpha=0.5)],
            inputs=[vi("x", TensorProto.FLOAT, [1, 16, 32, 32])], outputs=[vi("y", TensorProto.FLOAT, None)],
            inits=[raw("cw", (brng.standard_normal((32, 16, 3, 3)) * 0.1).astype(np.float32)),
                   raw("cb", brng.standard_normal(32).astype(np.float32)),
                   raw("rows", np.array([32, 1024], np.int64)),
                   raw("mw", (brng.standard_normal((1024, 256)) * 0.03).astype(np.float32)),
                   raw("gw", (brng.standard_normal((512, 256)) * 0.06).astype(np.float32)),
                   raw("gb", brng.standard_normal(512).astype(np.float32))]), "bf16_products.onnx")

# Inputs that folding needs fixed (kiln run/compile --fixed-input): the
# second operand of a MatMul (packed once when fixed; 8 KiB, so an artifact
# moves it to its weights section) and Reshape's shape.
save(simple([helper.make_node("MatMul", ["x", "w"], ["m"], name="product"),
             helper.make_node("Reshape", ["m", "shape"], ["y"], name="reshape")],
            inputs=[vi("x", TensorProto.FLOAT, [4, 64]), vi("w", TensorProto.FLOAT, [64, 32]),
                    vi("shape", TensorProto.INT64, [2])],
            outputs=[vi("y", TensorProto.FLOAT, None)]), "fixed_inputs.onnx")

# A tiny PyTorch module exported by torch.onnx, where torch is installed.
try:
    import torch

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(4)
            self.fc = torch.nn.Linear(4, 2)

        def forward(self, x):
            return self.fc(torch.relu(self.bn(self.conv(x))).mean(dim=(2, 3)))

    torch.manual_seed(0)
    tiny = Tiny().eval()
    torch.onnx.export(tiny, torch.randn(1, 3, 8, 8), os.path.join(OUT, "torch_tiny.onnx"),
                      input_names=["image"], output_names=["logits"],
                      dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}}, opset_version=13)
    w = tiny.fc.weight.detach().numpy().astype(np.float32)
    with open(os.path.join(OUT, "torch_tiny_fc_weight.bin"), "wb") as f:
        f.write(w.tobytes())

    # A small convolutional net whose layers take kiln's different
    # convolution kernels (a stem, depthwise, 1x1, dense 3x3 with a
    # residual), for compiled artifacts; once more with its weights in an
    # external data file.
    class ConvNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Conv2d(3, 16, 3, stride=2, padding=1)
            self.dw = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16)
            self.pw = torch.nn.Conv2d(16, 32, 1)
            self.dense = torch.nn.Conv2d(32, 32, 3, padding=1)
            self.wide = torch.nn.Conv2d(32, 40, 3, padding=1)
            self.fc = torch.nn.Linear(40, 5)

        def forward(self, x):
            x = torch.relu(self.stem(x))
            x = torch.relu(self.pw(torch.relu(self.dw(x))))
            x = torch.relu(self.dense(x)) + x
            return self.fc(torch.sigmoid(self.wide(x)).mean(dim=(2, 3)))

    net = ConvNet().eval()
    torch.onnx.export(net, torch.randn(1, 3, 32, 32), os.path.join(OUT, "conv_net.onnx"),
                      input_names=["image"], output_names=["scores"], opset_version=13)
    exported = onnx.load(os.path.join(OUT, "conv_net.onnx"))
    onnx.save(exported, os.path.join(OUT, "conv_net_external.onnx"), save_as_external_data=True,
              all_tensors_to_one_file=True, location="conv_net_external.bin", size_threshold=0)
except ImportError:
    pass

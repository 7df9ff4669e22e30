"""Static QDQ int8 quantization of an ONNX model, in the layout onnxruntime's
quantizer writes (QuantizeLinear -> DequantizeLinear pairs around float ops):

- activations: uint8, asymmetric, one scale per tensor, from the minimum and
  maximum seen over calibration runs (always including 0, so that zero
  padding is exact);
- Conv weights: int8, symmetric (zero point 0), one scale per output channel
  (DequantizeLinear axis 0); Gemm/MatMul weights: int8 symmetric per tensor;
  both within [-63, 63] (7 bits, onnxruntime's reduce_range), because
  onnxruntime's uint8 x int8 kernels on x86 CPUs without VNNI add pairs of
  products in int16 with saturation (vpmaddubsw): full-range weights made
  its outputs wrong there (a 2-conv model 0.95 off a largest value of
  3.2), not kiln's;
- biases of quantized Conv/Gemm: int32 with scale input_scale * weight_scale.

Which activations: every float input of Conv, Gemm and MatMul, and every
rank-4 float tensor read or written by Add, Concat, MaxPool, AveragePool,
GlobalAveragePool, Resize, Mul, Sigmoid, Relu and Conv (the feature maps; a
detector's box decode after its last reshape stays float). Needs opset >= 13
(per-channel DequantizeLinear).

The calibration ranges come from a callback that returns, for a tensor name,
the list of arrays seen for it (the caller runs the float model with every
intermediate exposed).
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, shape_inference

WEIGHT_OPS = {"Conv": 1, "Gemm": 1, "MatMul": 1}
# The largest weight magnitude: 2 * 255 * 63 stays within int16 (see above).
WEIGHT_MAX = 63
FEATURE_OPS = {"Add", "Concat", "MaxPool", "AveragePool", "GlobalAveragePool", "Resize", "Mul",
               "Sigmoid", "Relu", "Conv"}


def _opset(model):
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o.version
    return 0


def _float_ranks(model):
    """name -> rank for every float tensor whose type shape inference knows."""
    inferred = shape_inference.infer_shapes(model)
    ranks = {}
    g = inferred.graph
    for vi in list(g.value_info) + list(g.input) + list(g.output):
        t = vi.type.tensor_type
        if t.elem_type == TensorProto.FLOAT and t.HasField("shape"):
            ranks[vi.name] = len(t.shape.dim)
    return ranks


def _activations_to_quantize(model, ranks, initializers):
    chosen = []
    seen = set()

    def take(name):
        if name and name not in seen and name not in initializers and name in ranks:
            seen.add(name)
            chosen.append(name)

    for node in model.graph.node:
        if node.op_type in WEIGHT_OPS:
            take(node.input[0])
        if node.op_type in FEATURE_OPS:
            for name in list(node.input) + list(node.output):
                if ranks.get(name) == 4:
                    take(name)
    return chosen


def _activation_params(arrays):
    lo = min(0.0, min(float(a.min()) for a in arrays))
    hi = max(0.0, max(float(a.max()) for a in arrays))
    scale = (hi - lo) / 255.0 if hi > lo else 1.0
    zero_point = int(np.clip(round(-lo / scale), 0, 255))
    return np.float32(scale), np.uint8(zero_point)


def quantize(model, calibration_arrays):
    """Returns a new ModelProto with QDQ pairs; `calibration_arrays(name)`
    gives the float arrays seen for an activation."""
    if _opset(model) < 13:
        raise ValueError(f"QDQ with per-channel weights needs opset >= 13, the model has {_opset(model)}")
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    initializers = {t.name: t for t in graph.initializer}
    ranks = _float_ranks(model)
    activations = _activations_to_quantize(model, ranks, initializers)

    new_inits = []
    act_scale = {}
    qdq_after = {}  # tensor -> [Q node, DQ node]
    for name in activations:
        scale, zp = _activation_params(calibration_arrays(name))
        act_scale[name] = scale
        s_name, z_name = f"{name}_scale", f"{name}_zero_point"
        new_inits += [numpy_helper.from_array(np.array(scale, np.float32), s_name),
                      numpy_helper.from_array(np.array(zp, np.uint8), z_name)]
        qdq_after[name] = [
            helper.make_node("QuantizeLinear", [name, s_name, z_name], [f"{name}_quantized"],
                             name=f"{name}_QuantizeLinear"),
            helper.make_node("DequantizeLinear", [f"{name}_quantized", s_name, z_name],
                             [f"{name}_dequantized"], name=f"{name}_DequantizeLinear"),
        ]

    # Consumers read the dequantized value; graph outputs keep the float one.
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name in qdq_after:
                node.input[i] = f"{name}_dequantized"

    weight_nodes = []
    for node in graph.node:
        if node.op_type not in WEIGHT_OPS or len(node.input) < 2:
            continue
        w_name = node.input[1]
        if w_name not in initializers:
            continue
        if node.op_type == "Gemm":
            attrs = {a.name: a for a in node.attribute}
            if "transA" in attrs and attrs["transA"].i:
                continue
        w = numpy_helper.to_array(initializers[w_name]).astype(np.float32)
        per_channel = node.op_type == "Conv"
        if per_channel:
            w_scale = np.abs(w.reshape(w.shape[0], -1)).max(axis=1) / WEIGHT_MAX
            w_scale[w_scale == 0] = 1.0
            wq = np.clip(np.round(w / w_scale.reshape(-1, *([1] * (w.ndim - 1)))), -WEIGHT_MAX, WEIGHT_MAX)
        else:
            m = float(np.abs(w).max())
            w_scale = np.array(m / WEIGHT_MAX if m > 0 else 1.0, np.float32)
            wq = np.clip(np.round(w / w_scale), -WEIGHT_MAX, WEIGHT_MAX)
        w_scale = w_scale.astype(np.float32)
        base = f"{node.name or w_name}_weight"
        new_inits += [numpy_helper.from_array(wq.astype(np.int8), f"{base}_quantized"),
                      numpy_helper.from_array(w_scale, f"{base}_scale"),
                      numpy_helper.from_array(np.zeros(w_scale.shape, np.int8), f"{base}_zero_point")]
        dq_attrs = {"axis": 0} if per_channel else {}
        weight_nodes.append(helper.make_node(
            "DequantizeLinear", [f"{base}_quantized", f"{base}_scale", f"{base}_zero_point"],
            [f"{base}_dequantized"], name=f"{base}_DequantizeLinear", **dq_attrs))
        node.input[1] = f"{base}_dequantized"

        # The bias as int32 in the accumulator's scale, where the input is quantized.
        x_name = node.input[0]
        x_float = x_name[:-len("_dequantized")] if x_name.endswith("_dequantized") else None
        if len(node.input) > 2 and node.input[2] in initializers and x_float in act_scale:
            b = numpy_helper.to_array(initializers[node.input[2]]).astype(np.float32)
            b_scale = (act_scale[x_float] * w_scale).astype(np.float32)
            if b_scale.ndim == 0 and b.ndim == 1:
                b_scale_arr = np.full(b.shape, b_scale, np.float32)
            else:
                b_scale_arr = b_scale
            bq = np.round(b / b_scale_arr).astype(np.int64)
            bq = np.clip(bq, -(2**31), 2**31 - 1).astype(np.int32)
            bbase = f"{node.name or node.input[2]}_bias"
            new_inits += [numpy_helper.from_array(bq, f"{bbase}_quantized"),
                          numpy_helper.from_array(b_scale_arr, f"{bbase}_scale"),
                          numpy_helper.from_array(np.zeros(b.shape, np.int32), f"{bbase}_zero_point")]
            weight_nodes.append(helper.make_node(
                "DequantizeLinear", [f"{bbase}_quantized", f"{bbase}_scale", f"{bbase}_zero_point"],
                [f"{bbase}_dequantized"], name=f"{bbase}_DequantizeLinear", axis=0))
            node.input[2] = f"{bbase}_dequantized"

    # Rebuild the node list in topological order: weight dequantization
    # first, each activation's pair right after the tensor appears.
    ordered = list(weight_nodes)
    for inp in graph.input:
        ordered += qdq_after.get(inp.name, [])
    for node in graph.node:
        ordered.append(node)
        for out in node.output:
            ordered += qdq_after.get(out, [])
    del graph.node[:]
    graph.node.extend(ordered)

    # Drop the float weights nothing reads any more.
    used = {name for node in graph.node for name in node.input}
    keep = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(keep + new_inits)
    onnx.checker.check_model(model)
    return model

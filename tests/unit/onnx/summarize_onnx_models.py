#!/usr/bin/env python3
"""Summarizes every model.onnx under DIR as onnx's own protobuf parser reads
it, for comparison with kiln's reader: per model the opsets, the graph
inputs and outputs, each initializer's type, dims and CRC-32 of its
little-endian bytes, and each node's op type, domain, inputs, outputs and
attributes. Usage: summarize_onnx_models.py DIR OUT.json"""
import json
import os
import struct
import sys
import zlib

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto

NARROW = {TensorProto.INT32: np.int32, TensorProto.INT16: np.int16, TensorProto.INT8: np.int8,
          TensorProto.UINT8: np.uint8, TensorProto.BOOL: np.uint8, TensorProto.FLOAT16: np.uint16,
          TensorProto.BFLOAT16: np.uint16}


def tensor_bytes(t):
    if t.HasField("raw_data"):
        return t.raw_data
    if t.data_type == TensorProto.FLOAT:
        return struct.pack("<%df" % len(t.float_data), *t.float_data)
    if t.data_type == TensorProto.DOUBLE:
        return struct.pack("<%dd" % len(t.double_data), *t.double_data)
    if t.data_type == TensorProto.INT64:
        return struct.pack("<%dq" % len(t.int64_data), *t.int64_data)
    if t.data_type in NARROW:
        return np.array(t.int32_data, dtype=np.int64).astype(NARROW[t.data_type]).tobytes()
    return b""


def tensor(t):
    return {"name": t.name, "type": t.data_type, "dims": list(t.dims), "crc": zlib.crc32(tensor_bytes(t))}


def attribute(a):
    kind = a.type
    if kind == AttributeProto.FLOAT:
        value = struct.unpack("<I", struct.pack("<f", a.f))[0]
    elif kind == AttributeProto.INT:
        value = a.i
    elif kind == AttributeProto.STRING:
        value = a.s.hex()
    elif kind == AttributeProto.FLOATS:
        value = [struct.unpack("<I", struct.pack("<f", f))[0] for f in a.floats]
    elif kind == AttributeProto.INTS:
        value = list(a.ints)
    elif kind == AttributeProto.STRINGS:
        value = [s.hex() for s in a.strings]
    elif kind == AttributeProto.TENSOR:
        value = tensor(a.t)
    elif kind == AttributeProto.GRAPH:
        value = graph(a.g)
    else:
        value = None
    return {"name": a.name, "type": kind, "value": value}


def value_info(v):
    t = v.type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in t.shape.dim] \
        if t.HasField("shape") else None
    return {"name": v.name, "type": t.elem_type, "dims": dims}


def graph(g):
    initializer_names = {t.name for t in g.initializer}
    return {
        "inputs": [value_info(v) for v in g.input if v.name not in initializer_names],
        "outputs": [value_info(v) for v in g.output],
        "initializers": [tensor(t) for t in g.initializer],
        "nodes": [{"op": n.op_type, "domain": "" if n.domain == "ai.onnx" else n.domain, "inputs": list(n.input),
                   "outputs": list(n.output), "attributes": [attribute(a) for a in n.attribute]} for n in g.node],
    }


def main():
    root, out = sys.argv[1], sys.argv[2]
    models = {}
    for folder, _, files in sorted(os.walk(root)):
        if "model.onnx" not in files:
            continue
        path = os.path.join(folder, "model.onnx")
        m = onnx.load(path, load_external_data=False)
        models[path] = {"opsets": {("" if o.domain == "ai.onnx" else o.domain): o.version for o in m.opset_import},
                        "graph": graph(m.graph)}
    with open(out, "w") as f:
        json.dump(models, f)


main()

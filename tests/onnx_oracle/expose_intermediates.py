#!/usr/bin/python3
"""Rewrites an ONNX model so that every node output of the main graph is also
a graph output, so that a runtime's intermediate values can be compared layer
by layer (`kiln diff` against onnxruntime).

    expose_intermediates.py IN.onnx OUT.onnx

The original outputs keep their places at the front; the intermediates follow
in node order. Types come from ONNX shape inference where it knows them;
an output it cannot type is added with its element type only when known, and
bare otherwise (onnxruntime takes the producer's type then).
"""
import os
import sys

import onnx
from onnx import shape_inference


def expose(model):
    try:
        inferred = shape_inference.infer_shapes(model)
    except Exception as e:  # inference is a help here, not a requirement
        print(f"expose_intermediates: shape inference failed ({e}); adding untyped outputs",
              file=sys.stderr)
        inferred = model
    known = {vi.name: vi for vi in inferred.graph.value_info}
    for vi in list(inferred.graph.output) + list(inferred.graph.input):
        known.setdefault(vi.name, vi)

    graph = model.graph
    present = {o.name for o in graph.output}
    for node in graph.node:
        for name in node.output:
            if not name or name in present:
                continue
            present.add(name)
            vi = graph.output.add()
            if name in known:
                vi.CopyFrom(known[name])
            else:
                vi.name = name
    return model


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    src, dst = argv[1], argv[2]
    model = onnx.load(src, load_external_data=True)
    expose(model)
    # Large models keep their weights outside the protobuf (2 GiB limit).
    large = model.ByteSize() > 1_500_000_000
    if large:
        onnx.save(model, dst, save_as_external_data=True, all_tensors_to_one_file=True,
                  location=os.path.basename(dst) + ".data")
    else:
        onnx.save(model, dst)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/python3
"""Turns the ONNX backend node tests (Debian's libonnx-testdata) into .npy
files and an ort_run.js job list, so that onnxruntime's outputs for all of
them come from one node process:

    node_test_jobs.py NODE_TEST_DIR OUT_DIR [--filter SUBSTRING]

NODE_TEST_DIR is e.g. /usr/share/libonnx-testdata/data/node. For each test
with tensor inputs and outputs: OUT_DIR/<test>/inputs/<input>.npy and
OUT_DIR/<test>/expected/<output>.npy (from test_data_set_0, names sanitized
as ort_run.js does), and a job writing onnxruntime's outputs to
OUT_DIR/<test>/ort/. OUT_DIR/jobs.json is the job list; OUT_DIR/skipped.json
lists the tests left out and why (sequence/optional values, no data set).

    node ort_run.js --jobs OUT_DIR/jobs.json > OUT_DIR/ort_log.jsonl
"""
import argparse
import json
import os
import re
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def sanitize(name):
    s = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    return "_" + s if s in ("", ".", "..") else s


def is_tensor(value_info):
    return value_info.type.HasField("tensor_type")


def load_tensor(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def convert(test_dir, out_dir):
    """Returns (job, None) or (None, reason)."""
    model = onnx.load(os.path.join(test_dir, "model.onnx"))
    data = os.path.join(test_dir, "test_data_set_0")
    if not os.path.isdir(data):
        return None, "no test_data_set_0"
    g = model.graph
    initializers = {t.name for t in g.initializer}
    inputs = [i for i in g.input if i.name not in initializers]
    if not all(is_tensor(v) for v in list(inputs) + list(g.output)):
        return None, "non-tensor input or output (sequence/optional/map)"
    name = os.path.basename(test_dir)
    files = {}
    for k, vi in enumerate(inputs):
        pb = os.path.join(data, f"input_{k}.pb")
        if not os.path.exists(pb):
            return None, f"no {os.path.basename(pb)} for input '{vi.name}'"
        a = load_tensor(pb)
        if a.dtype == object or a.dtype.kind in "USc":
            return None, f"input '{vi.name}' has element type {a.dtype}"
        path = os.path.join(out_dir, name, "inputs", sanitize(vi.name) + ".npy")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        np.save(path, a)
        files[vi.name] = os.path.relpath(path, out_dir)
    for k, vi in enumerate(g.output):
        pb = os.path.join(data, f"output_{k}.pb")
        if not os.path.exists(pb):
            return None, f"no {os.path.basename(pb)} for output '{vi.name}'"
        a = load_tensor(pb)
        if a.dtype == object or a.dtype.kind in "USc":
            return None, f"output '{vi.name}' has element type {a.dtype}"
        path = os.path.join(out_dir, name, "expected", sanitize(vi.name) + ".npy")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        np.save(path, a)
    return dict(model=os.path.join(test_dir, "model.onnx"), inputs=files,
                output_dir=os.path.join(name, "ort")), None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("node_test_dir")
    parser.add_argument("out_dir")
    parser.add_argument("--filter", default="", help="only tests whose name contains this")
    args = parser.parse_args()
    out_dir = os.path.abspath(args.out_dir)
    os.makedirs(out_dir, exist_ok=True)
    jobs, skipped = [], {}
    for test in sorted(os.listdir(args.node_test_dir)):
        test_dir = os.path.join(args.node_test_dir, test)
        if args.filter not in test or not os.path.exists(os.path.join(test_dir, "model.onnx")):
            continue
        try:
            job, reason = convert(test_dir, out_dir)
        except Exception as e:  # a test file the reader cannot take is reported, not fatal
            job, reason = None, f"cannot read: {e}"
        if job:
            jobs.append(job)
        else:
            skipped[test] = reason
    with open(os.path.join(out_dir, "jobs.json"), "w") as f:
        json.dump(jobs, f, indent=1)
    with open(os.path.join(out_dir, "skipped.json"), "w") as f:
        json.dump(skipped, f, indent=1, sort_keys=True)
    print(f"{len(jobs)} node tests written to {out_dir}, {len(skipped)} left out (skipped.json)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

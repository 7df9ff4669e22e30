#!/usr/bin/env python3
"""Checks that `kiln generate --dump` writes files numpy reads: every value
of index.json loads with numpy.load with the recorded shape, and the first
pass's logits equal the reference model's (tiny-llama, prompt 0, fp32).

usage: dump_numpy_check.py KILN_BINARY SHARED_DIR WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np


def main():
    kiln, shared, work = sys.argv[1:4]
    model = os.path.join(shared, "models", "tiny-llama")
    with open(os.path.join(model, "reference", "prompt_0.json")) as f:
        ref = json.load(f)
    dump = os.path.join(work, "dump_numpy_check")
    shutil.rmtree(dump, ignore_errors=True)
    subprocess.run([kiln, "generate", "-m", model, "-p", ref["prompt"], "-n", "2", "--ignore-eos",
                    "--precision", "fp32", "--threads", "2", "--dump", dump],
                   check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(dump, "index.json")) as f:
        index = json.load(f)
    assert index["format"] == "kiln-dump-1", index["format"]
    assert len(index["passes"]) == 2, len(index["passes"])
    count = 0
    for p in index["passes"]:
        for v in p["values"]:
            a = np.load(os.path.join(dump, v["file"]))
            assert a.dtype == np.float32 and list(a.shape) == v["shape"], (v, a.dtype, a.shape)
            assert np.all(np.isfinite(a)), v["name"]
            count += 1
    first = index["passes"][0]
    assert first["token_ids"] == ref["input_ids"]
    logits = next(v for v in first["values"] if v["name"] == "logits")
    got = np.load(os.path.join(dump, logits["file"]))[0]
    want = np.array(ref["last_logits"], dtype=np.float32)
    diff = float(np.max(np.abs(got - want)))
    assert diff < 1e-3, f"logits differ from the reference by {diff}"
    print(f"ok: {count} values in {len(index['passes'])} passes; logits within {diff:.2e} of the reference")


if __name__ == "__main__":
    main()

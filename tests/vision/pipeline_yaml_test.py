#!/usr/bin/env python3
"""kiln run and kiln compile with a pipeline file in YAML: the same pipeline
as JSON and as YAML (examples/pipelines/detect_classify.{json,yaml}, at this
test's sizes) give the same results, and their compiled artifacts the same
stored pipeline and the same plans; YAML mistakes are refused naming the
file, line and key.

Usage: pipeline_yaml_test.py KILN
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pipeline_detect_classify_test as models  # noqa: E402  the two tiny models and the picture

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "pipelines")


def run(args):
    return subprocess.run(args, capture_output=True, text=True)


def section(path, name):
    """The bytes of one section of a .kiln file (format/artifact_file.h)."""
    with open(path, "rb") as f:
        data = f.read()
    count, = struct.unpack_from("<I", data, 12)
    table, = struct.unpack_from("<Q", data, 16)
    for i in range(count):
        entry = data[table + 64 * i:table + 64 * i + 64]
        if entry[:32].rstrip(b"\0") == name.encode():
            offset, size = struct.unpack_from("<QQ", entry, 32)
            return data[offset:offset + size]
    raise AssertionError(f"no section {name} in {path}")


def main():
    kiln = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        models.detector(os.path.join(tmp, "detector.onnx"))
        models.classifier(os.path.join(tmp, "classifier.onnx"))
        # The examples at this test's sizes: 64x64 letterbox, 8x8 patches.
        with open(os.path.join(EXAMPLES, "detect_classify.json")) as f:
            text = f.read()
        json_path = os.path.join(tmp, "pipeline.json")
        with open(json_path, "w") as f:
            f.write(text.replace(": 640", ": 64").replace(": 224", ": 8"))
        with open(os.path.join(EXAMPLES, "detect_classify.yaml")) as f:
            text = f.read()
        yaml_path = os.path.join(tmp, "pipeline.yaml")
        with open(yaml_path, "w") as f:
            f.write(text.replace(": 640", ": 64").replace(": 224", ": 8"))
        picture = np.zeros((64, 64, 3), np.uint8)
        for x, y, color in models.CELLS:
            picture[32 * y:32 * y + 32, 32 * x:32 * x + 32] = color
        image = os.path.join(tmp, "cells.png")
        Image.fromarray(picture).save(image)

        results = {}
        for path in (json_path, yaml_path):
            out = path + ".out.json"
            ran = run([kiln, "run", path, "--image", image, "--json", out, "--threads", "1"])
            assert ran.returncode == 0, ran.stderr
            with open(out) as f:
                results[path] = json.load(f)
        assert results[json_path] == results[yaml_path], results
        assert len(results[yaml_path]["stages"]["classes"]["classes"]) == 4, results[yaml_path]
        print("JSON and YAML give the same results")

        plans = {}
        for path in (json_path, yaml_path):
            artifact = path + ".kiln"
            compiled = run([kiln, "compile", path, "-o", artifact])
            assert compiled.returncode == 0, compiled.stderr
            inspected = run([kiln, "inspect", artifact, "--plan"])
            assert inspected.returncode == 0, inspected.stderr
            # All but the lines naming the artifact and the pipeline file.
            plans[path] = [line for line in inspected.stdout.splitlines()
                           if not line.startswith(("artifact:", "source:"))]
            assert any("model detector: needs" in line for line in plans[path]), inspected.stdout
        assert plans[json_path] == plans[yaml_path], (plans[json_path], plans[yaml_path])
        assert section(json_path + ".kiln", "pipeline") == section(yaml_path + ".kiln", "pipeline")
        out = os.path.join(tmp, "compiled.json")
        ran = run([kiln, "run", yaml_path + ".kiln", "--image", image, "--json", out, "--threads", "1"])
        assert ran.returncode == 0, ran.stderr
        with open(out) as f:
            assert json.load(f)["stages"] == results[yaml_path]["stages"]
        print("their artifacts store the same pipeline and plans")

        # YAML mistakes: each an error naming the file, line and what is wrong.
        good = open(yaml_path).read()
        cases = [
            ("stages:\n  - {name: a, kind: model, input: *nowhere}\n", ":2:", "the referenced anchor is not defined"),
            ("stages:\n  - {name: a, kind: letterbox, width: [1\n", ":3:", "not valid YAML"),
            ("stages:\n  - name: a\n    kind: letterbox\n    width: 8\n    width: 9\n", ":5:5",
             "key 'stages[0].width' is given twice"),
            ("stages:\n  - {name: a, kind: letterbox, width: !!int eight}\n", ":2:",
             "'stages[0].width' is tagged !!int but holds 'eight'"),
            ("stages:\n  - {name: a, kind: letterbox, width: .inf}\n", ":2:",
             "'stages[0].width' is .inf; a pipeline's numbers are finite"),
            ("stages:\n  - {name: a, kind: letterbox, width: 99999999999999999999}\n", ":2:",
             "beyond a 64-bit integer"),
            ("stages:\n  - {[a]: b}\n", ":2:", "a key in 'stages[0]' is a list, not text"),
            ("a: &x [*x]\n", ":1:", "nests deeper than 64 levels"),
            # Each list ten aliases to the one before: 10^7 values from 7 lines.
            ("".join("%s: &%s [%s]\n" % (k, k, ",".join(["*" + p] * 10 if p else ["x"] * 10))
                     for p, k in zip(["", "a", "b", "c", "d", "e", "f"], "abcdefg")),
             ":", "expands to more than 20000 values"),
            ("stages: []\n---\nstages: []\n", ":3:", "holds 2 YAML documents"),
            # A tag or an anchor with no node, then a comma (the YAML
            # library would never return on it).
            ("!tag ,\n", ":1:6:", "',' outside a flow collection"),
            ("&anchor,\n", ":1:8:", "',' outside a flow collection"),
            ("stages: []\nx: \x00,\n", ":2:4:", "control character 0x00"),
            # Text on which the YAML library makes documents without end.
            (open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz", "seeds",
                               "pipeline_spec_fuzz", "flow_maps_no_comma.yaml")).read(),
             ":3:59:", "holds at least 64 YAML documents; a pipeline is one"),
            # A block scalar with a blank line is read to its end.
            ("stages:\n  - name: a\n    note: |\n      text\n\n      more\n    kind: letterbox\n", ":3:",
             "stage 'a': a letterbox stage has no 'note'"),
            ("", "", "the YAML file is empty"),
            # Valid YAML, wrong for a pipeline: the one schema check says so,
            # and the line of the stage's key it names is found.
            (good.replace("width: 8\n", "width: \"8\"\n"), ":14:", "stage 'patches': width must be a number, not \"8\""),
            (good.replace("kind: resize", "kind: resized"), ":12:", "stage 'patches': unknown kind 'resized'"),
            (good.replace("crops: crops}", "crops: crop}"), ":19:", "stage 'classes': input 'crops' is wired to 'crop'"),
        ]
        bad = os.path.join(tmp, "bad.yaml")
        for text, where, expected in cases:
            with open(bad, "w") as f:
                f.write(text)
            r = run([kiln, "run", bad, "--image", image, "--json", out])
            assert r.returncode == 1, (text, r.stderr)
            assert "bad.yaml" + where in r.stderr and expected in r.stderr, (text, where, expected, r.stderr)
            assert "Traceback" not in r.stderr and "terminate" not in r.stderr, r.stderr
            print("refused:", r.stderr.strip())


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""--recompile-if-stale on kiln detect, kiln ocr (-m, -r, --cls), the C API's
ONNX models (through kiln.OnnxModel) and compiled pipelines.

Usage: recompile_if_stale_test.py KILN LIBKILN  (LIBKILN "": the C API part is left out)

Artifacts compiled here for AVX-512 are stale where kiln runs AVX2 kernels
(KILN_ISA=avx2). Each entry point must refuse such an artifact, saying how
to rebuild it; with --recompile-if-stale (recompile_if_stale=True) rebuild
it from the source it records and give exactly what the source gives under
AVX2; and, with the source gone (or a pipeline file changed), fail saying
so. Exits 77 (skipped) on a CPU without AVX-512.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pipeline_detect_classify_test as tiny  # noqa: E402  the detector, classifier, picture and pipeline

AVX2 = dict(os.environ, KILN_ISA="avx2", OMP_WAIT_POLICY="PASSIVE")
SKIPPED = 77


def run(args, env=None):
    return subprocess.run(args, capture_output=True, text=True, env=env)


def ok(r):
    assert r.returncode == 0, r.stderr
    return r


def ocr_models(tmp):
    """Tiny PP-OCR-shaped models: a detector whose map is high where the
    picture is dark, a recognizer of 4 classes (blank, a, b, space) per 8
    columns, a direction classifier."""
    det = os.path.join(tmp, "det.onnx")
    tiny.save([helper.make_node("ReduceMean", ["x"], ["m"], axes=[1], keepdims=1),
               helper.make_node("Mul", ["m", "k"], ["s"]),
               helper.make_node("Sigmoid", ["s"], ["y"])],
              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "h", "w"])],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, "h", "w"])],
              [numpy_helper.from_array(np.array(-4, np.float32), "k")], det)
    rng = np.random.default_rng(7)
    rec = os.path.join(tmp, "rec.onnx")
    tiny.save([helper.make_node("AveragePool", ["x"], ["p"], kernel_shape=[48, 8], strides=[48, 8]),
               helper.make_node("Conv", ["p", "w"], ["c"]),
               helper.make_node("Squeeze", ["c", "axis"], ["q"]),
               helper.make_node("Transpose", ["q"], ["t"], perm=[0, 2, 1]),
               helper.make_node("Softmax", ["t"], ["y"], axis=2)],
              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 48, "w"])],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "t", 4])],
              [numpy_helper.from_array(rng.normal(size=(4, 3, 1, 1)).astype(np.float32) * 4, "w"),
               numpy_helper.from_array(np.array([2], np.int64), "axis")], rec)
    cls = os.path.join(tmp, "cls.onnx")
    tiny.save([helper.make_node("GlobalAveragePool", ["x"], ["p"]),
               helper.make_node("Conv", ["p", "w"], ["c"]),
               helper.make_node("Flatten", ["c"], ["y"])],
              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 48, 192])],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
              [numpy_helper.from_array(rng.normal(size=(2, 3, 1, 1)).astype(np.float32), "w")], cls)
    dictionary = os.path.join(tmp, "dict.txt")
    with open(dictionary, "w") as f:
        f.write("a\nb\n")
    return det, rec, cls, dictionary


def compile_stale(kiln, source, artifact):
    ok(run([kiln, "compile", source, "-o", artifact]))
    with open(artifact, "rb") as f:
        return b'"isa": "avx512"' in f.read()


def check_refused(r, what):
    assert r.returncode != 0, (what, r.stdout)
    assert "stale artifact" in r.stderr and "kiln compile" in r.stderr and "--recompile-if-stale" in r.stderr, r.stderr
    print(f"{what}: refused:", r.stderr.strip().splitlines()[-1])


def check_rebuilt(r, what, count=1):
    assert r.returncode == 0, (what, r.stderr)
    assert r.stderr.count("was stale") == count, r.stderr
    print(f"{what}: rebuilt:", r.stderr.strip().splitlines()[0])


def main():
    kiln, libkiln = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        picture = np.zeros((64, 64, 3), np.uint8)
        for x, y, color in tiny.CELLS:
            picture[32 * y:32 * y + 32, 32 * x:32 * x + 32] = color
        cells = os.path.join(tmp, "cells.png")
        Image.fromarray(picture).save(cells)
        detector = os.path.join(tmp, "detector.onnx")
        classifier = os.path.join(tmp, "classifier.onnx")
        tiny.detector(detector)
        tiny.classifier(classifier)

        # kiln detect -m X.kiln
        artifact = os.path.join(tmp, "detector.kiln")
        if not compile_stale(kiln, detector, artifact):
            print("skipped: kiln compiles for a lower ISA than AVX-512 on this CPU")
            sys.exit(SKIPPED)
        pristine = os.path.join(tmp, "pristine.kiln")
        shutil.copy(artifact, pristine)
        want, got = os.path.join(tmp, "want.json"), os.path.join(tmp, "got.json")
        ok(run([kiln, "detect", "-m", detector, "--image", cells, "--json", want], AVX2))
        check_refused(run([kiln, "detect", "-m", artifact, "--image", cells, "--json", got], AVX2), "detect")
        check_rebuilt(run([kiln, "detect", "-m", artifact, "--image", cells, "--json", got, "--recompile-if-stale"],
                          AVX2), "detect")
        assert json.load(open(got))["detections"] == json.load(open(want))["detections"]
        assert len(json.load(open(got))["detections"]) == 4
        again = ok(run([kiln, "detect", "-m", artifact, "--image", cells, "--json", got, "--recompile-if-stale"], AVX2))
        assert "was stale" not in again.stderr, "rebuilt once, not at every load"
        # The source gone: a clear error.
        shutil.copy(pristine, artifact)
        os.rename(detector, detector + ".away")
        r = run([kiln, "detect", "-m", artifact, "--image", cells, "--json", got, "--recompile-if-stale"], AVX2)
        assert r.returncode != 0 and "is gone" in r.stderr and detector in r.stderr, r.stderr
        print("detect: source gone:", r.stderr.strip())
        os.rename(detector + ".away", detector)

        # kiln ocr -m DET.kiln -r REC.kiln --cls CLS.kiln
        det, rec, cls, dictionary = ocr_models(tmp)
        page = np.full((96, 256, 3), 255, np.uint8)
        page[30:62, 40:200] = 0  # a dark band: one text box
        page_path = os.path.join(tmp, "page.png")
        Image.fromarray(page).save(page_path)
        kilns = []
        for source in (det, rec, cls):
            kilns.append(source.replace(".onnx", ".kiln"))
            assert compile_stale(kiln, source, kilns[-1])
        common = ["--dict", dictionary, "--image", page_path, "--drop-score", "0"]
        ok(run([kiln, "ocr", "-m", det, "-r", rec, "--cls", cls, "--json", want] + common, AVX2))
        stale = ["-m", kilns[0], "-r", kilns[1], "--cls", kilns[2]]
        check_refused(run([kiln, "ocr"] + stale + ["--json", got] + common, AVX2), "ocr")
        check_rebuilt(run([kiln, "ocr"] + stale + ["--json", got, "--recompile-if-stale"] + common, AVX2), "ocr", 3)
        lines = json.load(open(got))["lines"]
        assert lines == json.load(open(want))["lines"] and len(lines) == 1, (lines, open(want).read())

        # A compiled pipeline: rebuilt whole from its pipeline and model files.
        pipeline = json.load(open(os.path.join(tiny.__file__.rsplit(os.sep, 3)[0], "examples", "pipelines",
                                               "detect_classify.json")))
        for stage in pipeline["stages"]:
            if stage["kind"] == "letterbox":
                stage["width"] = stage["height"] = 64
            if stage["kind"] == "resize":
                stage["width"] = stage["height"] = 8
        spec = os.path.join(tmp, "pipeline.json")
        json.dump(pipeline, open(spec, "w"))
        artifact = os.path.join(tmp, "pipeline.kiln")
        assert compile_stale(kiln, spec, artifact)
        shutil.copy(artifact, pristine)
        ok(run([kiln, "run", spec, "--image", cells, "--json", want], AVX2))
        r = run([kiln, "run", artifact, "--image", cells, "--json", got], AVX2)
        check_refused(r, "pipeline")
        assert "model 'classifier' compiled for avx512" in r.stderr and spec in r.stderr, r.stderr
        check_rebuilt(run([kiln, "run", artifact, "--image", cells, "--json", got, "--recompile-if-stale"], AVX2),
                      "pipeline")
        assert json.load(open(got)) == json.load(open(want))
        again = ok(run([kiln, "run", artifact, "--image", cells, "--json", got, "--recompile-if-stale"], AVX2))
        assert "was stale" not in again.stderr, again.stderr
        # A model file gone, or the pipeline file changed: clear errors.
        shutil.copy(pristine, artifact)
        os.rename(classifier, classifier + ".away")
        r = run([kiln, "run", artifact, "--image", cells, "--json", got, "--recompile-if-stale"], AVX2)
        assert r.returncode != 0 and f"the file of model 'classifier' {classifier} is gone" in r.stderr, r.stderr
        print("pipeline: model gone:", r.stderr.strip())
        os.rename(classifier + ".away", classifier)
        with open(spec, "a") as f:
            f.write("\n")
        r = run([kiln, "run", artifact, "--image", cells, "--json", got, "--recompile-if-stale"], AVX2)
        assert r.returncode != 0 and f"its pipeline file {spec} changed since it was compiled" in r.stderr, r.stderr
        print("pipeline: file changed:", r.stderr.strip())

        # The C API (kiln_onnx_options.recompile_if_stale) through Python.
        if not libkiln:
            print("C API: left out (no loadable libkiln.so given)")
            return
        artifact = os.path.join(tmp, "classifier.kiln")
        assert compile_stale(kiln, classifier, artifact)
        script = f"""
import numpy as np, kiln
x = np.linspace(-1, 1, 192, dtype=np.float32).reshape(1, 3, 8, 8)
want = kiln.OnnxModel({classifier!r}, threads=1).run({{"x": x}})
try:
    kiln.OnnxModel({artifact!r}, threads=1)
    raise SystemExit("a stale artifact loaded")
except kiln.KilnError as e:
    assert "stale artifact" in str(e) and "recompile" in str(e), e
got = kiln.OnnxModel({artifact!r}, threads=1, recompile_if_stale=True).run({{"x": x}})
assert list(got) == list(want) and all(np.array_equal(got[k], want[k]) for k in want), (got, want)
print("C API: refused, then rebuilt:", got)
"""
        python_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")
        env = dict(AVX2, KILN_LIBRARY=libkiln, PYTHONPATH=python_dir, PYTHONDONTWRITEBYTECODE="1")
        r = run(["/usr/bin/python3", "-c", script], env)
        assert r.returncode == 0, r.stdout + r.stderr
        print(r.stdout.strip())


if __name__ == "__main__":
    main()

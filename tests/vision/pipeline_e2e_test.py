#!/usr/bin/env python3
"""kiln run PIPELINE.json with the PP-OCR pipeline equals kiln ocr.

Usage: pipeline_e2e_test.py KILN MODELS_DIR

Renders ocr_e2e_test's picture, runs examples/pipelines/ppocr.json's stages
(with MODELS_DIR's models) through `kiln run --image --json`, and
`kiln ocr` with the same models: the pipeline's "text" lines must equal
kiln ocr's lines exactly. Then `kiln compile PIPELINE.json -o OUT.kiln`
on copies of the models and dictionary, which are deleted before
`kiln run OUT.kiln`: the artifact alone gives the same output as the
pipeline file. A pipeline with an unknown stage kind must fail with a
message naming the stage.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ocr_e2e_test  # noqa: E402


def main():
    kiln, models = sys.argv[1], sys.argv[2]
    det, rec, cls = ocr_e2e_test.ppocr_models(models)
    with open(os.path.join(HERE, "..", "..", "examples", "pipelines", "ppocr.json")) as f:
        pipeline = json.load(f)
    pipeline["models"] = {"det": det, "rec": rec, "cls": cls}
    for stage in pipeline["stages"]:
        if stage["kind"] == "ctc_decode":
            stage["dictionary"] = os.path.join(models, "ppocr_keys_v1.txt")
    with tempfile.TemporaryDirectory() as tmp:
        image = os.path.join(tmp, "text.png")
        ocr_e2e_test.render(image)
        spec = os.path.join(tmp, "ppocr.json")
        with open(spec, "w") as f:
            json.dump(pipeline, f)
        ran, read = os.path.join(tmp, "run.json"), os.path.join(tmp, "ocr.json")
        subprocess.run([kiln, "run", spec, "--image", image, "--json", ran, "--threads", "2"], check=True)
        subprocess.run([kiln, "ocr", "-m", det, "-r", rec, "--cls", cls, "--image", image, "--json", read,
                        "--threads", "2"], check=True)
        with open(ran) as f:
            result = json.load(f)
        with open(read) as f:
            expected = json.load(f)
        assert result["stages"]["text"]["lines"] == expected["lines"], (result, expected)
        assert len(result["stages"]["boxes"]["boxes"]) == len(expected["lines"]), result
        print("the pipeline read", [line["text"] for line in expected["lines"]], "as kiln ocr does")

        # The pipeline compiled into one artifact from copies of its files,
        # which are gone when it runs.
        copies = os.path.join(tmp, "copies")
        os.mkdir(copies)
        for name, path in pipeline["models"].items():
            shutil.copy(path, os.path.join(copies, name + ".onnx"))
        shutil.copy(os.path.join(models, "ppocr_keys_v1.txt"), os.path.join(copies, "dict.txt"))
        compiled_spec = json.loads(json.dumps(pipeline))
        compiled_spec["models"] = {name: name + ".onnx" for name in pipeline["models"]}
        for stage in compiled_spec["stages"]:
            if stage["kind"] == "ctc_decode":
                stage["dictionary"] = "dict.txt"
        with open(os.path.join(copies, "ppocr.json"), "w") as f:
            json.dump(compiled_spec, f)
        artifact = os.path.join(tmp, "ppocr.kiln")
        subprocess.run([kiln, "compile", os.path.join(copies, "ppocr.json"), "-o", artifact], check=True)
        shutil.rmtree(copies)
        from_artifact = os.path.join(tmp, "artifact.json")
        subprocess.run([kiln, "run", artifact, "--image", image, "--json", from_artifact, "--threads", "2"],
                       check=True)
        with open(from_artifact) as f:
            compiled = json.load(f)
        assert compiled == result, (compiled, result)
        print("the compiled pipeline gives the pipeline file's output")
        shown = subprocess.run([kiln, "inspect", artifact, "--plan", "--verify"], check=True, capture_output=True,
                               text=True).stdout
        for expected_line in ("stages, in run order", "model rec: section", "dictionary of stage text",
                              "verified: every section", "memory across stages"):
            assert expected_line in shown, shown
        # The recognizer's ten width buckets (320 to 3200) are compiled and
        # stored, so no crop compiles a graph at run time.
        rec = shown[shown.index("model rec: section"):]
        assert "compiled graphs stored: 10 " in rec.splitlines()[1], rec

        pipeline["stages"][2]["kind"] = "db_post"
        with open(spec, "w") as f:
            json.dump(pipeline, f)
        bad = subprocess.run([kiln, "run", spec, "--image", image, "--json", ran], capture_output=True, text=True)
        assert bad.returncode == 1, bad
        assert "stage 'boxes': unknown kind 'db_post'" in bad.stderr, bad.stderr
        print("a bad pipeline is refused:", bad.stderr.strip())


if __name__ == "__main__":
    main()

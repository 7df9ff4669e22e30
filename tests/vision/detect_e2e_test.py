#!/usr/bin/env python3
"""kiln detect end to end with a model, against PyTorch and the numpy decode.

Usage: detect_e2e_test.py KILN

Builds a small detector in PyTorch whose head has the Ultralytics YOLOv8
export layout, f32[1, 4 + 3, 6400] for a 640x640 input: per 8x8 cell of the
input, class scores that respond to red, green and blue (a 1x1 convolution
over the cell's mean color, then a sigmoid) and a box at the cell's center
whose size grows a little with the cell's brightness (sizes chosen so that no
two boxes overlap with an IoU near the threshold). Exports it to ONNX, draws a
640x480 PNG with colored squares (gradients inside, so that no two scores
tie), and runs `kiln detect -m` on it. The reference runs the same model in
PyTorch on the letterboxed input (the image needs no scaling: 80 rows of
114 above and below) and decodes the head with ref_yolo_decode.reference.
Both must find the same detections in the same order: classes equal, scores
within 1e-3, boxes within 0.05 pixels.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_yolo_decode  # noqa: E402

SIDE, STRIDE, CLASSES = 640, 8, 3


class TinyDetector(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = torch.nn.AvgPool2d(STRIDE, count_include_pad=False)  # no Pad node in the export
        self.score = torch.nn.Conv2d(3, CLASSES, 1)
        with torch.no_grad():
            self.score.weight.copy_((torch.eye(3) * 9 - 3).reshape(3, 3, 1, 1))
            self.score.bias.fill_(-3.0)
        cells = SIDE // STRIDE
        ys, xs = torch.meshgrid(torch.arange(cells), torch.arange(cells), indexing="ij")
        centers = torch.stack([(xs.flatten() + 0.5) * STRIDE, (ys.flatten() + 0.5) * STRIDE])
        self.register_buffer("centers", centers.float().unsqueeze(0))

    def forward(self, x):
        cell = self.pool(x)  # [1, 3, 80, 80]
        n = cell.shape[2] * cell.shape[3]
        scores = torch.sigmoid(self.score(cell)).reshape(1, CLASSES, n)
        size = (58 + 4 * cell.mean(1, keepdim=True)).reshape(1, 1, n)
        return torch.cat([self.centers, size, size * 1.25, scores], 1)


def picture():
    """Gray, with four 96x96 squares on the 8x8 cell grid of the input. Each
    cell of a square has its own mean color (a base value plus one more on
    some of its 64 pixels, in a shuffled order), so that scores never tie."""
    rng = np.random.default_rng(16)
    img = np.full((480, SIDE, 3), 128, np.uint8)
    for i, (y, x, c) in enumerate([(40, 64, 0), (200, 296, 1), (320, 480, 2), (96, 416, 0)]):
        img[y:y + 96, x:x + 96, :] = 20
        levels = 160 * 64 + rng.permutation(144) * 40 + i * 10  # in 1/64ths of a level
        for k, level in enumerate(levels):
            cy, cx = y + (k // 12) * 8, x + (k % 12) * 8
            cell = np.full(64, level // 64, np.uint8)
            cell[: level % 64] += 1
            img[cy:cy + 8, cx:cx + 8, c] = cell.reshape(8, 8)
    return img


def check_unambiguous(head):
    """No two candidates of a class overlap with an IoU within 0.005 of the
    threshold, and no two scores are within 1e-4: a rounding difference in
    the model cannot change which boxes NMS keeps or their order."""
    scores = head[0, 4:].max(0)
    keep = scores > 0.25
    cls = head[0, 4:].argmax(0)[keep]
    xywh = head[0, :4][:, keep].T
    boxes = np.stack([xywh[:, 0] - xywh[:, 2] / 2, xywh[:, 1] - xywh[:, 3] / 2,
                      xywh[:, 0] + xywh[:, 2] / 2, xywh[:, 1] + xywh[:, 3] / 2], 1)
    s = np.sort(scores[keep])
    assert np.all(np.diff(s) > 1e-4), "scores too close"
    for i in range(len(boxes)):
        same = np.nonzero(cls == cls[i])[0]
        iou = ref_yolo_decode.iou(boxes[i], boxes[same])
        assert not np.any(np.abs(iou - 0.45) < 0.005), "an IoU too close to the threshold"


def main():
    kiln = sys.argv[1]
    torch.manual_seed(0)
    model = TinyDetector().eval()
    img = picture()
    boxed = np.full((SIDE, SIDE, 3), 114, np.uint8)
    boxed[80:560] = img
    x = torch.from_numpy(boxed.transpose(2, 0, 1)[None].astype(np.float32) / 255)
    with torch.no_grad():
        head = model(x).numpy()
    want = ref_yolo_decode.reference(head, SIDE, 480, SIDE, 0.25, 0.45)
    check_unambiguous(head)
    with tempfile.TemporaryDirectory() as tmp:
        onnx_path = os.path.join(tmp, "detector.onnx")
        torch.onnx.export(model, x, onnx_path, opset_version=13, input_names=["images"], output_names=["output0"])
        image = os.path.join(tmp, "squares.png")
        ref_yolo_decode.write_png(image, img)
        out = os.path.join(tmp, "out.json")
        subprocess.run([kiln, "detect", "-m", onnx_path, "--image", image, "--json", out, "--threads", "2",
                        "--draw", os.path.join(tmp, "drawn.png")], check=True)
        with open(out) as f:
            got = json.load(f)["detections"]
    print(f"reference: {len(want)} detections, kiln: {len(got)}")
    assert len(want) >= 4, "each square should be found"
    assert len(got) == len(want), "detection counts differ"
    for i, (g, w) in enumerate(zip(got, want)):
        assert g["class"] == w["class"], (i, g, w)
        assert abs(g["score"] - w["score"]) <= 1e-3, (i, g, w)
        assert max(abs(a - b) for a, b in zip(g["box"], w["box"])) <= 0.05, (i, g, w)
    print("kiln detect agrees with PyTorch and the numpy decode")


if __name__ == "__main__":
    main()

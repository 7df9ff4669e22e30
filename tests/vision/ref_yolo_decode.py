#!/usr/bin/env python3
"""An independent decode and NMS of a YOLOv8 head output, compared with kiln's.

Usage: ref_yolo_decode.py KILN [--raw HEAD.npy --image IMG --input-size N]

Without --raw it writes a synthetic head, f32[1, 4 + 3, 8400] (clusters of
overlapping boxes of several classes among low-scored noise), and a 500x375
PNG; with --raw it takes a head saved from another runtime (onnxruntime's
output for IMG letterboxed to N). Then it decodes the head with numpy as
Ultralytics' non_max_suppression does (best class per anchor above --conf,
stable sort by score, greedy class-aware NMS at --iou, at most 300) and maps
the boxes back through the letterbox, runs `kiln detect --raw-output` on
the same head and image, and compares the two JSON results: the same
detections in the same order, boxes within 0.01 pixel, scores within 1e-4.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np


def write_png(path, rgb):
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(h))

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] == b"\x89PNG\r\n\x1a\n":
        return struct.unpack(">II", head[16:24])
    raise SystemExit("--image must be a PNG for the reference's own size reading")


def synthetic_head(rng, classes=3, anchors=8400, side=640):
    head = np.zeros((1, 4 + classes, anchors), np.float32)
    head[0, 0] = rng.uniform(0, side, anchors)
    head[0, 1] = rng.uniform(0, side, anchors)
    head[0, 2] = rng.uniform(4, 120, anchors)
    head[0, 3] = rng.uniform(4, 120, anchors)
    head[0, 4:] = rng.uniform(0, 0.2, (classes, anchors))
    # Clusters: a true box and jittered copies, some of another class.
    at = 0
    for _ in range(25):
        cx, cy = rng.uniform(40, side - 40, 2)
        w, h = rng.uniform(20, 200, 2)
        cls = rng.integers(classes)
        for _ in range(12):
            j = rng.normal(0, 0.08, 4)
            head[0, :4, at] = [cx + j[0] * w, cy + j[1] * h, w * (1 + j[2]), h * (1 + j[3])]
            c = cls if rng.uniform() < 0.8 else rng.integers(classes)
            head[0, 4 + c, at] = rng.uniform(0.2, 0.99)
            at += 1
    return head


def iou(box, boxes):
    x1 = np.maximum(box[0], boxes[:, 0])
    y1 = np.maximum(box[1], boxes[:, 1])
    x2 = np.minimum(box[2], boxes[:, 2])
    y2 = np.minimum(box[3], boxes[:, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area = lambda b: np.clip(b[..., 2] - b[..., 0], 0, None) * np.clip(b[..., 3] - b[..., 1], 0, None)
    union = area(box) + area(boxes) - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0)


def reference(head, width, height, side, conf, iou_threshold, max_det=300):
    scores = head[0, 4:, :]
    best = scores.argmax(0)
    best_score = scores.max(0)
    keep = best_score > conf
    xywh = head[0, :4][:, keep].T
    boxes = np.stack([xywh[:, 0] - xywh[:, 2] / 2, xywh[:, 1] - xywh[:, 3] / 2,
                      xywh[:, 0] + xywh[:, 2] / 2, xywh[:, 1] + xywh[:, 3] / 2], 1).astype(np.float32)
    cls = best[keep]
    sc = best_score[keep]
    order = np.argsort(-sc, kind="stable")[:30000]
    boxes, cls, sc = boxes[order], cls[order], sc[order]
    kept = []
    alive = np.ones(len(sc), bool)
    for i in range(len(sc)):
        if not alive[i]:
            continue
        kept.append(i)
        if len(kept) == max_det:
            break
        same = (cls == cls[i]) & alive
        same[: i + 1] = False
        idx = np.nonzero(same)[0]
        alive[idx[iou(boxes[i], boxes[idx]) > iou_threshold]] = False
    # The letterbox: r = min(side / h, side / w), round half to even (as
    # Python's round), padding split with round(d - 0.1).
    r = min(side / height, side / width)
    new_w, new_h = round(width * r), round(height * r)
    pad_x, pad_y = round((side - new_w) / 2 - 0.1), round((side - new_h) / 2 - 0.1)
    out = []
    for i in kept:
        b = boxes[i].astype(np.float64)
        b = [(b[0] - pad_x) / r, (b[1] - pad_y) / r, (b[2] - pad_x) / r, (b[3] - pad_y) / r]
        b = [min(max(b[0], 0), width), min(max(b[1], 0), height), min(max(b[2], 0), width), min(max(b[3], 0), height)]
        out.append({"box": b, "score": float(sc[i]), "class": int(cls[i])})
    return out


def check_refusals(kiln, tmp, image, raw):
    """A truncated image and a head of the wrong shape are errors that say so."""
    with open(image, "rb") as f:
        data = f.read()
    cut = os.path.join(tmp, "cut.png")
    with open(cut, "wb") as f:
        f.write(data[: len(data) // 2])
    bad_head = os.path.join(tmp, "bad_head.npy")
    np.save(bad_head, np.zeros((1, 4, 100), np.float32))
    for img, head, message in [(cut, raw, "truncated or corrupt"), (image, bad_head, "4 + classes")]:
        r = subprocess.run([kiln, "detect", "--raw-output", head, "--image", img, "--json",
                            os.path.join(tmp, "refused.json")], capture_output=True, text=True)
        assert r.returncode == 1 and message in r.stderr, (r.returncode, r.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kiln")
    ap.add_argument("--raw")
    ap.add_argument("--image")
    ap.add_argument("--input-size", type=int, default=640)
    ap.add_argument("--conf", type=float, default=0.25)
    ap.add_argument("--iou", type=float, default=0.45)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.raw:
            raw, image = args.raw, args.image
            head = np.load(raw).astype(np.float32)
        else:
            rng = np.random.default_rng(16)
            image = os.path.join(tmp, "image.png")
            write_png(image, rng.integers(0, 256, (375, 500, 3), dtype=np.uint8))
            head = synthetic_head(rng, side=args.input_size)
            raw = os.path.join(tmp, "head.npy")
            np.save(raw, head)
        width, height = png_size(image)
        if not args.raw:
            check_refusals(args.kiln, tmp, image, raw)
        out_json = os.path.join(tmp, "out.json")
        cmd = [args.kiln, "detect", "--raw-output", raw, "--image", image, "--json", out_json,
               "--input-size", str(args.input_size), "--conf", str(args.conf), "--iou", str(args.iou)]
        subprocess.run(cmd, check=True)
        with open(out_json) as f:
            got = json.load(f)
        want = reference(head, width, height, args.input_size, args.conf, args.iou)
    assert got["width"] == width and got["height"] == height, (got["width"], got["height"])
    dets = got["detections"]
    print(f"reference: {len(want)} detections, kiln: {len(dets)}")
    assert len(dets) == len(want), "detection counts differ"
    assert len(want) > 10, "the case should keep a fair number of boxes"
    for i, (g, w) in enumerate(zip(dets, want)):
        assert g["class"] == w["class"], (i, g, w)
        assert abs(g["score"] - w["score"]) <= 1e-4, (i, g, w)
        assert max(abs(a - b) for a, b in zip(g["box"], w["box"])) <= 0.01, (i, g, w)
    print("kiln detect's decode and NMS agree with the reference")


if __name__ == "__main__":
    main()

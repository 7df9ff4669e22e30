#!/usr/bin/python3
"""An independent decode of a YOLOv8-style detector's raw output (as
onnxruntime writes it), for checking `kiln detect`:

    yolo_reference_decode.py OUTPUT0.npy --image-size W,H --input-size W,H
                             [--conf 0.25] [--iou 0.45] [--max-det 300]
                             [--agnostic] [--json OUT.json]

OUTPUT0.npy is [1, 4 + classes, anchors]: cx, cy, w, h in input pixels, then
class scores. As Ultralytics' non_max_suppression does it (multi_label off):
each anchor takes its best class; anchors scoring at least --conf are kept;
boxes become corners; greedy NMS per class (boxes of different classes never
suppress each other, unless --agnostic) at IoU > --iou, highest score first;
at most --max-det boxes. Boxes are mapped back to the original picture by the
letterbox rule: gain = min(in_w / w, in_h / h), the scaled picture
round(w * gain) x round(h * gain) centred with the padding split evenly
(left = (in_w - round(w * gain)) // 2, same for top), then clipped to the
picture.

Prints (or writes) {"detections": [{"box": [x1, y1, x2, y2], "score": s,
"class": c}, ...]} in original-picture pixels, highest score first.
"""
import argparse
import json
import sys

import numpy as np


def pair(text):
    parts = text.split(",")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise argparse.ArgumentTypeError(f"expected W,H, got '{text}'")
    return int(parts[0]), int(parts[1])


def iou_one_to_many(box, boxes):
    x1 = np.maximum(box[0], boxes[:, 0])
    y1 = np.maximum(box[1], boxes[:, 1])
    x2 = np.minimum(box[2], boxes[:, 2])
    y2 = np.minimum(box[3], boxes[:, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    union = area + areas - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def nms(boxes, scores, classes, iou, agnostic):
    """Greedy NMS; returns kept indices, highest score first."""
    order = np.argsort(-scores, kind="stable")
    suppressed = np.zeros(len(order), bool)
    keep = []
    for rank, i in enumerate(order):
        if suppressed[rank]:
            continue
        keep.append(i)
        rest = order[rank + 1:]
        overlap = iou_one_to_many(boxes[i], boxes[rest]) > iou
        if not agnostic:
            overlap &= classes[rest] == classes[i]
        suppressed[rank + 1:] |= overlap
    return keep


def decode(output, image_size, input_size, conf=0.25, iou=0.45, max_det=300, agnostic=False):
    if output.ndim != 3 or output.shape[0] != 1 or output.shape[1] < 5:
        raise ValueError(f"expected [1, 4 + classes, anchors], got {list(output.shape)}")
    pred = output[0].astype(np.float64).T  # [anchors, 4 + classes]
    class_scores = pred[:, 4:]
    classes = class_scores.argmax(1)
    scores = class_scores[np.arange(len(pred)), classes]
    keep = scores >= conf
    pred, classes, scores = pred[keep], classes[keep], scores[keep]
    cx, cy, w, h = pred[:, 0], pred[:, 1], pred[:, 2], pred[:, 3]
    boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], 1)
    kept = nms(boxes, scores, classes, iou, agnostic)[:max_det]

    img_w, img_h = image_size
    in_w, in_h = input_size
    gain = min(in_w / img_w, in_h / img_h)
    left = (in_w - int(round(img_w * gain))) // 2
    top = (in_h - int(round(img_h * gain))) // 2
    detections = []
    for i in kept:
        x1, y1, x2, y2 = boxes[i]
        box = [(x1 - left) / gain, (y1 - top) / gain, (x2 - left) / gain, (y2 - top) / gain]
        box = [min(max(box[0], 0.0), img_w), min(max(box[1], 0.0), img_h),
               min(max(box[2], 0.0), img_w), min(max(box[3], 0.0), img_h)]
        detections.append({"box": [round(v, 3) for v in box], "score": round(float(scores[i]), 6),
                           "class": int(classes[i])})
    return detections


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output")
    parser.add_argument("--image-size", type=pair, required=True, help="original picture W,H")
    parser.add_argument("--input-size", type=pair, required=True, help="model input W,H")
    parser.add_argument("--conf", type=float, default=0.25)
    parser.add_argument("--iou", type=float, default=0.45)
    parser.add_argument("--max-det", type=int, default=300)
    parser.add_argument("--agnostic", action="store_true", help="NMS across classes")
    parser.add_argument("--json", help="write here instead of stdout")
    args = parser.parse_args(argv[1:])
    detections = decode(np.load(args.output), args.image_size, args.input_size, args.conf, args.iou,
                        args.max_det, args.agnostic)
    text = json.dumps({"detections": detections}, indent=1)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

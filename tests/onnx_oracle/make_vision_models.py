#!/usr/bin/python3
"""Exports the vision test models with random weights (fixed seeds) and
writes their inputs beside them:

    OMP_WAIT_POLICY=PASSIVE make_vision_models.py OUT_DIR [--only NAME,...] [--no-qdq]

OUT_DIR/<name>/model.onnx, OUT_DIR/<name>/inputs/<sanitized input name>.npy
and, for detectors, OUT_DIR/<name>/image.png (the picture the input tensor
was letterboxed from). OUT_DIR/manifest.json lists every model: its files,
input shapes (what `kiln run --input-shape` is given for dynamic ones),
opset, whether constants were folded, and whether it is QDQ-quantized.

The set covers the families kiln must run, exported in different ways (opset
7 to 17, with and without constant folding, BatchNormalization kept or fused,
dynamic batch and spatial dims, external data): torchvision's MobileNetV3-Small,
ShuffleNetV2 x0.5, SqueezeNet 1.1 and ResNet-18; a ViT-Tiny (patch 16, dim
192, 4 layers, 3 heads); a YOLOv8n-style detector at 320 and 640; QDQ int8
ResNet-18 and YOLOv8n (calibrated with onnxruntime: needs node and
tests/onnx_oracle/node_modules, see scripts/setup.sh).
"""
import argparse
import json
import multiprocessing
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import warnings
import zlib

import numpy as np
import onnx
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qdq_quantize  # noqa: E402
import yolo_model  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def sanitize(name):
    """The file name rule of ort_run.js and kiln run."""
    s = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    return "_" + s if s in ("", ".", "..") else s


# ----------------------------------------------------------------- weights

def randomize(model, seed, calibration_input):
    """Random weights that keep activations in a useful range, as trained
    networks have them: the constructors' own initialization (seeded), small
    random values where a constructor leaves zeros (classifier heads, class
    tokens, biases), BatchNorm statistics measured on a calibration input (so
    every layer sees normalized activations instead of a signal that fades
    with depth), and random BatchNorm scales and shifts."""
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.dtype.is_floating_point and p.numel() > 0 and bool((p == 0).all()):
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
        bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
        if bns:
            for m in bns:
                m.reset_running_stats()
                m.momentum = None  # a plain average over the calibration batch
            model.train()
            model(calibration_input)
            for m in bns:
                m.weight.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.2)
    return model.eval()


# ----------------------------------------------------------------- inputs

def synthetic_image(height, width, seed):
    """A deterministic picture with structure (a sky-to-ground gradient,
    filled rectangles and discs in several colours, mild noise), RGB uint8
    [height, width, 3]."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    img = np.stack([90 + 80 * y / height, 140 + 60 * x / width, 200 - 120 * y / height], -1)
    for _ in range(6):
        colour = rng.integers(0, 256, 3)
        cy, cx = rng.integers(0, height), rng.integers(0, width)
        if rng.random() < 0.5:
            h, w = rng.integers(height // 10, height // 3), rng.integers(width // 10, width // 3)
            img[max(0, cy - h // 2):cy + h // 2, max(0, cx - w // 2):cx + w // 2] = colour
        else:
            r = rng.integers(min(height, width) // 12, min(height, width) // 5)
            img[(y - cy) ** 2 + (x - cx) ** 2 <= r * r] = colour
    img += rng.normal(0, 6, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def letterbox(img, out_h, out_w, pad_value=114):
    """Ultralytics-style letterbox: scale to fit out_h x out_w keeping the
    aspect ratio (nearest-neighbour here), centre, pad with pad_value; then
    RGB float32 in [0, 1], NCHW."""
    h, w, _ = img.shape
    r = min(out_h / h, out_w / w)
    nh, nw = int(round(h * r)), int(round(w * r))
    ys = np.minimum((np.arange(nh) / r).astype(int), h - 1)
    xs = np.minimum((np.arange(nw) / r).astype(int), w - 1)
    resized = img[ys][:, xs]
    out = np.full((out_h, out_w, 3), pad_value, np.uint8)
    top, left = (out_h - nh) // 2, (out_w - nw) // 2
    out[top:top + nh, left:left + nw] = resized
    return (out.astype(np.float32) / 255.0).transpose(2, 0, 1)[None].copy()


def write_png(path, img):
    """RGB uint8 [h, w, 3] as an 8-bit PNG (zlib only)."""
    h, w, _ = img.shape
    raw = b"".join(b"\x00" + img[row].tobytes() for row in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(raw, 6)))
        f.write(chunk(b"IEND", b""))


def image_like_input(shape, seed):
    """ImageNet-normalized noise with some spatial smoothness."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    # Average each pixel with its right and lower neighbours.
    x = (x + np.roll(x, 1, -1) + np.roll(x, 1, -2)) / 3.0 * 1.5
    return x.astype(np.float32)


# ----------------------------------------------------------------- models

def vit_tiny():
    from torchvision.models.vision_transformer import VisionTransformer
    return VisionTransformer(image_size=224, patch_size=16, num_layers=4, num_heads=3,
                             hidden_dim=192, mlp_dim=768, num_classes=1000)


def torchvision_model(name):
    import torchvision.models as tvm
    return getattr(tvm, name)(weights=None)


# Each model: name, constructor (build), opset, constant folding (fold), the
# input shape it runs at, (input names, output names) or None for torch's
# defaults, and optionally dynamic axes, keep_bn (BatchNormalization nodes
# kept), initializers_as_inputs, external_data. Seeds differ per model.
CLASSIFIERS = [
    dict(name="mobilenet_v3_small", build=lambda: torchvision_model("mobilenet_v3_small"),
         opset=13, fold=True, shape=(1, 3, 224, 224), names=(["input"], ["logits"])),
    dict(name="mobilenet_v3_small_opset14_nofold", build=lambda: torchvision_model("mobilenet_v3_small"),
         opset=14, fold=False, shape=(1, 3, 224, 224), names=(["input"], ["logits"])),
    dict(name="shufflenet_v2_x0_5", build=lambda: torchvision_model("shufflenet_v2_x0_5"),
         opset=11, fold=True, shape=(1, 3, 224, 224), names=(["input"], ["logits"])),
    dict(name="shufflenet_v2_x0_5_dynamic", build=lambda: torchvision_model("shufflenet_v2_x0_5"),
         opset=13, fold=True, shape=(2, 3, 160, 192), names=(["input"], ["logits"]),
         dynamic={"input": {0: "batch", 2: "height", 3: "width"}, "logits": {0: "batch"}}),
    # Default names ("input.1" style), MaxPool with ceil_mode (opset 10+).
    dict(name="squeezenet1_1", build=lambda: torchvision_model("squeezenet1_1"),
         opset=10, fold=True, shape=(1, 3, 224, 224), names=(None, None)),
    dict(name="resnet18", build=lambda: torchvision_model("resnet18"),
         opset=17, fold=True, shape=(1, 3, 224, 224), names=(["input"], ["logits"])),
    # BatchNormalization nodes kept (eval mode, TrainingMode.PRESERVE), nothing folded.
    dict(name="resnet18_bn_nofold", build=lambda: torchvision_model("resnet18"),
         opset=9, fold=False, keep_bn=True, shape=(1, 3, 224, 224), names=(["input"], ["logits"])),
    dict(name="resnet18_dynamic_batch", build=lambda: torchvision_model("resnet18"),
         opset=12, fold=True, shape=(3, 3, 224, 224), names=(["input"], ["logits"]),
         dynamic={"input": {0: "N"}, "logits": {0: "N"}}),
    # Opset 7: Slice, Split and Reshape in their oldest forms (attributes, not inputs).
    dict(name="shufflenet_v2_x0_5_opset7", build=lambda: torchvision_model("shufflenet_v2_x0_5"),
         opset=7, fold=True, shape=(1, 3, 224, 224), names=(["input"], ["logits"])),
    # Initializers also listed as graph inputs (older exporters' default).
    dict(name="mobilenet_v3_small_initializers_as_inputs", build=lambda: torchvision_model("mobilenet_v3_small"),
         opset=11, fold=True, shape=(1, 3, 224, 224), names=(["input"], ["logits"]), initializers_as_inputs=True),
    # Weights in a separate file (ONNX external data), as exporters write large models.
    dict(name="resnet18_external_data", build=lambda: torchvision_model("resnet18"),
         opset=13, fold=True, shape=(1, 3, 224, 224), names=(["input"], ["logits"]), external_data=True),
    dict(name="vit_tiny_opset14", build=vit_tiny, opset=14, fold=True, shape=(1, 3, 224, 224),
         names=(["pixel_values"], ["logits"])),
    dict(name="vit_tiny_opset17_nofold", build=vit_tiny, opset=17, fold=False, shape=(1, 3, 224, 224),
         names=(["pixel_values"], ["logits"])),
]

# Detectors: size is the export resolution; run_shape the one inputs are made
# at (defaults to 1x3xsize x size).
DETECTORS = [
    dict(name="yolov8n_320", opset=12, fold=True, size=320),
    dict(name="yolov8n_640_nofold", opset=17, fold=False, size=640),
    # Dynamic height and width: the anchors come from Shape -> Range at run time.
    dict(name="yolov8n_dynamic", opset=13, fold=True, size=320, run_shape=(1, 3, 256, 320),
         dynamic={"images": {2: "height", 3: "width"}, "output0": {2: "anchors"}}),
]

# QDQ variants: the float model each is quantized from (exported, calibrated,
# then removed).
QDQ = [
    dict(name="resnet18_qdq", base=dict(name="resnet18_float13", build=lambda: torchvision_model("resnet18"),
                                        opset=13, fold=True, shape=(1, 3, 224, 224),
                                        names=(["input"], ["logits"]))),
    dict(name="yolov8n_320_qdq", base=dict(name="yolov8n_320_float13", opset=13, fold=True, size=320)),
]


def export(model, args, path, opset, fold, names, dynamic=None, keep_bn=False, initializers_as_inputs=False):
    input_names, output_names = names
    training = torch.onnx.TrainingMode.PRESERVE if keep_bn else torch.onnx.TrainingMode.EVAL
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, args, path, opset_version=opset, do_constant_folding=fold,
                          input_names=input_names, output_names=output_names,
                          dynamic_axes=dynamic, training=training,
                          keep_initializers_as_inputs=initializers_as_inputs)
    m = onnx.load(path)
    onnx.checker.check_model(m)
    return m


def save_inputs(out_dir, model_dir, onnx_model, arrays):
    """arrays: list of numpy arrays in graph input order; returns name -> path."""
    os.makedirs(os.path.join(model_dir, "inputs"), exist_ok=True)
    init_names = {t.name for t in onnx_model.graph.initializer}
    graph_inputs = [i.name for i in onnx_model.graph.input if i.name not in init_names]
    assert len(graph_inputs) == len(arrays), (graph_inputs, len(arrays))
    files = {}
    for name, a in zip(graph_inputs, arrays):
        p = os.path.join(model_dir, "inputs", sanitize(name) + ".npy")
        np.save(p, a)
        files[name] = os.path.relpath(p, out_dir)
    return files


def opset_of(m):
    return next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))


def build_classifier(spec, out_dir, seed):
    torch.manual_seed(seed)
    x = image_like_input(spec["shape"], seed)
    calibration = np.concatenate([x, image_like_input(spec["shape"], seed + 7)])
    model = randomize(spec["build"](), seed, torch.from_numpy(calibration))
    model_dir = os.path.join(out_dir, spec["name"])
    os.makedirs(model_dir, exist_ok=True)
    path = os.path.join(model_dir, "model.onnx")
    m = export(model, torch.from_numpy(x), path, spec["opset"], spec["fold"], spec["names"],
               spec.get("dynamic"), spec.get("keep_bn", False), spec.get("initializers_as_inputs", False))
    if spec.get("external_data"):
        onnx.save(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
                  location="model.onnx.data", size_threshold=1024)
    inputs = save_inputs(out_dir, model_dir, m, [x])
    return dict(name=spec["name"], family="classifier", model=os.path.relpath(path, out_dir),
                inputs=inputs, input_shapes={n: list(spec["shape"]) for n in inputs},
                dynamic=bool(spec.get("dynamic")), opset=opset_of(m), constant_folding=spec["fold"],
                quantized=False)


def build_detector(spec, out_dir, seed):
    torch.manual_seed(seed)
    size = spec["size"]
    run_shape = spec.get("run_shape", (1, 3, size, size))
    picture = synthetic_image(360, 480, seed)
    x = letterbox(picture, run_shape[2], run_shape[3])
    calibration = np.concatenate([letterbox(picture, size, size),
                                  letterbox(synthetic_image(480, 360, seed + 7), size, size)])
    model = yolo_model.YoloV8(nc=80)
    randomize(model, seed, torch.from_numpy(calibration))
    yolo_model.calibrate_class_head(model, torch.from_numpy(calibration))
    model_dir = os.path.join(out_dir, spec["name"])
    os.makedirs(model_dir, exist_ok=True)
    write_png(os.path.join(model_dir, "image.png"), picture)
    path = os.path.join(model_dir, "model.onnx")
    export_x = torch.zeros(1, 3, size, size) if spec.get("dynamic") else torch.from_numpy(x)
    m = export(model, export_x, path, spec["opset"], spec["fold"], (["images"], ["output0"]),
               spec.get("dynamic"))
    inputs = save_inputs(out_dir, model_dir, m, [x])
    return dict(name=spec["name"], family="detector", model=os.path.relpath(path, out_dir),
                inputs=inputs, input_shapes={n: list(run_shape) for n in inputs},
                dynamic=bool(spec.get("dynamic")), opset=opset_of(m), constant_folding=spec["fold"],
                quantized=False, image=os.path.relpath(os.path.join(model_dir, "image.png"), out_dir),
                letterbox=dict(size=size, pad_value=114, rgb=True, scale="1/255"))


def calibrate_and_quantize(entry, out_dir, name, seed):
    """Runs the float model (every intermediate exposed) on three calibration
    inputs with onnxruntime, then writes the QDQ model beside it."""
    float_path = os.path.join(out_dir, entry["model"])
    input_name, input_file = next(iter(entry["inputs"].items()))
    x = np.load(os.path.join(out_dir, input_file))
    tmp = tempfile.mkdtemp(prefix="kiln-qdq-calib-")
    try:
        jobs = []
        for k in range(3):
            calib = x if k == 0 else np.clip(
                x + np.random.default_rng(seed + k).normal(0, 0.1, x.shape).astype(np.float32),
                x.min(), x.max())
            np.save(os.path.join(tmp, f"calib{k}.npy"), calib)
            jobs.append(dict(model=float_path, inputs={input_name: f"calib{k}.npy"},
                             output_dir=f"out{k}", all_intermediates=True))
        with open(os.path.join(tmp, "jobs.json"), "w") as f:
            json.dump(jobs, f)
        subprocess.run(["node", os.path.join(HERE, "ort_run.js"), "--jobs", os.path.join(tmp, "jobs.json")],
                       check=True, stdout=subprocess.DEVNULL)

        def arrays(tensor):
            if tensor == input_name:
                return [np.load(os.path.join(tmp, f"calib{k}.npy")) for k in range(3)]
            return [np.load(os.path.join(tmp, f"out{k}", sanitize(tensor) + ".npy")) for k in range(3)]

        q = qdq_quantize.quantize(onnx.load(float_path), arrays)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    model_dir = os.path.join(out_dir, name)
    os.makedirs(os.path.join(model_dir, "inputs"), exist_ok=True)
    onnx.save(q, os.path.join(model_dir, "model.onnx"))
    inputs = {}
    for n, rel in entry["inputs"].items():
        dst = os.path.join(model_dir, "inputs", os.path.basename(rel))
        shutil.copyfile(os.path.join(out_dir, rel), dst)
        inputs[n] = os.path.relpath(dst, out_dir)
    result = dict(entry, name=name, model=os.path.join(name, "model.onnx"), inputs=inputs, quantized=True)
    if "image" in entry:
        shutil.copyfile(os.path.join(out_dir, entry["image"]), os.path.join(model_dir, "image.png"))
        result["image"] = os.path.join(name, "image.png")
    return result


def build_one(kind, index, out_dir):
    """Builds one model of the lists above; returns its manifest entry."""
    torch.set_num_threads(1)
    t0 = time.monotonic()
    if kind == "classifier":
        spec = CLASSIFIERS[index]
        entry = build_classifier(spec, out_dir, 1000 + index)
    elif kind == "detector":
        spec = DETECTORS[index]
        entry = build_detector(spec, out_dir, 2000 + index)
    else:
        spec = QDQ[index]
        base = spec["base"]
        builder = build_detector if "size" in base else build_classifier
        float_entry = builder(base, out_dir, 3000 + index)
        entry = calibrate_and_quantize(float_entry, out_dir, spec["name"], 3000 + index)
        shutil.rmtree(os.path.join(out_dir, base["name"]))
    print(f"  {spec['name']} ({time.monotonic() - t0:.1f} s)", file=sys.stderr, flush=True)
    return entry


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--only", help="comma-separated model names")
    parser.add_argument("--no-qdq", action="store_true", help="skip the QDQ models (they need onnxruntime)")
    parser.add_argument("--jobs", type=int, default=2, help="models exported at the same time (default 2)")
    args = parser.parse_args()
    out_dir = os.path.abspath(args.out_dir)
    os.makedirs(out_dir, exist_ok=True)
    only = set(args.only.split(",")) if args.only else None
    wanted = lambda name: only is None or name in only  # noqa: E731

    tasks = [("classifier", i) for i, s in enumerate(CLASSIFIERS) if wanted(s["name"])]
    tasks += [("detector", i) for i, s in enumerate(DETECTORS) if wanted(s["name"])]
    if not args.no_qdq:
        tasks += [("qdq", i) for i, s in enumerate(QDQ) if wanted(s["name"])]
    started = time.monotonic()
    # The exports are single-threaded work: one process per core. Forked
    # before torch has started any thread pool.
    if args.jobs > 1 and len(tasks) > 1:
        with multiprocessing.get_context("fork").Pool(min(args.jobs, len(tasks))) as pool:
            entries = pool.starmap(build_one, [(kind, i, out_dir) for kind, i in tasks])
    else:
        entries = [build_one(kind, i, out_dir) for kind, i in tasks]

    # With --only, the other models' entries of an earlier run stay listed.
    manifest_path = os.path.join(out_dir, "manifest.json")
    if only is not None and os.path.exists(manifest_path):
        with open(manifest_path) as f:
            earlier = json.load(f)["models"]
        made = {e["name"] for e in entries}
        entries = [e for e in earlier if e["name"] not in made] + entries
    with open(manifest_path, "w") as f:
        json.dump({"models": entries}, f, indent=1)
    print(f"{len(entries)} models in {out_dir} ({time.monotonic() - started:.1f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

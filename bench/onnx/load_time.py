#!/usr/bin/python3
"""In-process load time of ONNX models and compiled artifacts.

    KILN_LIBRARY=build/src/libkiln.so PYTHONPATH=python \\
        bench/onnx/load_time.py MODEL [MODEL ...] [--runs 11] [--rounds 3]

For each model (.onnx or .kiln), in turns: `kiln.Model(path)` (the library
already loaded), then its first run on random inputs, timed apart; prints
the medians per round. Models given as .onnx and as an artifact of it
compute the same bits: the outputs of their last runs are compared.
"""
import argparse
import statistics
import time

import numpy as np

import kiln


def measure(path, runs, rng):
    loads, firsts, last = [], [], None
    for _ in range(runs):
        start = time.perf_counter()
        model = kiln.Model(path)
        loaded = time.perf_counter()
        feeds = {}
        for info in model.inputs:
            shape = [d if d else 1 for d in info.shape]
            feeds[info.name] = rng.standard_normal(shape).astype(np.float32)
        last = model.run(feeds)
        done = time.perf_counter()
        loads.append((loaded - start) * 1e3)
        firsts.append((done - loaded) * 1e3)
        del model
    return statistics.median(loads), statistics.median(firsts), last


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+")
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    outputs = {}
    for r in range(args.rounds):
        for path in args.models:
            load, first, out = measure(path, args.runs, np.random.default_rng(0))
            print(f"round {r + 1} {path}: load {load:.2f} ms, first run {first:.2f} ms (medians of {args.runs})")
            outputs[path] = out
    values = [list(o.values()) if isinstance(o, dict) else list(o) for o in outputs.values()]
    same = all(len(v) == len(values[0]) and all(np.array_equal(a, b) for a, b in zip(v, values[0])) for v in values)
    print("outputs equal across models" if same else "outputs DIFFER across models")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Perplexity of the GGUF files against llama.cpp's goldens.

Runs `kiln eval --perplexity heldout.txt --ctx 256 --json` on GGUF files of
../shared/models/gguf and checks, per file, that the perplexity is within
0.2% of both goldens in goldens.json: llama.cpp's (`perplexity.ppl`) and the
PyTorch reference on the file's dequantized weights
(`pytorch_f32_dequantized_weights.ppl_same_method`); and that the chunking
is llama.cpp's (`perplexity.n_chunks`, the number of scored tokens in
`models.<model>.ppl_method_n_scored`).

usage: gguf_perplexity_check.py KILN SHARED_DIR [--files all|quick|NAME,...] [--shard K/N] [--threads N]

--shard K/N checks every N-th file of the list from the K-th (1-based), so
that CTest runs the shards of the whole list side by side.
"""
import argparse
import json
import os
import subprocess
import sys
import time

# One file per block format family, from each model: the quick set.
QUICK = [
    "tiny-llama-Q4_0.gguf",
    "tiny-qwen2-Q5_K_M.gguf",
    "tiny-qwen3-Q4_K_M.gguf",
    "tiny-qwen3-Q2_K.gguf",
]
TOLERANCE = 0.002


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("kiln")
    parser.add_argument("shared")
    parser.add_argument("--files", default="quick")
    parser.add_argument("--shard", default="1/1")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    shard, num_shards = (int(x) for x in args.shard.split("/"))
    if not 1 <= shard <= num_shards:
        parser.error(f"--shard {args.shard}: K must be within 1..N")

    gguf_dir = os.path.join(args.shared, "models", "gguf")
    heldout = os.path.join(args.shared, "data", "text", "heldout.txt")
    with open(os.path.join(gguf_dir, "goldens.json")) as f:
        goldens = json.load(f)
    if args.files == "all":
        files = sorted(goldens["files"])
    elif args.files == "quick":
        files = QUICK
    else:
        files = args.files.split(",")
    files = files[shard - 1::num_shards]

    failures = []
    total_seconds = 0.0
    print(f"{'file':<26} {'kiln':>9} {'llama.cpp':>9} {'diff':>8} {'dequant':>9} {'diff':>8} {'seconds':>8}")
    for name in files:
        golden = goldens["files"][name]
        model = goldens["models"][golden["model"]]
        cmd = [args.kiln, "eval", "-m", os.path.join(gguf_dir, name), "--perplexity", heldout, "--ctx", "256",
               "--threads", str(args.threads), "--json"]
        start = time.monotonic()
        run = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})
        seconds = time.monotonic() - start
        total_seconds += seconds
        if run.returncode != 0:
            failures.append(f"{name}: kiln eval failed ({run.returncode}): {run.stderr.strip()}")
            continue
        result = json.loads(run.stdout)
        llama = golden["perplexity"]["ppl"]
        torch = golden["pytorch_f32_dequantized_weights"]["ppl_same_method"]
        d_llama = result["ppl"] / llama - 1
        d_torch = result["ppl"] / torch - 1
        print(f"{name:<26} {result['ppl']:9.4f} {llama:9.4f} {100 * d_llama:7.3f}% {torch:9.4f} {100 * d_torch:7.3f}% "
              f"{seconds:8.1f}")
        if abs(d_llama) > TOLERANCE:
            failures.append(f"{name}: {result['ppl']:.4f} is {100 * d_llama:.3f}% from llama.cpp's {llama}")
        if abs(d_torch) > TOLERANCE:
            failures.append(f"{name}: {result['ppl']:.4f} is {100 * d_torch:.3f}% from the dequantized reference's "
                            f"{torch:.4f}")
        if result["n_chunks"] != golden["perplexity"]["n_chunks"]:
            failures.append(f"{name}: {result['n_chunks']} chunks, llama.cpp {golden['perplexity']['n_chunks']}")
        if result["n_scored"] != model["ppl_method_n_scored"]:
            failures.append(f"{name}: {result['n_scored']} tokens scored, expected {model['ppl_method_n_scored']}")
        stderr_golden = golden["perplexity"]["ppl_stderr"]
        if abs(result["ppl_stderr"] / stderr_golden - 1) > 0.01:
            failures.append(f"{name}: +/- {result['ppl_stderr']:.5f}, llama.cpp's {stderr_golden}")
    print(f"{len(files)} files in {total_seconds:.1f} s")
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

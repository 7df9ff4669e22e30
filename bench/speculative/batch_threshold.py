"""Where speculative decoding stops paying as the batch grows, on this
machine: (1) the cost of a pass over 5 tokens per sequence (4 draft tokens
verified) against a pass over one, for B sequences at once, on the tiny
shared models and the Qwen2.5-0.5B shape; (2) `kiln bench latency` decode
tokens/s with --spec-method ngram (no batch limit, and the default limit)
against without, interleaved,
greedy, on prompts of random tokens said twice, for the same batch sizes
(the tiny models do not quote such a prompt, but their greedy text repeats
itself, which prompt lookup finds). Medians of RUNS runs. The engine's --spec-max-batch default is the
largest batch at which (2) still gained on every tiny model.

Run from the repository root after building kiln_cli:
  OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/speculative/batch_threshold.py
(KILN_CLI / KILN_SHARED_DIR / THREADS / RUNS / BATCHES / SKIP_05B / SKIP_PASS_COST
override the defaults)."""

import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]
SHARED = pathlib.Path(os.environ.get("KILN_SHARED_DIR", REPO.parent / "shared"))
CLI = os.environ.get("KILN_CLI", str(REPO / "build" / "bin" / "kiln"))
RUNS = int(os.environ.get("RUNS", "5"))
BATCHES = [int(b) for b in os.environ.get("BATCHES", "1,2,4,8,16,32").split(",")]


def latency(model_args, extra, threads, runs=RUNS):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "latency.json")
        subprocess.run([CLI, "bench", "latency", *model_args, "--batch-size", ",".join(map(str, BATCHES)),
                        "--warmup", "1", "--runs", str(runs), "--threads", str(threads), "--no-roofline",
                        "--json", out, *extra], capture_output=True, text=True, check=True)
        with open(out, encoding="utf-8") as f:
            return {r["batch_size"]: r for r in json.load(f)["results"]}


def pass_cost_table(name, model_args, threads):
    """Per batch size: the median prefill of B prompts of 5 tokens (one pass
    over 5B tokens) over the median decode pass (B tokens)."""
    rows = latency(model_args, ["--input-len", "5", "--output-len", "9"], threads)
    for b in BATCHES:
        one, five = rows[b]["tpot_s"]["median"], rows[b]["prefill_s"]["median"]
        print(f"| {name} | {b} | {one * 1e3:.2f} ms | {five * 1e3:.2f} ms | **{five / one:.2f}x** |")
        sys.stdout.flush()


def speedup_table(name, model_args, threads):
    """Decode tokens/s per batch size without speculation, with it and no
    batch limit, and with the default --spec-max-batch: the three runs
    interleaved, RUNS times, so that a shared machine's drifting load
    touches them alike; medians."""
    common = ["--input-len", "128", "--output-len", "64", "--repeated-prompt", "--temperature", "0"]
    configs = {"plain": [], "unlimited": ["--spec-method", "ngram", "--spec-max-batch", "0"],
               "default": ["--spec-method", "ngram"]}
    rates = {c: {b: [] for b in BATCHES} for c in configs}
    accepted = {b: [] for b in BATCHES}
    for _ in range(RUNS):
        for config, extra in configs.items():
            rows = latency(model_args, common + extra, threads, runs=1)
            for b in BATCHES:
                rates[config][b].append(rows[b]["decode_tokens_per_s"]["median"])
                if config == "unlimited":
                    accepted[b].append(rows[b]["speculation"]["accepted_per_pass"])
    for b in BATCHES:
        p, s, d = (statistics.median(rates[c][b]) for c in configs)
        print(f"| {name} | {b} | {p:.0f} | {s:.0f} | **{s / p:.2f}x** | {statistics.median(accepted[b]):.2f} | "
              f"{d:.0f} | **{d / p:.2f}x** |")
        sys.stdout.flush()


def main():
    threads = int(os.environ.get("THREADS", "2"))
    print(f"threads {threads}, load average {os.getloadavg()[0]:.1f} at start")
    tiny = [(n, ["-m", str(SHARED / "models" / n)]) for n in ("tiny-llama", "tiny-qwen2", "tiny-qwen3")]
    if not os.environ.get("SKIP_PASS_COST"):
        print("\n| model | batch | pass over 1 token per sequence | over 5 | ratio |")
        print("|---|---|---|---|---|")
        for name, args in tiny:
            pass_cost_table(name, args, threads)
    if not os.environ.get("SKIP_PASS_COST") and not os.environ.get("SKIP_05B"):
        for dtype in ("bf16", "q4_0"):
            pass_cost_table(f"Qwen2.5-0.5B shape {dtype}",
                            ["--load-format", "dummy", "--preset", "qwen2.5-0.5b", "--dtype", dtype], threads)
    print("\n| model | batch | decode tokens/s without | with ngram, no batch limit | speed-up | accepted per pass "
          "| with ngram, default --spec-max-batch | speed-up |")
    print("|---|---|---|---|---|---|---|---|")
    for name, args in tiny:
        speedup_table(name, args, threads)
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()

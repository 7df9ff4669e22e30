"""Speculative decoding on this machine: (1) the cost of one forward pass
over k+1 = 5 tokens of one sequence (what verifying 4 draft tokens costs)
against a pass over one token (plain decoding), on the Qwen2.5-0.5B shape
at BF16, Q8_0 and Q4_0; (2) `kiln generate` decode tokens/s with and without
--spec-method ngram on an input-grounded prompt (a passage of held-out text
repeated, then its first words) and on free text. Medians of 5 runs.

Run from the repository root after building kiln_cli:
  OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/speculative/measure.py
(KILN_CLI / KILN_SHARED_DIR / THREADS / RUNS override the defaults; PASS_COST=0
skips part (1), MODELS, a comma-separated list, limits part (2) to those
models)."""

import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

from ab_runs import alternate
from prompts import spec_prompts

REPO = pathlib.Path(__file__).resolve().parents[2]
SHARED = pathlib.Path(os.environ.get("KILN_SHARED_DIR", REPO.parent / "shared"))
CLI = os.environ.get("KILN_CLI", str(REPO / "build" / "bin" / "kiln"))
RUNS = int(os.environ.get("RUNS", "5"))


def pass_cost(dtype, threads):
    """Median seconds of a pass over k+1 = 5 prompt tokens (the time to
    first token of a 5-token prompt) and of a decode pass over one token
    (the time per output token after it), on the Qwen2.5-0.5B shape."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "latency.json")
        subprocess.run([CLI, "bench", "latency", "--load-format", "dummy", "--preset", "qwen2.5-0.5b", "--dtype",
                        dtype, "--input-len", "5", "--output-len", "9", "--batch-size", "1", "--warmup", "1",
                        "--runs", str(RUNS), "--threads", str(threads), "--no-roofline", "--json", out],
                       capture_output=True, text=True, check=True)
        with open(out, encoding="utf-8") as f:
            result = json.load(f)["results"][0]
    return result["tpot_s"]["median"], result["ttft_s"]["median"]


def decode_rate(model, prompt, spec, max_tokens, threads):
    args = [CLI, "generate", "-m", model, "-p", prompt, "-n", str(max_tokens), "--ignore-eos",
            "--temperature", "0", "--threads", str(threads)]
    if spec:
        args += ["--spec-method", "ngram"]
    run = subprocess.run(args, capture_output=True, text=True, check=True)
    decode = re.search(r"decode: (\d+) tokens in ([\d.]+) s", run.stderr)
    accepted = re.search(r"([\d.]+) accepted per verification pass", run.stderr)
    return (int(decode.group(1)) / float(decode.group(2)), float(accepted.group(1)) if accepted else 0.0,
            run.stdout)


def main():
    threads = int(os.environ.get("THREADS", "2"))
    print(f"threads {threads}, load average {os.getloadavg()[0]:.1f} at start")
    print("\n| model | dtype | pass over 1 token | over 5 tokens | ratio |")
    print("|---|---|---|---|---|")
    for dtype in ("bf16", "q8_0", "q4_0") if os.environ.get("PASS_COST", "1") != "0" else ():
        one, five = pass_cost(dtype, threads)
        print(f"| Qwen2.5-0.5B shape | {dtype} | {one * 1e3:.1f} ms | {five * 1e3:.1f} ms | **{five / one:.2f}x** |")
        sys.stdout.flush()

    grounded = spec_prompts(SHARED)
    prompts = {"input-grounded": grounded["input-grounded (repeated)"], "free text": grounded["free text"]}
    print("\n| model | prompt | decode tokens/s without | with ngram | speed-up | accepted per pass | same text |")
    print("|---|---|---|---|---|---|---|")
    names = os.environ.get("MODELS", "tiny-llama,tiny-qwen2,tiny-qwen3").split(",")
    for name in names:
        model = str(SHARED / "models" / name)
        for kind, prompt in prompts.items():
            p, f, accepted, same = alternate(lambda: decode_rate(model, prompt, False, 128, threads),
                                             lambda: decode_rate(model, prompt, True, 128, threads), RUNS)
            print(f"| {name} | {kind} | {p:.0f} | {f:.0f} | **{f / p:.2f}x** | {accepted:.2f} | "
                  f"{'yes' if same else 'NO'} |")
            sys.stdout.flush()
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()

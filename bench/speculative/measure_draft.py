"""Speculative decoding with a draft model on this machine: `kiln generate`
decode tokens/s without a draft and with `--spec-method draft` (the model
drafting for itself at q4_0, `--draft-model self --draft-dtype q4_0`, and
tiny-qwen2 drafting for tiny-qwen3, which share a tokenizer), and the draft
tokens accepted per verification pass, on input-grounded prompts (a passage
of held-out text repeated, or repeated with words dropped, then its first
words) and on free text. Medians of 5 runs; every run checks that the text
is the same as without a draft. The decode rate with a draft counts the
drafting (`kiln generate`'s decode line includes it).

Run from the repository root after building kiln_cli:
  OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/speculative/measure_draft.py
(KILN_CLI / KILN_SHARED_DIR / THREADS / RUNS / NEW_TOKENS override the defaults; MODELS,
a comma-separated list, keeps the setups of those target models)."""

import os
import pathlib
import re
import subprocess
import sys

from ab_runs import alternate
from prompts import spec_prompts

REPO = pathlib.Path(__file__).resolve().parents[2]
SHARED = pathlib.Path(os.environ.get("KILN_SHARED_DIR", REPO.parent / "shared"))
CLI = os.environ.get("KILN_CLI", str(REPO / "build" / "bin" / "kiln"))
RUNS = int(os.environ.get("RUNS", "5"))
NEW_TOKENS = int(os.environ.get("NEW_TOKENS", "128"))


def generate(model, prompt, draft, threads, cli=None):
    """(decode tokens/s, draft tokens accepted per verification pass, text),
    from the kiln at `cli` (default CLI)."""
    args = [cli or CLI, "generate", "-m", model, "-p", prompt, "-n", str(NEW_TOKENS), "--ignore-eos", "--temperature", "0",
            "--threads", str(threads)]
    args += draft
    run = subprocess.run(args, capture_output=True, text=True, check=True)
    decode = re.search(r"decode: (\d+) tokens in ([\d.]+) s", run.stderr)
    accepted = re.search(r"([\d.]+) accepted per verification pass", run.stderr)
    return (int(decode.group(1)) / float(decode.group(2)), float(accepted.group(1)) if accepted else 0.0,
            run.stdout)


def main():
    threads = int(os.environ.get("THREADS", "2"))
    print(f"threads {threads}, load average {os.getloadavg()[0]:.1f} at start")
    prompts = spec_prompts(SHARED)
    self_q4 = ["--spec-method", "draft", "--draft-model", "self", "--draft-dtype", "q4_0"]
    setups = [(name, name, "self q4_0", self_q4) for name in ("tiny-llama", "tiny-qwen2", "tiny-qwen3")]
    setups.append(("tiny-qwen3", "tiny-qwen3", "tiny-qwen2",
                   ["--spec-method", "draft", "--draft-model", str(SHARED / "models" / "tiny-qwen2")]))
    if os.environ.get("MODELS"):
        setups = [s for s in setups if s[1] in os.environ["MODELS"].split(",")]
    print("\n| model | draft | prompt | decode tokens/s without | with draft | speed-up | draft tokens accepted "
          "per pass | same text |")
    print("|---|---|---|---|---|---|---|---|")
    for name, model_name, draft_name, draft in setups:
        model = str(SHARED / "models" / model_name)
        for kind, prompt in prompts.items():
            p, f, accepted, same = alternate(lambda: generate(model, prompt, [], threads),
                                             lambda: generate(model, prompt, draft, threads), RUNS)
            print(f"| {name} | {draft_name} | {kind} | {p:.0f} | {f:.0f} | **{f / p:.2f}x** | "
                  f"{accepted:.2f} | {'yes' if same else 'NO'} |")
            sys.stdout.flush()
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()

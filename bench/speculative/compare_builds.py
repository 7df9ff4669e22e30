"""Two builds of kiln side by side on speculative decoding: for each model,
draft setup (the model drafting for itself at q4_0, and prompt lookup) and
prompt (prompts.py), `kiln generate` decode tokens/s without speculation
and with it, under the base build (BASE_CLI) and this one (KILN_CLI). The
four runs of a round alternate, so that the machine's slow minutes fall on
all alike; each build's speed-up is its rate with speculation over its
rate without in the same round. Prints the median speed-up of RUNS rounds
(5) with the lowest and highest, and whether every run gave the plain
text.

Run from the repository root after building kiln_cli:
  BASE_CLI=path/to/other/kiln OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/speculative/compare_builds.py
(KILN_SHARED_DIR / THREADS / RUNS / NEW_TOKENS (128) / MODELS / SETUPS
(self,ngram) / PROMPTS (a comma-separated list of prompts.py's kinds)
override the defaults)."""

import os
import pathlib
import statistics
import sys

from measure_draft import generate
from prompts import spec_prompts

REPO = pathlib.Path(__file__).resolve().parents[2]
SHARED = pathlib.Path(os.environ.get("KILN_SHARED_DIR", REPO.parent / "shared"))
CLI = os.environ.get("KILN_CLI", str(REPO / "build" / "bin" / "kiln"))
RUNS = int(os.environ.get("RUNS", "5"))


def run(cli, model, prompt, spec, threads):
    return generate(model, prompt, spec, threads, cli)


def main():
    base = os.environ["BASE_CLI"]
    threads = int(os.environ.get("THREADS", "2"))
    print(f"threads {threads}, {RUNS} rounds, load average {os.getloadavg()[0]:.1f} at start")
    setups = {"self": ["--spec-method", "draft", "--draft-model", "self", "--draft-dtype", "q4_0"],
              "ngram": ["--spec-method", "ngram"]}
    setups = {k: v for k, v in setups.items() if k in os.environ.get("SETUPS", "self,ngram").split(",")}
    print("\n| model | drafts | prompt | base speed-up (min-max) | this speed-up (min-max) | "
          "this plain / base plain | same text |")
    print("|---|---|---|---|---|---|---|")
    for name in os.environ.get("MODELS", "tiny-llama,tiny-qwen2").split(","):
        model = str(SHARED / "models" / name)
        for setup, spec in setups.items():
            prompts = spec_prompts(SHARED)
            kinds = os.environ["PROMPTS"].split(",") if os.environ.get("PROMPTS") else list(prompts)
            for kind in kinds:
                prompt = prompts[kind]
                base_ratio, this_ratio, plain_ratio, same = [], [], [], True
                for _ in range(RUNS):
                    bp, _, text = run(base, model, prompt, [], threads)
                    bs, _, base_text = run(base, model, prompt, spec, threads)
                    tp, _, this_plain = run(CLI, model, prompt, [], threads)
                    ts, _, this_text = run(CLI, model, prompt, spec, threads)
                    base_ratio.append(bs / bp)
                    this_ratio.append(ts / tp)
                    plain_ratio.append(tp / bp)
                    same = same and text == base_text == this_plain == this_text
                fmt = lambda r: f"{statistics.median(r):.2f}x ({min(r):.2f}-{max(r):.2f})"
                print(f"| {name} | {setup} | {kind} | {fmt(base_ratio)} | **{fmt(this_ratio)}** | "
                      f"{fmt(plain_ratio)} | {'yes' if same else 'NO'} |")
                sys.stdout.flush()
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()

"""Whether the tiny models' greedy continuation of the input-grounded prompts
(bench/speculative/measure.py and measure_draft.py) actually quotes the
prompt, which is what prompt lookup (--spec-method ngram) needs. For each
model and prompt, over 128 greedy tokens: how many characters continue the
passage verbatim (the prompt ends with the passage's first 80 characters),
the share of output characters inside a stretch of at least 12 characters
found in the prompt, and the share inside one found earlier in the output
(the model repeating itself, which prompt lookup also finds).

Run from the repository root after building kiln_cli:
  OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/speculative/grounding.py
(KILN_CLI / KILN_SHARED_DIR override the defaults)."""

import os
import pathlib
import subprocess

from prompts import grounding_passage, spec_prompts

REPO = pathlib.Path(__file__).resolve().parents[2]
SHARED = pathlib.Path(os.environ.get("KILN_SHARED_DIR", REPO.parent / "shared"))
CLI = os.environ.get("KILN_CLI", str(REPO / "build" / "bin" / "kiln"))
MIN_STRETCH = 12


def covered_share(text, source_of):
    """Share of text's characters inside a stretch of MIN_STRETCH or more
    characters that source_of(start) contains (source_of gives the text a
    stretch starting at `start` may be copied from)."""
    covered = [False] * len(text)
    for start in range(len(text) - MIN_STRETCH + 1):
        if text[start:start + MIN_STRETCH] in source_of(start):
            for i in range(start, start + MIN_STRETCH):
                covered[i] = True
    return sum(covered) / max(1, len(text))


def common_prefix(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def main():
    prompts = spec_prompts(SHARED)
    passage = grounding_passage(SHARED)
    print(f"| model | prompt | characters continuing the passage verbatim | output in {MIN_STRETCH}+ character "
          "stretches of the prompt | in stretches of its own earlier output |")
    print("|---|---|---|---|---|")
    for name in ("tiny-llama", "tiny-qwen2", "tiny-qwen3"):
        for kind, prompt in prompts.items():
            run = subprocess.run([CLI, "generate", "-m", str(SHARED / "models" / name), "-p", prompt, "-n", "128",
                                  "--ignore-eos", "--temperature", "0", "--threads", "2"],
                                 capture_output=True, text=True, check=True)
            out = run.stdout.rstrip("\n")
            verbatim = common_prefix(out, passage[80:]) if kind != "free text" else 0
            in_prompt = covered_share(out, lambda start: prompt)
            in_self = covered_share(out, lambda start: out[:start + MIN_STRETCH - 1])
            print(f"| {name} | {kind} | {verbatim if kind != 'free text' else '-'} of {len(out)} | "
                  f"{100 * in_prompt:.0f}% | {100 * in_self:.0f}% |")


if __name__ == "__main__":
    main()

"""Checks a real trace from the CLI: `kiln generate --profile --trace` on a
tiny model writes a Chrome trace in which every step holds every kernel of
its forward pass, events nest exactly per track, and the spans directly
within each step add up to it within 5% (in the median step); the table
names both phases; and the generated text is the same as without profiling.

usage: trace_check.py KILN SHARED_DIR WORK_DIR
"""
import json
import os
import subprocess
import sys


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
    return p


def nest(spans):
    """Parent index per span (per track, by start then longest first)."""
    order = sorted(range(len(spans)), key=lambda i: (spans[i]["tid"], spans[i]["ts"], -spans[i]["dur"]))
    parent = [-1] * len(spans)
    stack = []
    track = None
    eps = 1e-3  # the times are microseconds with nanosecond digits
    for i in order:
        e = spans[i]
        if e["tid"] != track:
            stack, track = [], e["tid"]
        while stack and spans[stack[-1]]["ts"] + spans[stack[-1]]["dur"] <= e["ts"] + eps:
            stack.pop()
        if stack:
            outer = spans[stack[-1]]
            assert e["ts"] + e["dur"] <= outer["ts"] + outer["dur"] + eps, f"{e['name']} crosses {outer['name']}"
            parent[i] = stack[-1]
        stack.append(i)
    return parent


def main():
    kiln, shared, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    trace_path = os.path.join(work, "profile_trace.json")
    base = [kiln, "generate", "-m", os.path.join(shared, "models", "tiny-qwen2"), "-p", "one two three four",
            "-p", "five six", "-n", "8", "--temperature", "0", "--ignore-eos", "--threads", "2"]
    plain = run(base)
    profiled = run(base + ["--profile", "--no-roofline", "--trace", trace_path])
    assert plain.stdout == profiled.stdout, "profiling changed the output"
    assert "prefill:" in profiled.stderr and "decode:" in profiled.stderr, profiled.stderr

    with open(trace_path) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert any(e["ph"] == "C" for e in events), "no counters"
    parent = nest(spans)
    steps = [i for i, e in enumerate(spans) if e["cat"] == "step"]
    assert steps, "no steps"
    kernels_per_step = set()
    coverage = []
    for s in steps:
        children = [i for i, p in enumerate(parent) if p == s]
        covered = sum(spans[i]["dur"] for i in children)
        assert covered <= spans[s]["dur"] + 1e-3, (spans[s], covered)
        coverage.append(covered / spans[s]["dur"])
        forwards = [i for i in children if spans[i]["name"] == "forward"]
        assert len(forwards) == 1, spans[s]
        kernels = [i for i, p in enumerate(parent) if p == forwards[0]]
        assert all(spans[i]["cat"] == "kernel" for i in kernels)
        for i in kernels:
            for key in ("op", "shapes", "dtype", "backend", "bytes", "flops"):
                assert key in spans[i]["args"], (key, spans[i])
        kernels_per_step.add(tuple(spans[i]["name"] for i in kernels))
    # The median step: one step may lose the core between two of its parts
    # on a loaded machine.
    coverage.sort()
    assert coverage[len(coverage) // 2] >= 0.95, coverage
    # Every step ran the same kernels, all of them (one Program per bucket, one step per node).
    assert len(kernels_per_step) == 1 and len(next(iter(kernels_per_step))) > 10, len(kernels_per_step)
    print(f"{len(steps)} steps of {len(next(iter(kernels_per_step)))} kernels each, nested and adding up")


if __name__ == "__main__":
    main()

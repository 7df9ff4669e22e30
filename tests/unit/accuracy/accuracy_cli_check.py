#!/usr/bin/env python3
"""End-to-end checks of `kiln diff` and `kiln eval`.

  diff     F32 vs Q4_0 of tiny-llama: the per-layer table, the first value
           below the threshold, exit 1 under --fail-below and 0 above it, 2
           on errors; an int8 KV cache against f32 on one model.
  eval     the text report (perplexity +/-, tokens evaluated, tokens/s), the
           plain progress lines when stderr is not a terminal, --score all,
           and refusal of a text shorter than one chunk.
  kv-int8  perplexity with --kv-cache-dtype int8 within 0.3% of f32 for the
           three tiny models.

usage: accuracy_cli_check.py KILN SHARED_DIR TMP_DIR {diff,eval,kv-int8}
"""
import json
import os
import re
import subprocess
import sys


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"})


def check(condition, message, failures):
    if not condition:
        failures.append(message)


def diff_checks(kiln, shared, failures):
    gguf = os.path.join(shared, "models", "gguf")
    f32, q4 = os.path.join(gguf, "tiny-llama-F32.gguf"), os.path.join(gguf, "tiny-llama-Q4_0.gguf")
    prompt = "Once upon a time there was a little fox who lived in the forest."
    base = [kiln, "diff", f32, q4, "--prompt", prompt, "--threads", "2"]

    strict = run(base + ["--fail-below", "0.999"])
    check(strict.returncode == 1, f"diff --fail-below 0.999: exit {strict.returncode}, want 1: {strict.stderr}", failures)
    out = strict.stdout
    check(re.search(r"layer\s+tensor\s+cosine\s+max abs\s+mean abs", out) is not None, "no table header:\n" + out,
          failures)
    for layer in range(4):
        check(re.search(rf"^\s+{layer}\s+layers\.{layer}\.output\s+0\.9\d+", out, re.M) is not None,
              f"no row for layers.{layer}.output:\n{out}", failures)
    check("first below 0.99" in out or "every value has cosine >= 0.99" in out, "no threshold verdict:\n" + out,
          failures)
    check("FAIL: lowest cosine" in out, "no FAIL line:\n" + out, failures)
    check("q_rope" not in out, "llama q/k (permuted in GGUF) compared by default:\n" + out, failures)

    loose = run(base + ["--fail-below", "0.5", "--json"])
    check(loose.returncode == 0, f"diff --fail-below 0.5: exit {loose.returncode}: {loose.stderr}", failures)
    if loose.returncode == 0:
        j = json.loads(loose.stdout)
        layers = {v["layer"] for v in j["values"]}
        check(layers >= {-1, 0, 1, 2, 3}, f"layers compared: {layers}", failures)
        check(0.9 < j["min_cosine"] < 1.0, f"F32 vs Q4_0 min cosine {j['min_cosine']}", failures)
        check(not j["failed"], "json says failed", failures)
        names = [v["name"] for v in j["values"]]
        check("logits" in names and "embed" in names, f"values: {names}", failures)

    model = os.path.join(shared, "models", "tiny-qwen2")
    kv = run([kiln, "diff", model, "--b-kv-cache-dtype", "int8", "--prompt", prompt, "--threads", "2",
              "--fail-below", "0.999", "--json"])
    check(kv.returncode == 0, f"diff kv int8 vs f32: exit {kv.returncode}: {kv.stdout} {kv.stderr}", failures)

    missing = run([kiln, "diff", os.path.join(gguf, "no-such-file.gguf"), "--prompt", prompt])
    check(missing.returncode == 2, f"diff of a missing file: exit {missing.returncode}, want 2", failures)
    check("no-such-file.gguf" in missing.stderr, "error does not name the file: " + missing.stderr, failures)


def eval_checks(kiln, shared, tmp, failures):
    with open(os.path.join(shared, "data", "text", "heldout.txt"), encoding="utf-8") as f:
        text = f.read()[:6000]
    path = os.path.join(tmp, "eval_text.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text + "\n")
    model = os.path.join(shared, "models", "gguf", "tiny-qwen3-Q4_K_M.gguf")
    r = run([kiln, "eval", "-m", model, "--perplexity", path, "--ctx", "128", "--threads", "2"])
    check(r.returncode == 0, f"eval: exit {r.returncode}: {r.stderr}", failures)
    m = re.search(r"^perplexity: (\d+\.\d{4}) \+/- (\d+\.\d{5})$", r.stdout, re.M)
    check(m is not None, "no perplexity line:\n" + r.stdout, failures)
    m2 = re.search(r"^tokens evaluated: (\d+) in (\d+) chunks of 128 \((\d+) scored\)$", r.stdout, re.M)
    check(m2 is not None, "no tokens line:\n" + r.stdout, failures)
    if m2:
        chunks = int(m2.group(2))
        check(int(m2.group(1)) == 128 * chunks and int(m2.group(3)) == 63 * chunks, "counts: " + m2.group(0),
              failures)
        check(len(re.findall(r"^eval: \d+/\d+ chunks, ppl", r.stderr, re.M)) >= 2,
              "no progress lines on a non-terminal stderr:\n" + r.stderr, failures)
    check(re.search(r"^speed: \d+\.\d tokens/s", r.stdout, re.M) is not None, "no speed line:\n" + r.stdout, failures)

    all_positions = run([kiln, "eval", "-m", model, "--perplexity", path, "--ctx", "128", "--score", "all",
                         "--threads", "2", "--json"])
    check(all_positions.returncode == 0, "eval --score all failed: " + all_positions.stderr, failures)
    if all_positions.returncode == 0 and m2:
        j = json.loads(all_positions.stdout)
        check(j["n_scored"] == 127 * j["n_chunks"] and j["score"] == "all", f"--score all: {j}", failures)

    short = os.path.join(tmp, "short.txt")
    with open(short, "w") as f:
        f.write("Too short.\n")
    s = run([kiln, "eval", "-m", model, "--perplexity", short, "--ctx", "128"])
    check(s.returncode == 1 and "no whole chunk" in s.stderr, f"short text: {s.returncode} {s.stderr}", failures)


def kv_int8_checks(kiln, shared, failures):
    heldout = os.path.join(shared, "data", "text", "heldout.txt")
    for name in ["tiny-llama", "tiny-qwen2", "tiny-qwen3"]:
        ppl = {}
        for kv in ["f32", "int8"]:
            r = run([kiln, "eval", "-m", os.path.join(shared, "models", name), "--perplexity", heldout, "--ctx", "256",
                     "--precision", "fp32", "--kv-cache-dtype", kv, "--threads", "2", "--json"])
            check(r.returncode == 0, f"{name} kv {kv}: {r.stderr}", failures)
            if r.returncode == 0:
                ppl[kv] = json.loads(r.stdout)["ppl"]
        if len(ppl) == 2:
            rel = ppl["int8"] / ppl["f32"] - 1
            print(f"{name}: f32 {ppl['f32']:.4f}, int8 KV {ppl['int8']:.4f} ({100 * rel:+.3f}%)")
            check(abs(rel) <= 0.003, f"{name}: int8 KV perplexity {100 * rel:+.3f}% from f32", failures)


def main():
    kiln, shared, tmp, what = sys.argv[1:5]
    os.makedirs(tmp, exist_ok=True)
    failures = []
    if what == "diff":
        diff_checks(kiln, shared, failures)
    elif what == "eval":
        eval_checks(kiln, shared, tmp, failures)
    elif what == "kv-int8":
        kv_int8_checks(kiln, shared, failures)
    else:
        failures.append("unknown check " + what)
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

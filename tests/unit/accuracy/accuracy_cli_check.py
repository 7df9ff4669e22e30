#!/usr/bin/env python3
"""End-to-end checks of `kiln diff` and `kiln eval`.

  diff     F32 vs Q4_0 of tiny-llama: the per-layer table, the first value
           below the threshold, exit 1 under --fail-below and 0 above it, 2
           on errors; an int8 KV cache and W8A8 against f32 on one model.
  eval     the text report (perplexity +/-, tokens evaluated, tokens/s), the
           plain progress lines when stderr is not a terminal, --score all,
           and refusal of a text shorter than one chunk.
  kv-int8  perplexity with --kv-cache-dtype int8 within 0.3% of f32 for the
           three tiny models.
  plan     `kiln inspect --plan` on Q4_0 and Q8_0 files states, per block
           format, whether the weights are used in place or repacked once at
           load, and lists the int8 repacking of --w8a8.
  w8a8     perplexity with --w8a8 within 1% of fp32 for the three tiny
           models, with per-token activation scales and with static ones
           calibrated (--calibration) on text the evaluation does not score;
           bad calibration files refused with errors naming the file.

usage: accuracy_cli_check.py KILN SHARED_DIR TMP_DIR {diff,eval,kv-int8,plan,w8a8}
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

    w8a8 = run([kiln, "diff", model, "--a-precision", "fp32", "--b-precision", "fp32", "--b-w8a8", "--prompt",
                prompt, "--threads", "2", "--json"])
    check(w8a8.returncode == 0, f"diff w8a8 vs fp32: exit {w8a8.returncode}: {w8a8.stderr}", failures)
    if w8a8.returncode == 0:
        j = json.loads(w8a8.stdout)
        check("w8a8" in j["b"] and "w8a8" not in j["a"], f"diff w8a8 labels: {j['a']} / {j['b']}", failures)
        check(0.9 < j["min_cosine"] < 1.0, f"fp32 vs W8A8 min cosine {j['min_cosine']}", failures)

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


def plan_checks(kiln, shared, failures):
    gguf = os.path.join(shared, "models", "gguf")
    for name, block in [("tiny-llama-Q4_0.gguf", "q4_0"), ("tiny-qwen3-Q4_0.gguf", "q4_0"),
                        ("tiny-qwen2-Q8_0.gguf", "q8_0"), ("tiny-qwen3-Q8_0.gguf", "q8_0")]:
        r = run([kiln, "inspect", os.path.join(gguf, name), "--plan", "--threads", "1"])
        check(r.returncode == 0, f"inspect --plan {name}: exit {r.returncode}: {r.stderr}", failures)
        m = re.search(r"^\s+weights: (\d+) packed once at load \(([^)]*)\), (\d+) used in place$", r.stdout, re.M)
        check(m is not None, f"{name}: no weights line in the plan:\n{r.stdout}", failures)
        if m:
            # Every matrix is accounted for, packed or in place (29 per file).
            check(int(m.group(1)) + int(m.group(3)) == 29, f"{name}: {m.group(0).strip()}", failures)
        layouts = re.findall(rf"^\s+(\d+) x cpu:({block}-\S+)", r.stdout, re.M)
        check(layouts, f"{name}: no {block} layout listed:\n{r.stdout}", failures)
    r = run([kiln, "inspect", os.path.join(gguf, "tiny-qwen3-Q4_0.gguf"), "--plan", "--w8a8", "--threads", "1"])
    check(r.returncode == 0 and re.search(r"^\s+28 x cpu:w8a8-int8\S* \(dynamic\)", r.stdout, re.M) is not None,
          f"inspect --plan --w8a8: {r.returncode}\n{r.stdout}{r.stderr}", failures)


# The W8A8 runs score the first W8A8_CHUNKS chunks of 256 tokens (about the
# first 77,000 characters of heldout.txt) and calibrate on the text from
# CALIBRATION_START on, so that calibration never sees a scored token.
W8A8_CHUNKS = 100
CALIBRATION_START = 90000


def w8a8_checks(kiln, shared, tmp, failures):
    heldout = os.path.join(shared, "data", "text", "heldout.txt")
    with open(heldout, encoding="utf-8") as f:
        text = f.read()
    calibration = os.path.join(tmp, "w8a8_calibration.txt")
    with open(calibration, "w", encoding="utf-8") as f:
        f.write(text[CALIBRATION_START:])

    def ppl(name, *flags):
        r = run([kiln, "eval", "-m", os.path.join(shared, "models", name), "--perplexity", heldout, "--ctx", "256",
                 "--max-chunks", str(W8A8_CHUNKS), "--precision", "fp32", "--threads", "2", "--json", *flags])
        check(r.returncode == 0, f"{name} {' '.join(flags)}: exit {r.returncode}: {r.stderr}", failures)
        return json.loads(r.stdout) if r.returncode == 0 else None

    for name in ["tiny-llama", "tiny-qwen2", "tiny-qwen3"]:
        fp32 = ppl(name)
        dynamic = ppl(name, "--w8a8")
        static = ppl(name, "--w8a8", "--calibration", calibration)
        if not (fp32 and dynamic and static):
            continue
        check(fp32["n_chunks"] == W8A8_CHUNKS, f"{name}: {fp32['n_chunks']} chunks scored", failures)
        check(dynamic["w8a8"] == "dynamic" and static["w8a8"] == "static",
              f"{name}: w8a8 modes {dynamic['w8a8']}, {static['w8a8']}", failures)
        # The int8 path really ran: its numbers are not fp32's.
        check(dynamic["ppl"] != fp32["ppl"] and static["ppl"] != fp32["ppl"], f"{name}: W8A8 equals fp32", failures)
        d_dynamic = dynamic["ppl"] / fp32["ppl"] - 1
        d_static = static["ppl"] / fp32["ppl"] - 1
        print(f"{name}: fp32 {fp32['ppl']:.4f}, W8A8 per-token {dynamic['ppl']:.4f} ({100 * d_dynamic:+.3f}%), "
              f"calibrated {static['ppl']:.4f} ({100 * d_static:+.3f}%)")
        check(abs(d_dynamic) <= 0.01, f"{name}: W8A8 per-token {100 * d_dynamic:+.3f}% from fp32", failures)
        check(abs(d_static) <= 0.01, f"{name}: W8A8 calibrated {100 * d_static:+.3f}% from fp32", failures)

    # Bad calibration files: the error names the file and what is wrong.
    empty = os.path.join(tmp, "w8a8_empty.txt")
    open(empty, "w").close()
    binary = os.path.join(tmp, "w8a8_binary.txt")
    with open(binary, "wb") as f:
        f.write(b"calibration \xff\xfe text")
    model = os.path.join(shared, "models", "tiny-qwen2")
    for path, expected in [(os.path.join(tmp, "no-such-calibration.txt"), "cannot open"),
                           (empty, "has no tokens"), (binary, "not UTF-8"), (tmp, "is a folder")]:
        r = run([kiln, "eval", "-m", model, "--perplexity", heldout, "--ctx", "256", "--max-chunks", "1", "--w8a8",
                 "--calibration", path])
        check(r.returncode == 1 and path in r.stderr and expected in r.stderr,
              f"--calibration {path}: exit {r.returncode}, want 1 and '{expected}': {r.stderr}", failures)
    r = run([kiln, "eval", "-m", model, "--perplexity", heldout, "--ctx", "256", "--calibration", calibration])
    check(r.returncode == 1 and "need --w8a8" in r.stderr, f"--calibration without --w8a8: {r.stderr}", failures)


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
    elif what == "plan":
        plan_checks(kiln, shared, failures)
    elif what == "w8a8":
        w8a8_checks(kiln, shared, tmp, failures)
    else:
        failures.append("unknown check " + what)
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

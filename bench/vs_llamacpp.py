#!/usr/bin/env python3
"""kiln against llama.cpp's CPU build on the same GGUF files, side by side in
one run: rounds in which each file is measured by `kiln bench latency` and
then by llama.cpp (node-llama-cpp's prebuilt library, through
bench/llamacpp/llamacpp_speed.mjs), so that a slow spell of the machine falls
on both; medians of the rounds and their ratio.

    /usr/bin/python3 bench/vs_llamacpp.py FILE.gguf [FILE.gguf ...] [--rounds 3]
        [--threads 2] [--input-len 512] [--output-len 128] [--batch-size 1]

Files written by llama.cpp's own quantizer (its Q4_K_M mixture, say):

    kiln quantize MODEL_DIR model-bf16.gguf --type bf16
    cc -O2 -o quantize_with_llamacpp bench/llamacpp/quantize_with_llamacpp.c -ldl
    ./quantize_with_llamacpp tests/llamacpp_oracle/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libllama.v0.5.0.so \\
        model-bf16.gguf model-q4_k_m.gguf q4_k_m 2

`--isa avx2` (or avx-vnni, avx512, avx512-vnni) measures both at one ISA
level on a CPU that has more: kiln under KILN_ISA, llama.cpp from a copy of
node-llama-cpp's package that keeps only its CPU variant for that level
(haswell, alderlake, skylakex, icelake), so an AVX2 side by side needs no
AVX2-only machine. The CPU library llama.cpp loaded is printed.

llama.cpp's threads wait for each other by spinning: on a machine where
other work takes cores its figures fall several-fold (one thread, 74 ms a
token; two threads beside two busy builds, 360 ms), so measure on a quiet
machine; the script prints the load average before each round.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORACLE_MODULES = os.path.join(ROOT, "tests", "llamacpp_oracle", "node_modules")
PREBUILT_BINS = os.path.join("@node-llama-cpp", "linux-x64", "bins", "linux-x64")

# kiln's ISA levels and the llama.cpp CPU variant built for the same
# instructions (ggml's x86 variants: haswell = AVX2+FMA+F16C, alderlake adds
# AVX-VNNI, skylakex = AVX-512 F/BW/DQ/VL, icelake adds VNNI and VBMI).
LLAMACPP_VARIANT = {"avx2": "haswell", "avx-vnni": "alderlake", "avx512": "skylakex",
                    "avx512-vnni": "icelake"}


def modules_with_one_variant(variant, into):
    """A hard-linked copy of the oracle's node_modules whose prebuilt
    directory holds one CPU variant, so that ggml can load no other."""
    target = os.path.join(into, "node_modules")
    shutil.copytree(ORACLE_MODULES, target, copy_function=os.link, symlinks=True)
    bins = os.path.join(target, PREBUILT_BINS)
    wanted = f"libggml-cpu-{variant}.so"
    if not os.path.isfile(os.path.join(bins, wanted)):
        sys.exit(f"{wanted}: not among node-llama-cpp's prebuilt CPU variants")
    for name in os.listdir(bins):
        if name.startswith("libggml-cpu-") and name != wanted:
            os.unlink(os.path.join(bins, name))
    return target


def kiln_figures(kiln, path, a):
    env = dict(os.environ)
    if a.isa:
        env["KILN_ISA"] = a.isa
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([kiln, "bench", "latency", "-m", path, "--threads", str(a.threads),
                        "--input-len", str(a.input_len), "--output-len", str(a.output_len),
                        "--batch-size", str(a.batch_size), "--warmup", "1", "--runs", "3",
                        "--no-roofline", "--json", out.name],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        r = json.load(open(out.name))["results"][0]
        return r["prefill_tokens_per_s"]["median"], r["decode_tokens_per_s"]["median"]


def llamacpp_figures(path, a, modules):
    env = dict(os.environ, NODE_PATH=modules)
    out = subprocess.run(["node", os.path.join(ROOT, "bench", "llamacpp", "llamacpp_speed.mjs"), path,
                          "--threads", str(a.threads), "--input-len", str(a.input_len),
                          "--output-len", str(a.output_len), "--batch-size", str(a.batch_size),
                          "--runs", "2"],
                         check=True, capture_output=True, text=True, env=env).stdout
    r = json.loads(out.strip().splitlines()[-1])
    if a.isa and not r.get("cpu_library", "").endswith(f"-{LLAMACPP_VARIANT[a.isa]}.so"):
        sys.exit(f"llama.cpp loaded {r.get('cpu_library')}, not the {LLAMACPP_VARIANT[a.isa]} variant")
    a.llamacpp_library = r.get("cpu_library")
    return statistics.median(r["prefill_tokens_per_s"]), statistics.median(r["decode_tokens_per_s"])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="+")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--input-len", type=int, default=512)
    p.add_argument("--output-len", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--kiln", default=os.path.join(ROOT, "build", "bin", "kiln"))
    p.add_argument("--isa", choices=sorted(LLAMACPP_VARIANT),
                   help="measure both at this ISA level (default: each its best)")
    a = p.parse_args()
    a.llamacpp_library = None
    for f in a.files:
        if not os.path.isfile(f):
            sys.exit(f"{f}: no such file")
    figures = {f: {"kiln": [], "llama.cpp": []} for f in a.files}
    with tempfile.TemporaryDirectory() as scratch:
        modules = modules_with_one_variant(LLAMACPP_VARIANT[a.isa], scratch) if a.isa else ORACLE_MODULES
        for r in range(a.rounds):
            print(f"round {r + 1}/{a.rounds}, load average {os.getloadavg()[0]:.2f}", file=sys.stderr)
            for f in a.files:
                figures[f]["kiln"].append(kiln_figures(a.kiln, f, a))
                figures[f]["llama.cpp"].append(llamacpp_figures(f, a, modules))
    print(f"kiln ISA {a.isa or 'best'}, llama.cpp CPU library {a.llamacpp_library}")
    print(f"{a.threads} threads, {a.input_len}-token prompt, {a.output_len} decoded, batch {a.batch_size}; "
          f"medians of {a.rounds} rounds (tokens/s)")
    print(f"{'file':<40} {'prefill kiln':>13} {'llama.cpp':>10} {'ratio':>6} {'decode kiln':>12} "
          f"{'llama.cpp':>10} {'ratio':>6}")
    for f in a.files:
        k = figures[f]["kiln"]
        l = figures[f]["llama.cpp"]
        kp, kd = statistics.median(x[0] for x in k), statistics.median(x[1] for x in k)
        lp, ld = statistics.median(x[0] for x in l), statistics.median(x[1] for x in l)
        print(f"{os.path.basename(f):<40} {kp:>13.1f} {lp:>10.1f} {kp / lp:>5.2f}x {kd:>12.1f} {ld:>10.1f} "
              f"{kd / ld:>5.2f}x")


if __name__ == "__main__":
    main()

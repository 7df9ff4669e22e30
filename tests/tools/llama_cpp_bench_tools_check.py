#!/usr/bin/env python3
"""The llama.cpp side-by-side tools of bench/ still work: the quantizer
wrapper (bench/llamacpp/quantize_with_llamacpp.c) writes a Q4_K_M file with
llama.cpp's own mixture that kiln reads and runs, and the speed script
(bench/llamacpp/llamacpp_speed.mjs) measures it with llama.cpp.

usage: llama_cpp_bench_tools_check.py WORK_DIR KILN SHARED_DIR
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
NODE_MODULES = os.path.join(ROOT, "tests", "llamacpp_oracle", "node_modules")
LIBLLAMA_DIR = os.path.join(NODE_MODULES, "@node-llama-cpp", "linux-x64", "bins", "linux-x64")


def main():
    work, kiln, shared = sys.argv[1], sys.argv[2], sys.argv[3]
    source = os.path.join(shared, "models", "gguf", "tiny-qwen3-F16.gguf")
    os.makedirs(work, exist_ok=True)
    libs = [f for f in os.listdir(LIBLLAMA_DIR) if f.startswith("libllama.") and f.endswith(".so")]
    if not libs:
        sys.exit(f"no libllama in {LIBLLAMA_DIR}: run scripts/setup.sh")
    tool = os.path.join(work, "quantize_with_llamacpp")
    subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", tool,
                    os.path.join(ROOT, "bench", "llamacpp", "quantize_with_llamacpp.c"), "-ldl"], check=True)
    out = os.path.join(work, "tiny-qwen3-Q4_K_M.gguf")
    subprocess.run([tool, os.path.join(LIBLLAMA_DIR, libs[0]), source, out, "q4_k_m", "1"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    bad = subprocess.run([tool, os.path.join(LIBLLAMA_DIR, libs[0]), source, out + ".x", "q9_z"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "expected one of" in bad.stderr, bad.stderr

    info = subprocess.run([kiln, "inspect", out], check=True, capture_output=True, text=True).stdout
    assert "file type: Q4_K_M" in info and "Q4_K" in info, info
    gen = subprocess.run([kiln, "generate", "-m", out, "-p", "Once upon a time", "-n", "4", "--temperature", "0",
                          "--threads", "1"], check=True, capture_output=True, text=True)
    assert gen.stdout.strip(), gen.stderr

    speed = subprocess.run(["node", os.path.join(ROOT, "bench", "llamacpp", "llamacpp_speed.mjs"), out,
                            "--threads", "1", "--input-len", "8", "--output-len", "3", "--runs", "1"],
                           check=True, capture_output=True, text=True,
                           env=dict(os.environ, NODE_PATH=NODE_MODULES)).stdout
    figures = json.loads(speed.strip().splitlines()[-1])
    assert len(figures["prefill_tokens_per_s"]) == 1 and figures["prefill_tokens_per_s"][0] > 0, figures
    assert len(figures["decode_tokens_per_s"]) == 1 and figures["decode_tokens_per_s"][0] > 0, figures
    print(f"ok: {info.splitlines()[5]}; llama.cpp {figures['decode_tokens_per_s'][0]:.1f} tok/s decoding")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The second reference of the Gemma tests: llama.cpp (through the npm
package node-llama-cpp, tests/llamacpp_oracle) on the GGUF file of the small
reference models, against the PyTorch implementation's logits and greedy
tokens. kiln's test_models checks kiln against the same PyTorch numbers on
the same GGUF files (GemmaReference.*FromGguf*), so agreement here makes the
three agree.

llama.cpp keeps its KV cache in f16 and rounds some activations to f16, so
its logits are held to 2e-2 x max(1, max |logit|) rather than kiln's 1e-4;
greedy tokens must be equal up to the first step whose top-2 margin is
within 5e-2.

usage: gemma_llama_cpp_check.py WORK_DIR
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
NODE_MODULES = os.path.join(HERE, "..", "llamacpp_oracle", "node_modules")


def run(*cmd):
    subprocess.run(cmd, check=True, env=dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE",
                                             NODE_PATH=NODE_MODULES))


def main():
    work = sys.argv[1]
    if not os.path.isdir(os.path.join(NODE_MODULES, "node-llama-cpp")):
        sys.exit("node-llama-cpp is not installed in tests/llamacpp_oracle/node_modules: run scripts/setup.sh")
    failures = 0
    for arch in ("gemma2", "gemma3"):
        folder = os.path.join(work, arch)
        run(sys.executable, os.path.join(HERE, "gemma_reference.py"), folder, arch, "llama.cpp")
        run(sys.executable, os.path.join(HERE, "gemma_to_gguf.py"), folder, arch)
        out = os.path.join(folder, "llama_cpp.json")
        run("node", os.path.join(HERE, "llama_cpp_logits.mjs"), os.path.join(folder, "model.gguf"),
            os.path.join(folder, "reference.json"), out)
        ref = json.load(open(os.path.join(folder, "reference.json")))
        got = json.load(open(out))
        largest = max(1.0, max(abs(v) for row in ref["logits"] for v in row))
        diff = max(abs(a - b) for ra, rb in zip(ref["logits"], got["logits"]) for a, b in zip(ra, rb))
        decided = 0
        while decided < len(ref["margins"]) and ref["margins"][decided] > 5e-2:
            decided += 1
        same = ref["greedy"][:decided] == got["greedy"][:decided]
        ok = diff <= 2e-2 * largest and same and decided > 0
        failures += not ok
        print(f"{arch}: max |logit - PyTorch's| {diff:.2e} (max |logit| {largest:.2f}); greedy equal over "
              f"{decided} decided steps: {same}; all {len(ref['greedy'])} equal: {ref['greedy'] == got['greedy']}"
              f" -> {'ok' if ok else 'FAILED'}")
    print(f"{2 - failures} passed, {failures} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

"""The shared models' reference prompts through a split run: greedy output
equal to the fp32 reference's 64 tokens, and to single-process kiln's.

Each shared model folder holds PyTorch fp32 goldens (reference/prompt_K.json:
input_ids, the 64 greedy new_ids and each step's top-1 minus top-2 logit
margin). A split that changes the summation order (tensor parallel) may
choose the other token where the reference's margin is tiny, and every
token after it may then differ; so a sequence is compared up to its first
step whose margin is at most MARGIN. A split that changes no summation
(pipeline parallel, the prefill/decode split) must equal single-process
kiln bit for bit, every token.
"""

import json
import os
import tempfile

MARGIN = 3e-3
MAX_TOKENS = 64


def reference(models_dir, model):
    """The model's reference prompts: [(input_ids, new_ids, margins)]."""
    folder = os.path.join(models_dir, model, "reference")
    with open(os.path.join(folder, "index.json")) as f:
        index = json.load(f)
    prompts = []
    for p in index["prompts"]:
        with open(os.path.join(folder, p["file"])) as f:
            ref = json.load(f)
        greedy = ref["greedy"]
        prompts.append((ref["input_ids"], greedy["new_ids"], greedy["top1_minus_top2_logit"]))
    return prompts


def decisive_length(margins):
    """Tokens of a reference sequence that a changed summation order must
    reproduce: those before its first step with a margin of MARGIN or less."""
    for i, m in enumerate(margins):
        if m <= MARGIN:
            return i
    return len(margins)


def write_requests(path, prompts):
    with open(path, "w") as f:
        for ids, _, _ in prompts:
            f.write(json.dumps({"prompt_ids": ids, "max_tokens": MAX_TOKENS, "ignore_eos": True,
                                "temperature": 0}) + "\n")


def output_ids(stdout):
    rows = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    rows.sort(key=lambda r: r["index"])
    return [r["output_ids"] for r in rows]


def compare(what, got, single, prompts, exact):
    """Failure messages (empty when `got` passes) for a split run's output
    ids against single-process kiln's and the reference's."""
    failures = []
    if len(got) != len(prompts) or len(single) != len(prompts):
        return [f"{what}: {len(got)} results split, {len(single)} single, {len(prompts)} prompts"]
    for k, ((_, ref_ids, margins), g, s) in enumerate(zip(prompts, got, single)):
        n = decisive_length(margins)
        if s[:n] != ref_ids[:n]:
            failures.append(f"{what} prompt {k}: single-process kiln differs from the reference within its first "
                            f"{n} tokens:\n  kiln {s}\n  ref  {ref_ids}")
        if g[:n] != ref_ids[:n]:
            failures.append(f"{what} prompt {k}: the split run differs from the reference within its first "
                            f"{n} tokens:\n  split {g}\n  ref   {ref_ids}")
        if exact and g != s:
            failures.append(f"{what} prompt {k}: the split run differs from single-process kiln:\n  split  {g}\n"
                            f"  single {s}")
        elif not exact and g[:n] != s[:n]:
            failures.append(f"{what} prompt {k}: the split run differs from single-process kiln within the first "
                            f"{n} tokens")
    return failures


def check(run, kiln, models_dir, model, split_prefix, split_flags, split_says, exact):
    """Runs the model's reference prompts with fp32 activations in one
    process and split (`split_prefix` + kiln ... + `split_flags`, e.g.
    mpirun's arguments and --tensor-parallel-size 2, whose standard error
    must hold `split_says`: the last rank reporting its share), both
    prefilled in chunks of 16 so that chunked prefill runs under the split,
    and returns
    (failure messages, a one-line summary). `run(cmd)` returns
    (returncode, stdout, stderr)."""
    prompts = reference(models_dir, model)
    with tempfile.TemporaryDirectory() as tmp:
        requests = os.path.join(tmp, "requests.jsonl")
        write_requests(requests, prompts)
        common = ["generate", "-m", os.path.join(models_dir, model), "-f", requests, "--output", "jsonl",
                  "--precision", "fp32", "--max-prefill-chunk", "16", "--threads", "1"]
        rc, single_out, err = run([kiln] + common)
        if rc != 0:
            return [f"{model} single process: exit {rc}\n{err}"], ""
        rc, split_out, err = run(split_prefix + [kiln] + common + split_flags)
        if rc != 0:
            return [f"{model} split: exit {rc}\n{split_out}\n{err}"], ""
        if split_says not in err:
            return [f"{model} split: no '{split_says}' in its standard error:\n{err}"], ""
    got, single = output_ids(split_out), output_ids(single_out)
    failures = compare(model, got, single, prompts, exact)
    decisive = sum(decisive_length(m) for _, _, m in prompts)
    summary = (f"{model}: {len(prompts)} reference prompts, {decisive} of {MAX_TOKENS * len(prompts)} tokens "
               f"decisive (reference margin > {MARGIN}) equal to the reference; "
               f"{'every token equal to' if exact else 'decisive tokens equal to'} single-process kiln")
    return failures, summary

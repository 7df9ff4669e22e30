"""Tensor parallelism end to end: `mpirun -np 2 kiln ... --tensor-parallel-size 2`
on the shared tiny models against single-process kiln.

    tensor_parallel_check.py MPIRUN KILN CASE [MODEL]

CASE is one of
  generate MODEL [FLAG...]
                  greedy text equal to single-process kiln's, and every
                  pass's logits within 1e-4 x max(1, max |logit|) of its
                  (compared through --dump); two prompts sharing a prefix,
                  prefilled in chunks, so that prefix caching and chunked
                  prefill run under the split. A bf16 model runs with
                  --precision fp32: under mixed precision its matmul inputs
                  are rounded to bf16, and a last-bit difference from the
                  changed summation order can move such a rounding by a
                  bf16 step (2^-8 relative), beyond the logit tolerance
  serve MODEL     one chat completion under `kiln serve` answered as
                  single-process kiln answers it, and again from the prefix
                  cache; SIGTERM to rank 0 stops every rank
  rank-killed     rank 1 killed (SIGKILL), rank 1 stopped (SIGSTOP), rank 0
                  killed, each mid-generation: every process gone within the
                  collective time-out, rank 0 failing with a clear error
                  when rank 1 stops
  reference MODEL the model's four fp32 reference prompts, 64 greedy tokens
                  each: equal to the reference and to single-process kiln
                  wherever the reference's top-2 margin exceeds 3e-3
                  (reference_prompts.py)
  bench-sweep     kiln bench throughput's sweep, an engine per max-num-seqs
                  in turn: the other rank follows each one's shape
  bad-input       T not dividing the heads, T x P not the ranks started,
                  T > 1 without mpirun, kiln compile with T > 1, a
                  quantized column slice cutting a block: each a clear
                  error, no hang

Models are found under $KILN_SHARED_DIR/models, else ../shared/models
beside the repository.
"""

import glob
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference_prompts  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.environ.get("KILN_SHARED_DIR", os.path.join(os.path.dirname(REPO), "shared"))
MODELS = os.path.join(SHARED, "models")
ENV = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
PROMPTS = ["The quick brown fox jumps over the lazy dog and then", "The quick brown fox jumps over the fence"]


def model_path(name):
    return os.path.join(MODELS, name)


def mpirun_args(mpirun, n):
    return [mpirun, "-np", str(n), "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]


def run(cmd, timeout=180):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=ENV)
    return p.returncode, p.stdout, p.stderr


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def read_logits(dump_dir):
    with open(os.path.join(dump_dir, "index.json")) as f:
        index = json.load(f)
    passes = []
    for p in index["passes"]:
        # A prefill chunk that does not reach its prompt's end has no logits.
        files = [v["file"] for v in p["values"] if v["name"] in ("logits", "capped_logits")]
        passes.append(np.load(os.path.join(dump_dir, files[-1])) if files else None)
    if all(p is None for p in passes):
        fail(f"{dump_dir}: no pass dumped logits")
    return passes


def case_generate(mpirun, kiln, model, extra):
    path = model_path(model)
    common = ["generate", "-m", path, "-n", "12", "--temperature", "0", "--output", "jsonl",
              "--max-prefill-chunk", "5", "--threads", "1"] + extra
    for p in PROMPTS:
        common += ["-p", p]
    with tempfile.TemporaryDirectory() as tmp:
        single_dump, split_dump = os.path.join(tmp, "single"), os.path.join(tmp, "split")
        rc, single_out, err = run([kiln] + common + ["--dump", single_dump])
        if rc != 0:
            fail(f"single process: exit {rc}\n{err}")
        start = time.time()
        rc, split_out, err = run(mpirun_args(mpirun, 2) + [kiln] + common +
                                 ["--tensor-parallel-size", "2", "--dump", split_dump])
        if rc != 0:
            fail(f"mpirun -np 2: exit {rc}\n{split_out}\n{err}")
        if "tensor parallel rank 1 of 2" not in err:
            fail("rank 1 did not report its share:\n" + err)
        texts = lambda out: [json.loads(l)["text"] for l in out.splitlines() if l.startswith("{")]
        if texts(single_out) != texts(split_out) or len(texts(single_out)) != len(PROMPTS):
            fail(f"greedy text differs:\nsingle: {texts(single_out)}\nsplit:  {texts(split_out)}")
        a, b = read_logits(single_dump), read_logits(split_dump)
        if len(a) != len(b):
            fail(f"{len(a)} passes single, {len(b)} split")
        worst = 0.0
        for i, (x, y) in enumerate(zip(a, b)):
            if x is None or y is None:
                if (x is None) != (y is None):
                    fail(f"pass {i}: logits on one side only")
                continue
            if x.shape != y.shape:
                fail(f"pass {i}: logits {x.shape} vs {y.shape}")
            tol = 1e-4 * max(1.0, float(np.abs(x).max()))
            err_i = float(np.abs(x - y).max())
            worst = max(worst, err_i / tol)
            if err_i > tol:
                fail(f"pass {i}: logits differ by {err_i:.3g} > {tol:.3g}")
        print(f"{model}: {len(a)} passes, greedy text equal, worst logit difference {worst:.3f} of the tolerance;"
              f" split run {time.time() - start:.1f} s")


def case_reference(mpirun, kiln, model):
    failures, summary = reference_prompts.check(run, kiln, MODELS, model, mpirun_args(mpirun, 2),
                                                ["--tensor-parallel-size", "2"], "tensor parallel rank 1 of 2", exact=False)
    for f in failures:
        print("FAIL:", f)
    if failures:
        sys.exit(1)
    print(summary, "under T = 2")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(proc, port, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            return False
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def chat(port):
    body = json.dumps({"messages": [{"role": "user", "content": "Say something about foxes."}],
                       "max_tokens": 16, "temperature": 0})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    if r.status != 200:
        fail(f"chat completion: HTTP {r.status}: {data!r}")
    reply = json.loads(data)
    return reply["choices"][0]["message"]["content"], reply["usage"]["prompt_tokens_details"]["cached_tokens"]


def serve_once(cmd, port, mpirun=False):
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV,
                            start_new_session=True)
    try:
        if not wait_ready(proc, port):
            proc.kill()
            fail("kiln serve never became ready:\n" + proc.communicate()[1])
        # The second time from the prefix cache.
        answer, _ = chat(port)
        again, cached = chat(port)
        if again != answer or cached == 0:
            fail(f"the repeated request: {again!r} with {cached} cached prompt tokens, after {answer!r}")
        start = time.time()
        # Under mpirun, as a deployer would: SIGTERM to rank 0, which stops
        # the others once its requests have ended.
        os.kill(ranks_of(proc.pid)[0] if mpirun else proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        if proc.returncode != 0:
            fail(f"kiln serve exited {proc.returncode} after SIGTERM:\n{err}")
        return answer, time.time() - start
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def case_serve(mpirun, kiln, model):
    path = model_path(model)
    args = ["serve", "-m", path, "--host", "127.0.0.1", "--threads", "1"]
    port = free_port()
    single, _ = serve_once([kiln] + args + ["--port", str(port)], port)
    port = free_port()
    split, stop_seconds = serve_once(mpirun_args(mpirun, 2) + [kiln] + args +
                                     ["--port", str(port), "--tensor-parallel-size", "2"], port, mpirun=True)
    if single != split:
        fail(f"answers differ:\nsingle: {single!r}\nsplit:  {split!r}")
    print(f"{model}: the chat completion matches ({split!r}); every rank stopped {stop_seconds:.1f} s after SIGTERM")


def ranks_of(mpirun_pid):
    """{rank: pid} of the kiln processes mpirun started."""
    ranks = {}
    for environ in glob.glob("/proc/[0-9]*/environ"):
        pid = int(environ.split("/")[2])
        try:
            with open(environ, "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid != mpirun_pid:
            continue
        for kv in env:
            if kv.startswith(b"OMPI_COMM_WORLD_RANK="):
                ranks[int(kv.split(b"=")[1])] = pid
    return ranks


# A generation that lasts seconds, so that a rank signalled after the first
# words stops it midway: tiny-qwen2's 1000 tokens take 0.2-0.3 s on a fast
# CPU, less than mpirun may take to pass the first words on. One sequence,
# so that the longer context's KV cache stays small.
LONG_GENERATION = ["-n", "8000", "--max-model-len", "8192", "--max-num-seqs", "1", "--ignore-eos", "--temperature",
                   "0"]


def wait_for_ranks(mpirun_pid, count, seconds=60):
    """ranks_of once all `count` ranks have started (before the first token:
    finding them means reading every process's environment, which on a busy
    machine takes longer than a tiny model's whole generation)."""
    deadline = time.time() + seconds
    while True:
        ranks = ranks_of(mpirun_pid)
        if len(ranks) >= count or time.time() > deadline:
            return ranks
        time.sleep(0.01)


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def case_rank_killed(mpirun, kiln, how, victim=1, split=("--tensor-parallel-size", "2")):
    timeout = 5
    cmd = mpirun_args(mpirun, 2) + [kiln, "generate", "-m", model_path("tiny-qwen2"), "-p", PROMPTS[0],
                                    *LONG_GENERATION, "--threads", "1", *split, "--collective-timeout", str(timeout)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, start_new_session=True)
    try:
        ranks = wait_for_ranks(proc.pid, 2)
        if sorted(ranks) != [0, 1]:
            fail(f"ranks found: {ranks}")
        # Generating once the first words are out; the signal follows at
        # once, well before the 1000th token.
        first = proc.stdout.read(16)
        if not first:
            fail("no output before the kill:\n" + proc.stderr.read().decode())
        start = time.time()
        os.kill(ranks[victim], signal.SIGKILL if how == "kill" else signal.SIGSTOP)
        limit = timeout + 15
        while time.time() - start < limit and (proc.poll() is None or any(alive(p) for p in ranks.values())):
            time.sleep(0.1)
        gone = time.time() - start
        left = [p for p in ranks.values() if alive(p)]
        if proc.poll() is None or left:
            fail(f"after {how} of rank {victim}: still running after {limit} s (mpirun {proc.poll()}, ranks {left})")
        err = proc.stderr.read().decode()
        if proc.returncode == 0:
            fail(f"after {how} of rank {victim} the job exited 0")
        if how == "stop" and "collective time-out" not in err:
            fail("rank 0 did not say why it stopped:\n" + err)
        print(f"rank {victim} {how}: every process gone {gone:.1f} s later, exit {proc.returncode}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for p in ranks_of(proc.pid).values() if proc.poll() is None else []:
            os.kill(p, signal.SIGKILL)


def case_bench_sweep(mpirun, kiln):
    cmd = mpirun_args(mpirun, 2) + [kiln, "bench", "throughput", "-m", model_path("tiny-qwen2"), "--no-roofline",
                                    "--num-requests", "6", "--sweep", "1,4", "--min-input", "8", "--max-input", "24",
                                    "--min-output", "4", "--max-output", "12", "--threads", "1",
                                    "--tensor-parallel-size", "2"]
    rc, out, err = run(cmd)
    rows = [l for l in out.splitlines() if l.split()[:1] in (["1"], ["4"])]
    if rc != 0 or len(rows) != 2:
        fail(f"bench throughput under T=2: exit {rc}\n{out}\n{err}")
    if err.count("tensor parallel rank 1: ") < 2:
        fail("rank 1 did not follow the second engine's shape:\n" + err)
    print("bench throughput's sweep of two engines ran under T=2")


def expect_error(cmd, message, what):
    start = time.time()
    rc, out, err = run(cmd, timeout=120)
    if rc == 0:
        fail(f"{what}: exit 0")
    if message not in out + err:
        fail(f"{what}: no '{message}' in\n{out}{err}")
    print(f"{what}: refused in {time.time() - start:.1f} s")


def case_bad_input(mpirun, kiln):
    gen = ["generate", "-p", "hi", "-n", "2", "--threads", "1"]
    qwen2 = ["-m", model_path("tiny-qwen2")]
    expect_error(mpirun_args(mpirun, 3) + [kiln] + gen + qwen2 + ["--tensor-parallel-size", "3"],
                 "tensor parallel size 3 must divide the attention heads (4) and the key/value heads (2)",
                 "T not dividing the heads")
    expect_error(mpirun_args(mpirun, 2) + [kiln] + gen + qwen2 + ["--tensor-parallel-size", "4"],
                 "--tensor-parallel-size 4 x --pipeline-parallel-size 1 = 4 ranks, but mpirun started 2 processes",
                 "T x P not the ranks started")
    expect_error([kiln] + gen + qwen2 + ["--tensor-parallel-size", "2"], "mpirun -np 2 kiln",
                 "T > 1 without mpirun")
    with tempfile.TemporaryDirectory() as tmp:
        expect_error([kiln, "compile", model_path("tiny-qwen2"), "-o", os.path.join(tmp, "m.kiln"),
                      "--tensor-parallel-size", "2"], "an artifact holds the whole model", "compile with T > 1")
    expect_error(mpirun_args(mpirun, 2) + [kiln] + gen + ["-m", os.path.join(MODELS, "gguf", "tiny-llama-Q8_0.gguf"),
                                                          "--tensor-parallel-size", "2"],
                 "split over 2 ranks give 176 each, not a whole number of its 32-element blocks",
                 "a Q8_0 column slice cutting a block")


def main():
    mpirun, kiln, case = sys.argv[1:4]
    if case == "generate":
        case_generate(mpirun, kiln, sys.argv[4], sys.argv[5:])
    elif case == "serve":
        case_serve(mpirun, kiln, sys.argv[4])
    elif case == "reference":
        case_reference(mpirun, kiln, sys.argv[4])
    elif case == "rank-killed":
        case_rank_killed(mpirun, kiln, "kill")
        case_rank_killed(mpirun, kiln, "stop")
        case_rank_killed(mpirun, kiln, "kill", victim=0)
    elif case == "bench-sweep":
        case_bench_sweep(mpirun, kiln)
    elif case == "bad-input":
        case_bad_input(mpirun, kiln)
    else:
        fail(f"unknown case {case}")
    print("PASS")


if __name__ == "__main__":
    main()

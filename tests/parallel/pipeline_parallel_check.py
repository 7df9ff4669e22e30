"""Pipeline parallelism end to end: `mpirun -np 2 kiln ... --pipeline-parallel-size 2`
on the shared tiny models against single-process kiln. Pipeline parallelism
changes no summation, so everything is compared bit for bit.

    pipeline_parallel_check.py MPIRUN KILN CASE [MODEL]

CASE is one of
  generate MODEL [FLAG...]
                  greedy text and every pass's logits (through --dump)
                  equal to single-process kiln's, bit for bit; two prompts
                  sharing a prefix, prefilled in chunks, so that prefix
                  caching, chunked prefill and micro-batches (a pass of
                  two sequences is two) run under the split
  serve MODEL     two chat completions sent together (one pass holds both:
                  micro-batches) answered as single-process kiln answers
                  them, and again from the prefix cache; SIGTERM to rank 0
                  stops every rank
  rank-killed     rank 1 killed (SIGKILL), rank 1 stopped (SIGSTOP), rank 0
                  killed, each mid-generation: every process gone within the
                  collective time-out, rank 0 failing with a clear error
                  when rank 1 stops; and at T = 2, P = 2, rank 2 stopped
  reference MODEL the model's four fp32 reference prompts, 64 greedy tokens
                  each: every token equal to single-process kiln, and equal
                  to the reference wherever its top-2 margin exceeds 3e-3
                  (reference_prompts.py)
  generate-both MODEL
                  T = 2 and P = 2 on 4 ranks: greedy text equal, logits
                  within tensor parallelism's tolerance
  bad-input       P above the layer count, T x P not the ranks started, P > 1
                  without mpirun, a draft model, a compiled artifact: each a
                  clear error, no hang

Models are found under $KILN_SHARED_DIR/models, else ../shared/models
beside the repository.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tensor_parallel_check import (PROMPTS, ENV, alive, case_rank_killed, chat, expect_error, fail,  # noqa: E402
                                   free_port, model_path, mpirun_args, ranks_of, read_logits, run,
                                   wait_for_ranks, wait_ready, LONG_GENERATION, MODELS)
import reference_prompts  # noqa: E402

SPLIT = ["--pipeline-parallel-size", "2"]


def case_reference(mpirun, kiln, model):
    failures, summary = reference_prompts.check(run, kiln, MODELS, model, mpirun_args(mpirun, 2), SPLIT,
                                                "pipeline parallel rank 1: layers", exact=True)
    for f in failures:
        print("FAIL:", f)
    if failures:
        sys.exit(1)
    print(summary, "under P = 2")


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
        rc, split_out, err = run(mpirun_args(mpirun, 2) + [kiln] + common + SPLIT + ["--dump", split_dump])
        if rc != 0:
            fail(f"mpirun -np 2: exit {rc}\n{split_out}\n{err}")
        for said in ("pipeline stage 0 of 2: decoder layers 0 to 1", "pipeline stage 1 of 2: decoder layers 2 to 3",
                     "pipeline parallel rank 0: layers 0 to 1", "pipeline parallel rank 1: layers 2 to 3"):
            if said not in err:
                fail(f"no '{said}' in\n{err}")
        texts = lambda out: [json.loads(l)["text"] for l in out.splitlines() if l.startswith("{")]
        if texts(single_out) != texts(split_out) or len(texts(single_out)) != len(PROMPTS):
            fail(f"greedy text differs:\nsingle: {texts(single_out)}\nsplit:  {texts(split_out)}")
        a, b = read_logits(single_dump), read_logits(split_dump)
        if len(a) != len(b):
            fail(f"{len(a)} passes single, {len(b)} split")
        rows = 0
        for i, (x, y) in enumerate(zip(a, b)):
            if (x is None) != (y is None):
                fail(f"pass {i}: logits on one side only")
            if x is None:
                continue
            if x.shape != y.shape or x.dtype != y.dtype or x.tobytes() != y.tobytes():
                fail(f"pass {i}: logits differ (largest difference {float(np.abs(x - y).max()):.3g})")
            rows = max(rows, x.shape[0])
        if rows < 2:
            fail("no pass held both sequences: micro-batches were not exercised")
        print(f"{model}: {len(a)} passes, greedy text and logits equal bit for bit; split run "
              f"{time.time() - start:.1f} s")


def case_generate_both(mpirun, kiln, model):
    """T = 2 and P = 2 on 4 ranks: tensor parallelism's sums change the last
    bits, so the logits are held to its tolerance, the greedy text to
    equality."""
    common = ["generate", "-m", model_path(model), "-n", "12", "--temperature", "0", "--output", "jsonl",
              "--max-prefill-chunk", "5", "--threads", "1"]
    for p in PROMPTS:
        common += ["-p", p]
    with tempfile.TemporaryDirectory() as tmp:
        single_dump, split_dump = os.path.join(tmp, "single"), os.path.join(tmp, "split")
        rc, single_out, err = run([kiln] + common + ["--dump", single_dump])
        if rc != 0:
            fail(f"single process: exit {rc}\n{err}")
        start = time.time()
        rc, split_out, err = run(mpirun_args(mpirun, 4) + [kiln] + common + SPLIT +
                                 ["--tensor-parallel-size", "2", "--dump", split_dump])
        if rc != 0:
            fail(f"mpirun -np 4: exit {rc}\n{split_out}\n{err}")
        for said in ("pipeline stage 1 of 2: decoder layers 2 to 3", "tensor parallel rank 1 of 2",
                     "pipeline parallel rank 3: layers 2 to 3"):
            if said not in err:
                fail(f"no '{said}' in\n{err}")
        texts = lambda out: [json.loads(l)["text"] for l in out.splitlines() if l.startswith("{")]
        if texts(single_out) != texts(split_out) or len(texts(single_out)) != len(PROMPTS):
            fail(f"greedy text differs:\nsingle: {texts(single_out)}\nsplit:  {texts(split_out)}")
        a, b = read_logits(single_dump), read_logits(split_dump)
        if len(a) != len(b):
            fail(f"{len(a)} passes single, {len(b)} split")
        worst = 0.0
        for i, (x, y) in enumerate(zip(a, b)):
            if (x is None) != (y is None):
                fail(f"pass {i}: logits on one side only")
            if x is None:
                continue
            tol = 1e-4 * max(1.0, float(np.abs(x).max()))
            diff = float(np.abs(x - y).max())
            worst = max(worst, diff / tol)
            if x.shape != y.shape or diff > tol:
                fail(f"pass {i}: logits differ by {diff:.3g} > {tol:.3g}")
        print(f"{model} at T = 2, P = 2: {len(a)} passes, greedy text equal, worst logit difference {worst:.3f} of "
              f"the tolerance; split run {time.time() - start:.1f} s")


def chat_about(port, topic, results, key):
    try:
        results[key] = chat_topic(port, topic)
    except Exception as e:  # noqa: BLE001: reported below
        results[key] = e


def chat_topic(port, topic):
    import http.client
    # Long enough answers that the two requests decode side by side.
    body = json.dumps({"messages": [{"role": "user", "content": f"Say something about {topic}."}],
                       "max_tokens": 64, "temperature": 0, "ignore_eos": True})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    if r.status != 200:
        raise RuntimeError(f"chat completion: HTTP {r.status}: {data!r}")
    reply = json.loads(data)
    return reply["choices"][0]["message"]["content"]


def running(port):
    import http.client
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", "/metrics")
        for line in c.getresponse().read().decode().splitlines():
            if line.startswith("kiln_num_requests_running"):
                return int(float(line.split()[-1]))
    except OSError:
        pass
    return 0


def serve_pair(cmd, port, mpirun=False):
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV,
                            start_new_session=True)
    try:
        if not wait_ready(proc, port):
            proc.kill()
            fail("kiln serve never became ready:\n" + proc.communicate()[1])
        results = {}
        threads = [threading.Thread(target=chat_about, args=(port, t, results, t)) for t in ("foxes", "rivers")]
        for t in threads:
            t.start()
        # How many ran side by side (said, not required: a loaded machine may
        # serve one before the other arrives).
        together = 0
        while any(t.is_alive() for t in threads):
            together = max(together, running(port))
            time.sleep(0.005)
        for t in threads:
            t.join()
        print(f"requests running together: {together}")
        for k, v in results.items():
            if isinstance(v, Exception):
                fail(f"request about {k}: {v}")
        # Again, from the prefix cache.
        answer, cached = chat(port)
        again, cached_again = chat(port)
        if again != answer or cached_again == 0:
            fail(f"the repeated request: {again!r} with {cached_again} cached prompt tokens, after {answer!r}")
        start = time.time()
        os.kill(ranks_of(proc.pid)[0] if mpirun else proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        if proc.returncode != 0:
            fail(f"kiln serve exited {proc.returncode} after SIGTERM:\n{err}")
        return (results["foxes"], results["rivers"], answer), time.time() - start
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def case_serve(mpirun, kiln, model):
    args = ["serve", "-m", model_path(model), "--host", "127.0.0.1", "--threads", "1"]
    port = free_port()
    single, _ = serve_pair([kiln] + args + ["--port", str(port)], port)
    port = free_port()
    split, stop_seconds = serve_pair(mpirun_args(mpirun, 2) + [kiln] + args + ["--port", str(port)] + SPLIT, port,
                                     mpirun=True)
    if single != split:
        fail(f"answers differ:\nsingle: {single!r}\nsplit:  {split!r}")
    print(f"{model}: two concurrent chat completions and a cached one match; every rank stopped "
          f"{stop_seconds:.1f} s after SIGTERM")


def process_state(pid):
    """The state letter of /proc/PID/stat ("T" stopped, "S" sleeping, ...)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def case_stage_rank_stopped(mpirun, kiln):
    """T = 2, P = 2: the second stage's first rank stopped mid-generation;
    every process gone within the time-out, rank 0 saying why."""
    timeout = 5
    cmd = mpirun_args(mpirun, 4) + [kiln, "generate", "-m", model_path("tiny-qwen2"), "-p", PROMPTS[0],
                                    *LONG_GENERATION, "--threads", "1", *SPLIT, "--tensor-parallel-size", "2",
                                    "--collective-timeout", str(timeout)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, start_new_session=True)
    ranks = {}
    try:
        ranks = wait_for_ranks(proc.pid, 4)
        if sorted(ranks) != [0, 1, 2, 3]:
            fail(f"ranks found: {ranks}")
        # Stopped at once after the first words: a tiny model's 1000 tokens
        # take a fraction of a second, less than finding the ranks may.
        if not proc.stdout.read(16):
            fail("no output before the stop:\n" + proc.stderr.read().decode())
        start = time.time()
        os.kill(ranks[2], signal.SIGSTOP)
        # mpirun ends the ranks left once rank 0 has gone; on a loaded machine
        # that has taken more than 15 s beyond the time-out.
        limit = timeout + 45
        while time.time() - start < limit and (proc.poll() is None or any(alive(p) for p in ranks.values())):
            time.sleep(0.1)
        gone = time.time() - start
        left = [p for p in ranks.values() if alive(p)]
        if proc.poll() is None or left:
            # Each rank left with its state (T: still stopped, S: waiting),
            # and what mpirun said, so that a failure shows who waits on whom.
            which = {r: process_state(p) for r, p in sorted(ranks.items()) if alive(p)}
            os.killpg(proc.pid, signal.SIGKILL)
            said = proc.stderr.read().decode()[-2000:]
            fail(f"after stopping rank 2 of 4: still running after {limit} s (mpirun {proc.poll()}, ranks and their "
                 f"states {which}); stderr:\n{said}")
        err = proc.stderr.read().decode()
        if proc.returncode == 0 or "collective time-out" not in err:
            fail(f"exit {proc.returncode}, and rank 0 did not say why it stopped:\n{err}")
        print(f"T = 2, P = 2, rank 2 stopped: every process gone {gone:.1f} s later, exit {proc.returncode}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for p in ranks.values():
            if alive(p):
                os.kill(p, signal.SIGKILL)


def case_bad_input(mpirun, kiln):
    gen = ["generate", "-p", "hi", "-n", "2", "--threads", "1"]
    qwen2 = ["-m", model_path("tiny-qwen2")]
    expect_error(mpirun_args(mpirun, 5) + [kiln] + gen + qwen2 + ["--pipeline-parallel-size", "5"],
                 "--pipeline-parallel-size 5 is more than the model's 4 decoder layers", "P above the layer count")
    expect_error(mpirun_args(mpirun, 2) + [kiln] + gen + qwen2 + SPLIT + ["--tensor-parallel-size", "2"],
                 "--tensor-parallel-size 2 x --pipeline-parallel-size 2 = 4 ranks, but mpirun started 2 processes",
                 "T x P not the ranks started")
    expect_error([kiln] + gen + qwen2 + SPLIT, "mpirun -np 2 kiln", "P > 1 without mpirun")
    expect_error([kiln] + gen + qwen2 + SPLIT + ["--spec-method", "draft", "--draft-model", "self"],
                 "a draft model is not split over ranks", "a draft model")
    with tempfile.TemporaryDirectory() as tmp:
        artifact = os.path.join(tmp, "m.kiln")
        rc, out, err = run([kiln, "compile", model_path("tiny-qwen2"), "-o", artifact, "--threads", "1"])
        if rc != 0:
            fail(f"kiln compile: exit {rc}\n{out}{err}")
        expect_error(mpirun_args(mpirun, 2) + [kiln] + gen + ["-m", artifact] + SPLIT,
                     "a compiled artifact cannot be split into pipeline stages", "a compiled artifact")


def main():
    mpirun, kiln, case = sys.argv[1:4]
    if case == "generate":
        case_generate(mpirun, kiln, sys.argv[4], sys.argv[5:])
    elif case == "generate-both":
        case_generate_both(mpirun, kiln, sys.argv[4])
    elif case == "serve":
        case_serve(mpirun, kiln, sys.argv[4])
    elif case == "reference":
        case_reference(mpirun, kiln, sys.argv[4])
    elif case == "rank-killed":
        case_rank_killed(mpirun, kiln, "kill", split=SPLIT)
        case_rank_killed(mpirun, kiln, "stop", split=SPLIT)
        case_rank_killed(mpirun, kiln, "kill", victim=0, split=SPLIT)
        case_stage_rank_stopped(mpirun, kiln)
    elif case == "bad-input":
        case_bad_input(mpirun, kiln)
    else:
        fail(f"unknown case {case}")
    print("PASS")


if __name__ == "__main__":
    main()

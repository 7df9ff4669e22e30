"""Session.run: logits written into the caller's array without a copy,
matching the references; several sequences; rewinding; errors."""

import numpy as np
import pytest

import kiln
from conftest import greedy, reference

VOCAB = 2048


@pytest.fixture(scope="module")
def session(qwen_model):
    with kiln.Session(qwen_model, max_seqs=4, max_tokens_per_seq=300, threads=2, precision="fp32") as s:
        yield s


def test_run_writes_into_the_callers_array(session):
    ref = reference("tiny-qwen2", 0)
    session.reset()
    buffer = np.full((3, VOCAB), -7.0, dtype=np.float32)
    logits = session.run(np.array(ref["input_ids"], dtype=np.int32), out=buffer)
    assert logits.shape == (1, VOCAB)
    assert np.shares_memory(logits, buffer)
    assert logits.ctypes.data == buffer.ctypes.data
    np.testing.assert_allclose(buffer[0], np.array(ref["last_logits"], dtype=np.float32), atol=1e-3)
    assert (buffer[1:] == -7.0).all()
    assert session.seq_length(0) == len(ref["input_ids"])


def test_every_position_and_a_flat_buffer(session):
    ref = reference("tiny-qwen2", 0)
    session.reset()
    n = len(ref["input_ids"])
    flat = np.zeros(n * VOCAB + 5, dtype=np.float32)
    logits = session.run(ref["input_ids"], list(range(n)), [2] * n, out=flat, logits="all")
    assert logits.shape == (n, VOCAB)
    assert np.shares_memory(logits, flat)
    np.testing.assert_allclose(logits, np.array(ref["all_logits"], dtype=np.float32), atol=1e-3)
    assert session.seq_length(2) == n and session.seq_length(0) == 0


def test_a_greedy_loop_equals_the_engine(session, llm):
    ref = reference("tiny-qwen2", 3)
    session.reset()
    row = np.empty((1, VOCAB), dtype=np.float32)
    session.run(ref["input_ids"], out=row)
    ids = []
    for _ in range(32):
        ids.append(int(row[0].argmax()))
        session.run([ids[-1]], out=row)
    expected = llm.generate({"prompt_token_ids": ref["input_ids"]}, greedy(32, ignore_eos=True))[0]
    assert ids == expected.outputs[0].token_ids


def test_sequences_in_one_pass_and_rewinding(session):
    a = reference("tiny-qwen2", 0)["input_ids"]
    b = reference("tiny-qwen2", 1)["input_ids"]
    session.reset()
    alone_a = session.run(a, seq_ids=[0] * len(a)).copy()
    alone_b = session.run(b, seq_ids=[1] * len(b)).copy()
    session.reset()
    tokens = np.array(a + b, dtype=np.int64)  # converted to int32
    seqs = [3] * len(a) + [1] * len(b)
    both = session.run(tokens, seq_ids=seqs)
    assert both.shape == (2, VOCAB)
    np.testing.assert_allclose(both[0], alone_a[0], atol=1e-4)
    np.testing.assert_allclose(both[1], alone_b[0], atol=1e-4)

    session.truncate(3, len(a) - 4)
    assert session.seq_length(3) == len(a) - 4
    again = session.run(a[-4:], seq_ids=[3] * 4)
    np.testing.assert_allclose(again[0], alone_a[0], atol=1e-4)
    session.reset(3)
    assert session.seq_length(3) == 0 and session.seq_length(1) == len(b)
    assert session.run([5], seq_ids=[1], logits="none").shape == (0, VOCAB)


def test_bad_runs_raise_and_change_nothing(session):
    session.reset()
    session.run([10, 11])
    with pytest.raises(kiln.InvalidArgumentError, match="token 0: position 7 in sequence 0, expected 2"):
        session.run([12], positions=[7])
    with pytest.raises(kiln.InvalidArgumentError, match="sequence id 9 outside"):
        session.run([12], seq_ids=[9])
    with pytest.raises(kiln.OutOfRangeError, match="id 5000 outside the vocabulary"):
        session.run([5000])
    with pytest.raises(ValueError, match="out holds 2048 floats; 2 rows of 2048 need 4096"):
        session.run([1, 2], out=np.empty((1, VOCAB), np.float32), logits="all")
    with pytest.raises(TypeError, match="float32"):
        session.run([1], out=np.empty((1, VOCAB), np.float64))
    with pytest.raises(ValueError, match="C-contiguous"):
        session.run([1], out=np.empty((VOCAB, 2), np.float32).T)
    with pytest.raises(TypeError, match="integers"):
        session.run([1.5])
    with pytest.raises(ValueError, match="outside int32"):
        session.run(np.array([2**40]))
    with pytest.raises(ValueError, match="2 values for 1 tokens"):
        session.run([1], positions=[2, 3])
    with pytest.raises(kiln.OutOfRangeError, match="length 9 outside"):
        session.truncate(0, 9)
    assert session.seq_length(0) == 2


def test_creation_errors_name_the_argument(qwen_model):
    with pytest.raises(kiln.InvalidArgumentError, match="max_seqs must be in"):
        kiln.Session(qwen_model, max_seqs=0)
    with pytest.raises(kiln.OutOfRangeError, match="max_tokens_per_seq 4096 beyond the model's context of 1024"):
        kiln.Session(qwen_model, max_tokens_per_seq=4096)
    with pytest.raises(kiln.InvalidArgumentError, match="options.precision"):
        kiln.Session(qwen_model, precision="fp4")

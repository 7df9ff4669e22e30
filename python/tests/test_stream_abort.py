"""Streaming and aborting: the iterator, callbacks, and an abort from
another thread while a request runs."""

import threading

import pytest

import kiln
from conftest import greedy, reference


def test_stream_yields_pieces_that_join_to_the_text(llm):
    ref = reference("tiny-qwen2", 2)  # non-ASCII: characters span tokens
    stream = llm.generate_stream(ref["prompt"], greedy(64, ignore_eos=True))
    pieces = []
    while True:
        try:
            pieces.append(next(stream))
        except StopIteration as end:
            output = end.value
            break
    assert all(isinstance(p, str) and p for p in pieces)
    assert len(pieces) > 10
    assert "".join(pieces) == ref["greedy"]["decoded_new"]
    assert output.outputs[0].text == "".join(pieces)
    assert output.outputs[0].token_ids == ref["greedy"]["new_ids"]


def test_leaving_a_stream_early_aborts_it(llm):
    stream = llm.generate_stream("And God said", greedy(900, ignore_eos=True))
    first = [next(stream) for _ in range(3)]
    stream.close()  # the request is aborted and its thread joined
    assert len(first) == 3
    # The engine is free for the next request.
    assert len(llm.generate("And God said", greedy(3))[0].outputs[0].token_ids) == 3


def test_a_callback_returning_true_aborts(llm):
    events = []

    def on_token(event):
        events.append(event)
        return len(events) >= 3

    request_id = llm.add_request("And God said", greedy(50, ignore_eos=True), on_token=on_token)
    out = llm.wait(request_id)
    assert out.request_id == request_id
    assert out.outputs[0].finish_reason == "abort"
    assert len(out.outputs[0].token_ids) == 3
    assert [e.token for e in events[:3]] == out.outputs[0].token_ids
    assert events[-1].finished and events[-1].finish_reason == "abort"
    assert all(e.request_id == request_id for e in events)


def test_another_thread_aborts_a_running_request(llm):
    first_token = threading.Event()
    release = threading.Event()

    def hold(event):
        if not first_token.is_set():
            first_token.set()
            release.wait(timeout=60)
        return False

    request_id = llm.add_request("And God said", greedy(500, ignore_eos=True), on_token=hold)

    def aborter():
        first_token.wait(timeout=60)
        llm.abort(request_id)
        release.set()

    thread = threading.Thread(target=aborter)
    thread.start()
    out = llm.wait(request_id)
    thread.join()
    assert out.outputs[0].finish_reason == "abort"
    assert len(out.outputs[0].token_ids) == 1
    with pytest.raises(kiln.NotFoundError, match=f"request {request_id}"):
        llm.abort(request_id)


def test_an_exception_in_a_callback_reaches_the_waiter(llm):
    def broken(event):
        raise RuntimeError("callback broke")

    request_id = llm.add_request("And God said", greedy(20), on_token=broken)
    with pytest.raises(RuntimeError, match="callback broke"):
        llm.wait(request_id)

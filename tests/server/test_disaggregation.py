"""Prefill/decode disaggregation end to end on tiny-qwen2: a `kiln serve
--role prefill` instance sends each prompt's KV blocks over UCX to a `kiln
serve --role decode` instance, behind `kiln router --prefill --decode`.
Greedy answers equal a single `kiln serve`'s byte for byte (prompts of
several blocks, prefilled in chunks of a few blocks so that blocks go out
between passes), whether blocks go layer by layer during the pass
(--kv-send-per-layer, the default) or whole after it, the decode instance's
prefix cache hits the transferred blocks, and two instances that differ in
block size refuse each other. On every shared model, the fp32 reference
prompts' 64 greedy tokens come out of the split as they come out of one
instance, and as the reference has them wherever its top-2 margin exceeds
3e-3 (tests/parallel/reference_prompts.py)."""

import json
import os
import subprocess
import sys
import time

import pytest

from kiln_server import KILN, SHARED, KilnServer, free_port, sse_events, url_of, wait_for

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "parallel"))
import reference_prompts  # noqa: E402


class KilnPdRouter(KilnServer):
    """`kiln router --prefill URL --decode URL`."""

    def __init__(self, prefill, decode):
        super().__init__()
        self.prefill, self.decode = prefill, decode

    def command(self):
        return [KILN, "router", "--host", "127.0.0.1", "--port", "0", "--health-interval-ms", "100",
                "--prefill", self.prefill, "--decode", self.decode]


PROMPTS = [
    "The history of the printing press begins in the fifteenth century, when " * 3,
    "Rivers carry water from the mountains to the sea; along the way they " * 4,
    "A recipe for bread: flour, water, salt and yeast are mixed, kneaded and " * 5,
]


def bodies():
    for i, prompt in enumerate(PROMPTS):
        body = {"prompt": prompt, "max_tokens": 12, "temperature": 0, "stream": i == 1}
        if i != 1:
            body["logprobs"] = 2  # the same floats, not just the same argmax
        yield body
    yield {"messages": [{"role": "user", "content": PROMPTS[0]}], "max_tokens": 10, "temperature": 0}


def answer(server, body):
    path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
    status, _, data = server.request("POST", path, body)
    assert status == 200, data
    if body.get("stream"):
        events = sse_events(data)
        assert events[-1] == "[DONE]"
        return "".join(json.loads(e)["choices"][0].get("text", "") for e in events[:-1])
    reply = json.loads(data)
    choice = reply["choices"][0]
    if "messages" in body:
        return choice["message"]["content"]
    return choice["text"], choice["logprobs"]


@pytest.mark.parametrize("kv_dtype,per_layer", [("f32", True), ("int8", True), ("f32", False)])
def test_split_equals_single_process(kv_dtype, per_layer):
    engine = ["--kv-cache-dtype", kv_dtype, "--max-prefill-chunk", "32", "--max-num-batched-tokens", "64"]
    with KilnServer(*engine) as single:
        expected = [answer(single, body) for body in bodies()]
    kv_port = free_port()
    sending = [] if per_layer else ["--kv-send-per-layer=false"]  # the default is per layer
    with KilnServer(*engine, "--role", "decode", "--kv-listen", f"127.0.0.1:{kv_port}") as decode, \
            KilnServer(*engine, *sending, "--role", "prefill", "--kv-peer", f"127.0.0.1:{kv_port}") as prefill, \
            KilnPdRouter(url_of(prefill), url_of(decode)) as router:
        got = [answer(router, body) for body in bodies()]
        assert got == expected

        p = prefill.metrics()
        sent = p["kiln_kv_blocks_sent_total"]
        m = decode.metrics()
        assert sent >= 3 * len(PROMPTS), sent
        assert m["kiln_kv_blocks_received_total"] == sent
        # Per layer, every block went as slices of one layer (tiny-qwen2
        # has several); whole, as none. The decode side counts a whole
        # block's layers too.
        slices = p["kiln_kv_layer_slices_sent_total"]
        received = m["kiln_kv_layer_slices_received_total"]
        assert received >= 2 * sent and received % sent == 0, (received, sent)
        assert slices == (received if per_layer else 0), (slices, received)
        assert m["kiln_kv_transfers_completed_total"] == len(PROMPTS) + 1
        # Every prompt found its transferred blocks (all but the last
        # token's block of a prompt are hits).
        assert m["kiln_prefix_cache_hits_total"] >= 16 * (sent - 2 * (len(PROMPTS) + 1)), m
        assert m["kiln_prefix_cache_hits_total"] > m["kiln_prefix_cache_queries_total"] / 2, m
        r = router.metrics()
        assert r['kiln_router_pd_requests_total{outcome="decoded"}'] == len(PROMPTS) + 1

        # The prefill instance answers for itself with the KV's landing.
        status, reply = prefill.post_json("/v1/completions", {"prompt": PROMPTS[2], "max_tokens": 50})
        assert status == 200, reply
        assert reply["kv_transfer"]["landed"] is True
        assert reply["usage"]["completion_tokens"] == 1

        # Without its decode instance the router serves nothing, and says so.
        decode.stop()
        assert wait_for(lambda: router.request("GET", "/health")[0] == 503)
        status, _, data = router.request("POST", "/v1/completions", {"prompt": "hello", "max_tokens": 2})
        assert status == 503, data
        assert json.loads(data)["error"]["code"] == "prefill_failed"


@pytest.mark.parametrize("model", ["tiny-llama", "tiny-qwen2", "tiny-qwen3"])
def test_reference_prompts_through_the_split(model):
    models = os.path.join(SHARED, "models")
    prompts = reference_prompts.reference(models, model)
    engine = ["--precision", "fp32", "--max-prefill-chunk", "16"]
    path = os.path.join(models, model)

    def texts(server):
        got = []
        for ids, _, _ in prompts:
            status, reply = server.post_json("/v1/completions", {
                "prompt": ids, "max_tokens": reference_prompts.MAX_TOKENS, "temperature": 0, "ignore_eos": True})
            assert status == 200, reply
            got.append(reply["choices"][0]["text"])
        return got

    with KilnServer(*engine, model=path) as single:
        expected = texts(single)
        # The reference's decisive tokens as text after their prompt, by the
        # same tokenizer (decoded after the prompt, as a completion's text is:
        # alone, a first token loses its leading space).
        def detokenize(ids):
            status, reply = single.post_json("/detokenize", {"tokens": ids})
            assert status == 200, reply
            return reply["prompt"]

        decisive = []
        for ids, ref_ids, margins in prompts:
            n = reference_prompts.decisive_length(margins)
            head, whole = detokenize(ids), detokenize(ids + ref_ids[:n])
            assert whole.startswith(head)
            decisive.append(whole[len(head):])
    kv_port = free_port()
    with KilnServer(*engine, "--role", "decode", "--kv-listen", f"127.0.0.1:{kv_port}", model=path) as decode, \
            KilnServer(*engine, "--role", "prefill", "--kv-peer", f"127.0.0.1:{kv_port}", model=path) as prefill, \
            KilnPdRouter(url_of(prefill), url_of(decode)) as router:
        got = texts(router)
        assert decode.metrics()["kiln_kv_transfers_completed_total"] == len(prompts)
    assert got == expected
    for k, (text, prefix, (_, _, margins)) in enumerate(zip(got, decisive, prompts)):
        if reference_prompts.decisive_length(margins) == reference_prompts.MAX_TOKENS:
            assert text == prefix, (k, text, prefix)
        else:
            assert text.startswith(prefix), (k, text, prefix)


def test_prefill_instance_started_first_waits_for_its_decode_instance():
    kv_port = free_port()
    with KilnServer("--role", "prefill", "--kv-peer", f"127.0.0.1:{kv_port}", wait_ready=False) as prefill:
        time.sleep(1.5)  # it is trying by now
        with KilnServer("--role", "decode", "--kv-listen", f"127.0.0.1:{kv_port}") as decode:
            prefill.wait_until_ready()
            status, reply = prefill.post_json("/v1/completions", {"prompt": PROMPTS[0], "max_tokens": 4})
            assert status == 200, reply
            assert reply["kv_transfer"]["landed"] is True
            assert decode.metrics()["kiln_kv_transfers_completed_total"] == 1


def test_block_size_mismatch_is_refused():
    kv_port = free_port()
    with KilnServer("--role", "decode", "--kv-listen", f"127.0.0.1:{kv_port}", "--block-size", "16"):
        prefill = KilnServer("--role", "prefill", "--kv-peer", f"127.0.0.1:{kv_port}", "--block-size", "32",
                             wait_ready=False)
        prefill.start()
        assert prefill.wait(60) != 0
        assert "block size 32 here, 16 on the peer" in prefill.log(), prefill.log()


def test_role_flags_are_checked():
    """Refused before anything loads or listens."""
    for flags, expected in [(["--role", "prefill"], "--kv-peer"), (["--role", "decode"], "--kv-listen"),
                            (["--kv-peer", "127.0.0.1:1"], "need --role"), (["--role", "middle"], "--role")]:
        command = KilnServer(*flags).command()
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        assert done.returncode != 0, done.stderr
        assert expected in done.stderr, done.stderr


def test_a_restarted_decode_instance_listens_on_its_address_again_at_once():
    """A decode instance that goes away fails the prefill instance's requests
    with 502; one started again on the same KV address at once (its
    predecessor's connections still in TIME_WAIT) is taken back."""
    kv_port = free_port()
    decode_flags = ["--role", "decode", "--kv-listen", f"127.0.0.1:{kv_port}"]
    body = {"prompt": PROMPTS[0], "max_tokens": 2}
    with KilnServer(*decode_flags) as decode, \
            KilnServer("--role", "prefill", "--kv-peer", f"127.0.0.1:{kv_port}") as prefill:
        status, reply = prefill.post_json("/v1/completions", body)
        assert status == 200 and reply["kv_transfer"]["landed"] is True, reply
        decode.stop()
        status, reply = prefill.post_json("/v1/completions", body)
        assert status == 502, reply
        assert reply["error"]["code"] == "kv_transfer_failed", reply
        with KilnServer(*decode_flags) as again:
            assert wait_for(lambda: prefill.post_json("/v1/completions", body)[0] == 200, timeout=30), \
                prefill.log()
            assert again.metrics()["kiln_kv_transfers_completed_total"] >= 1

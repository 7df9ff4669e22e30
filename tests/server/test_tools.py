"""Tool calls through `kiln serve` on tiny-qwen2, whose template ignores
tools (so the generic Hermes prompt carries them) and whose text is random:
under tool_choice required or a named function the grammar does all the
work, so every call must parse and its arguments validate against the
tool's schema (python3-jsonschema). Streamed calls must add up to the whole
answer, in OpenAI's chunk shape. The real Qwen3 template on the same model
renders the tools itself and thinks: reasoning_content comes apart from
the calls. Run with pytest; see kiln_server.py."""

import json
import os

import jsonschema
import pytest

from kiln_server import SHARED, TINY_QWEN2, KilnServer, sse_events, stream_request

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 1, "maxLength": 12},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
    },
    "required": ["city", "unit"],
    "additionalProperties": False,
}
ORDER = {
    "$defs": {"item": {"type": "object", "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{3}$"},
                                                         "qty": {"type": "integer", "minimum": 1, "maximum": 99}},
                       "required": ["sku", "qty"], "additionalProperties": False}},
    "type": "object",
    "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/item"}, "minItems": 1, "maxItems": 2},
                   "express": {"type": "boolean"}},
    "required": ["items", "express"],
    "additionalProperties": False,
}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.", "parameters": WEATHER}},
    {"type": "function", "function": {"name": "place_order", "description": "Order items.", "parameters": ORDER}},
]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
QUESTION = [{"role": "user", "content": "What is the weather in Bern, and order two AB123."}]


@pytest.fixture(scope="module")
def server():
    with KilnServer() as s:
        yield s


def chat(server, **fields):
    body = {"messages": QUESTION, "tools": TOOLS, "max_tokens": 200}
    body.update(fields)
    status, answer = server.post_json("/v1/chat/completions", body)
    assert status == 200, answer
    return answer


def check_calls(calls, names):
    """Each call is well formed and its arguments fit its tool's schema."""
    ids = set()
    for call in calls:
        assert call["type"] == "function"
        assert call["id"].startswith("call_") and call["id"] not in ids
        ids.add(call["id"])
        assert call["function"]["name"] in names
        arguments = json.loads(call["function"]["arguments"])
        jsonschema.validate(arguments, SCHEMAS[call["function"]["name"]], cls=jsonschema.Draft202012Validator)


@pytest.mark.parametrize("seed", range(6))
def test_required_single_call_fits_the_schema(server, seed):
    answer = chat(server, tool_choice="required", parallel_tool_calls=False, temperature=1.0, seed=seed)
    choice = answer["choices"][0]
    assert choice["finish_reason"] == "tool_calls", choice
    message = choice["message"]
    assert message["content"] is None, message
    assert len(message["tool_calls"]) == 1
    check_calls(message["tool_calls"], SCHEMAS)


@pytest.mark.parametrize("seed", range(4))
def test_named_function_is_the_one_called(server, seed):
    # A shorter tool list leaves the 1024-token context room for the order.
    ping = {"type": "function", "function": {"name": "ping"}}
    answer = chat(server, tools=[ping, TOOLS[1]], tool_choice={"type": "function", "function": {"name": "place_order"}},
                  temperature=1.0, seed=seed, parallel_tool_calls=False, max_tokens=420)
    choice = answer["choices"][0]
    assert choice["finish_reason"] == "tool_calls", choice
    calls = choice["message"]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["place_order"]
    check_calls(calls, {"place_order"})


def test_parallel_calls_each_fit(server):
    for seed in range(3):
        answer = chat(server, tool_choice="required", temperature=1.0, seed=seed, max_tokens=250)
        choice = answer["choices"][0]
        calls = choice["message"].get("tool_calls") or []
        assert calls, choice
        if choice["finish_reason"] == "length":
            calls = calls[:-1]  # the last may be cut off
        else:
            assert choice["finish_reason"] == "tool_calls"
        check_calls(calls, SCHEMAS)


def test_streamed_calls_add_up_to_the_whole_answer(server):
    body = {"messages": QUESTION, "tools": TOOLS, "max_tokens": 200, "tool_choice": "required",
            "parallel_tool_calls": False, "temperature": 1.0, "seed": 7}
    whole = chat(server, **{k: v for k, v in body.items() if k not in ("messages", "tools")})
    status, _, _, raw = stream_request(server, "/v1/chat/completions", dict(body, stream=True))
    assert status == 200
    payloads = sse_events(raw)
    assert payloads[-1] == "[DONE]"
    calls, content, finish = [], "", None
    for payload in payloads[:-1]:
        chunk = json.loads(payload)
        assert chunk["object"] == "chat.completion.chunk"
        choice = chunk["choices"][0]
        delta = choice["delta"]
        content += delta.get("content") or ""
        for call in delta.get("tool_calls") or []:
            if "id" in call:
                assert call["index"] == len(calls)
                assert call["type"] == "function"
                assert call["function"]["arguments"] == ""
                calls.append({"id": call["id"], "type": "function",
                              "function": {"name": call["function"]["name"], "arguments": ""}})
            else:
                fragment = call["function"]["arguments"]
                assert isinstance(fragment, str) and fragment, call
                assert "name" not in call["function"]
                calls[call["index"]]["function"]["arguments"] += fragment
        if choice["finish_reason"]:
            finish = choice["finish_reason"]
    assert "<tool" not in content
    assert finish == "tool_calls"
    check_calls(calls, SCHEMAS)
    expected = whole["choices"][0]["message"]["tool_calls"]
    assert [c["function"] for c in calls] == [c["function"] for c in expected]


def test_auto_and_none(server):
    # auto: the tiny model is free until it writes <tool_call>; whatever it
    # writes is content or calls that fit.
    for seed in range(3):
        choice = chat(server, temperature=1.0, seed=seed, max_tokens=60)["choices"][0]
        assert choice["finish_reason"] in ("stop", "length", "tool_calls")
        check_calls(choice["message"].get("tool_calls") or [], SCHEMAS)
    choice = chat(server, tool_choice="none", temperature=0, max_tokens=20)["choices"][0]
    assert "tool_calls" not in choice["message"]
    assert isinstance(choice["message"]["content"], str)


def test_auto_with_response_format_is_calls_or_the_answer(server):
    # Under auto the reply is either calls or JSON the response_format schema
    # accepts: one grammar from the first token.
    answer_schema = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 16}},
                     "required": ["answer"], "additionalProperties": False}
    response_format = {"type": "json_schema", "json_schema": {"name": "answer", "schema": answer_schema}}
    kinds = set()
    for seed in range(8):
        choice = chat(server, tools=[TOOLS[0]], response_format=response_format, parallel_tool_calls=False,
                      temperature=1.0, seed=seed)["choices"][0]
        message = choice["message"]
        kinds.add(choice["finish_reason"])
        if choice["finish_reason"] == "tool_calls":
            check_calls(message["tool_calls"], {"get_weather"})
        elif choice["finish_reason"] == "length":
            assert message.get("tool_calls") or message["content"].startswith("{"), choice
        else:
            assert choice["finish_reason"] == "stop", choice
            assert "tool_calls" not in message
            jsonschema.validate(json.loads(message["content"]), answer_schema, cls=jsonschema.Draft202012Validator)
    assert kinds & {"tool_calls", "stop"}, kinds


def test_tool_results_go_back_to_the_model(server):
    messages = QUESTION + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Bern\", \"unit\": \"celsius\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temperature\": 21}"},
    ]
    answer = chat(server, messages=messages, temperature=0, max_tokens=8)
    assert answer["usage"]["prompt_tokens"] > chat(server, temperature=0, max_tokens=8)["usage"]["prompt_tokens"]


@pytest.mark.parametrize("tools, extra, param", [
    ([{"type": "function", "function": {"description": "no name"}}], {}, "tools[0].function.name"),
    ([TOOLS[0], TOOLS[0]], {}, "tools[1].function.name"),
    ([{"type": "function", "function": {"name": "f", "parameters": [1]}}], {}, "tools[0].function.parameters"),
    (TOOLS, {"tool_choice": {"type": "function", "function": {"name": "unknown"}}}, "tool_choice"),
    ([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "not": {}}}}],
     {"tool_choice": "required"}, "tools[0].function.parameters"),
    ([{"type": "function", "function": {"name": "f", "parameters": {"$ref": "#/$defs/a",
                                                                     "$defs": {"a": {"$ref": "#/$defs/a"}}}}}],
     {"tool_choice": "required"}, "tools[0].function.parameters"),
])
def test_bad_tools_are_400s_naming_the_field(server, tools, extra, param):
    body = dict({"messages": QUESTION, "tools": tools}, **extra)
    status, answer = server.post_json("/v1/chat/completions", body)
    assert status == 400, answer
    assert answer["error"]["param"] == param, answer
    assert answer["error"]["message"].startswith(param), answer


# ---- a template that renders tools itself, and thinks: Qwen3's ----

@pytest.fixture(scope="module")
def qwen3_template_server(tmp_path_factory):
    """tiny-qwen2 with the real Qwen3 chat template (Hermes tool calls, <think>)."""
    model = tmp_path_factory.mktemp("tiny-qwen2-qwen3-template")
    for name in os.listdir(TINY_QWEN2):
        if name != "tokenizer_config.json":
            os.symlink(os.path.join(TINY_QWEN2, name), model / name)
    with open(os.path.join(TINY_QWEN2, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    with open(os.path.join(SHARED, "data", "tokenizers", "chat-templates", "Qwen-Qwen3-0.6B.jinja"), encoding="utf-8") as f:
        config["chat_template"] = f.read()
    (model / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    with KilnServer(model=str(model)) as s:
        yield s


def test_thinking_template_separates_reasoning_and_calls(qwen3_template_server):
    weather = [TOOLS[0]]
    called = 0
    for seed in range(8):
        body = {"messages": QUESTION, "tools": weather, "tool_choice": "required", "temperature": 1.0,
                "seed": seed, "max_tokens": 500}
        status, answer = qwen3_template_server.post_json("/v1/chat/completions", body)
        assert status == 200, answer
        choice = answer["choices"][0]
        message = choice["message"]
        assert "<think>" not in (message["content"] or "") and "</think>" not in (message["content"] or "")
        assert "<tool_call>" not in (message.get("reasoning_content") or "")
        if choice["finish_reason"] == "tool_calls":
            called += 1
            assert message["content"] is None
            check_calls(message["tool_calls"], {"get_weather"})
        else:
            # The grammar lets a think block come first; a long one runs out of tokens.
            assert choice["finish_reason"] == "length", choice
            assert message.get("reasoning_content"), choice
        # Streamed, the same seed gives the same reasoning and calls.
        status, _, _, raw = stream_request(qwen3_template_server, "/v1/chat/completions", dict(body, stream=True))
        reasoning, calls = "", []
        for payload in sse_events(raw)[:-1]:
            delta = json.loads(payload)["choices"][0]["delta"]
            reasoning += delta.get("reasoning_content") or ""
            for call in delta.get("tool_calls") or []:
                if "id" in call:
                    calls.append({"name": call["function"]["name"], "arguments": ""})
                else:
                    calls[call["index"]]["arguments"] += call["function"]["arguments"]
        assert reasoning == (message.get("reasoning_content") or "")
        assert calls == [c["function"] for c in message.get("tool_calls") or []]
    assert called >= 2, "most seeds call the tool"

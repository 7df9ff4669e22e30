"""LLM.generate and LLM.chat: greedy output against the references and
`kiln generate`, batches, token-id prompts, and the model's defaults."""

import json
import subprocess
import threading

import pytest

import kiln
from conftest import greedy, model_dir, reference


def test_greedy_output_matches_the_reference(llm):
    refs = [reference("tiny-qwen2", i) for i in range(4)]
    outputs = llm.generate([r["prompt"] for r in refs], greedy(64, ignore_eos=True))
    assert len(outputs) == 4
    for ref, out in zip(refs, outputs):
        assert out.prompt == ref["prompt"]
        assert out.prompt_token_ids == ref["input_ids"]
        assert out.finished
        completion = out.outputs[0]
        assert completion.token_ids == ref["greedy"]["new_ids"]
        assert completion.text == ref["greedy"]["decoded_new"]
        assert completion.finish_reason == "length"
        assert completion.logprobs is None


def test_generate_equals_kiln_generate(qwen_model, kiln_cli):
    # The defaults on both sides (mixed precision, the model's sampling).
    prompt = reference("tiny-qwen2", 1)["prompt"]
    with kiln.LLM(qwen_model, threads=2) as engine:
        out = engine.generate(prompt, kiln.SamplingParams(temperature=0, max_tokens=40))[0]
        defaults = engine.generate(prompt)[0]  # the generation config: greedy, max_new_tokens 64
    cli = subprocess.run([kiln_cli, "generate", "-m", model_dir("tiny-qwen2"), "-p", prompt, "-n", "40",
                          "--temperature", "0", "--threads", "2"], capture_output=True, text=True, check=True)
    assert out.outputs[0].text + "\n" == cli.stdout
    cli_defaults = subprocess.run([kiln_cli, "generate", "-m", model_dir("tiny-qwen2"), "-p", prompt, "--threads", "2"],
                                  capture_output=True, text=True, check=True)
    assert defaults.outputs[0].text + "\n" == cli_defaults.stdout


def test_ngram_speculation_keeps_the_greedy_output(llm, qwen_model):
    ref = reference("tiny-qwen2", 0)
    prompt = ref["prompt"] + " " + ref["prompt"]  # the output can quote the first copy
    params = greedy(48, ignore_eos=True)
    with kiln.LLM(qwen_model, threads=2, precision="fp32", seed=1, spec_method="ngram", spec_tokens=6) as fast:
        out = fast.generate(prompt, params)[0]
    assert out.outputs[0].token_ids == llm.generate(prompt, params)[0].outputs[0].token_ids
    with pytest.raises(kiln.InvalidArgumentError, match="spec method 'eagle'"):
        kiln.LLM(qwen_model, spec_method="eagle")


def test_draft_model_speculation_keeps_the_greedy_output(llm, qwen_model):
    ref = reference("tiny-qwen2", 0)
    prompt = ref["prompt"] + " " + ref["prompt"]
    params = greedy(48, ignore_eos=True)
    with kiln.LLM(qwen_model, threads=2, precision="fp32", seed=1, spec_method="draft", draft_model="self",
                  draft_dtype="q4_0") as fast:
        out = fast.generate(prompt, params)[0]
    assert out.outputs[0].token_ids == llm.generate(prompt, params)[0].outputs[0].token_ids
    with pytest.raises(kiln.InvalidArgumentError, match="--draft-dtype needs --draft-model self"):
        kiln.LLM(qwen_model, spec_method="draft", draft_model=model_dir("tiny-qwen3"), draft_dtype="q4_0")
    with pytest.raises(kiln.InvalidArgumentError, match="vocabulary differs"):
        kiln.LLM(qwen_model, spec_method="draft", draft_model=model_dir("tiny-llama"))


def test_one_prompt_many_params_and_token_id_prompts(llm):
    ref = reference("tiny-qwen2", 0)
    outputs = llm.generate([ref["prompt"], {"prompt_token_ids": ref["input_ids"]}, {"prompt": ref["prompt"]}],
                           [greedy(5), greedy(9), greedy(3)])
    assert [len(o.outputs[0].token_ids) for o in outputs] == [5, 9, 3]
    assert outputs[1].outputs[0].token_ids == ref["greedy"]["new_ids"][:9]
    assert outputs[1].prompt is None
    assert outputs[2].outputs[0].token_ids == ref["greedy"]["new_ids"][:3]
    single = llm.generate(ref["prompt"], greedy(4))
    assert single[0].outputs[0].token_ids == ref["greedy"]["new_ids"][:4]


def test_default_sampling_params_follow_the_generation_config(llm):
    params = llm.get_default_sampling_params()
    assert params.temperature == 0 and params.max_tokens == 64


def test_stop_strings_logprobs_and_seeds(llm):
    ref = reference("tiny-qwen2", 0)
    text = ref["greedy"]["decoded_new"]
    stopped = llm.generate(ref["prompt"], greedy(64, stop="morning"))[0].outputs[0]
    assert stopped.finish_reason == "stop"
    assert stopped.text == text[: text.index("morning")]

    with_logprobs = llm.generate(ref["prompt"], greedy(8, logprobs=0))[0].outputs[0]
    assert len(with_logprobs.logprobs) == 8
    assert all(lp <= 0 for lp in with_logprobs.logprobs)
    assert abs(with_logprobs.cumulative_logprob - sum(with_logprobs.logprobs)) < 1e-6

    sampled = [llm.generate(ref["prompt"], kiln.SamplingParams(temperature=1.0, seed=7, max_tokens=16))[0]
               for _ in range(2)]
    assert sampled[0].outputs[0].token_ids == sampled[1].outputs[0].token_ids


def test_threads_share_the_engine(llm):
    refs = [reference("tiny-qwen2", i) for i in range(4)]
    results = [None] * 8

    def run(i):
        results[i] = llm.generate(refs[i % 4]["prompt"], greedy(20, ignore_eos=True))[0].outputs[0].token_ids

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, ids in enumerate(results):
        assert ids == refs[i % 4]["greedy"]["new_ids"][:20], i


def test_chat_renders_the_template_and_generates(llm):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}]
    prompt = llm.get_tokenizer().apply_chat_template(messages)
    assert prompt == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
                      "<|im_start|>assistant\n")
    chat = llm.chat(messages, greedy(12))[0]
    plain = llm.generate({"prompt_token_ids": llm.get_tokenizer().encode(prompt, add_special_tokens=False)},
                         greedy(12))[0]
    assert chat.prompt_token_ids == plain.prompt_token_ids
    assert chat.outputs[0].token_ids == plain.outputs[0].token_ids
    two = llm.chat([messages, messages[1:]], greedy(4))
    assert len(two) == 2


def test_structured_output_json_schema_and_grammar(llm):
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 9}},
              "required": ["n"], "additionalProperties": False}
    outs = llm.generate(["A:", "B:"], [kiln.SamplingParams(temperature=1.0, seed=s, max_tokens=200, json_schema=schema)
                                       for s in (1, 2)])
    for out in outs:
        value = json.loads(out.outputs[0].text)
        assert set(value) == {"n"} and 1 <= value["n"] <= 9
        assert out.outputs[0].finish_reason == "stop"
    digits = llm.generate("A:", kiln.SamplingParams(temperature=1.0, seed=3, max_tokens=10,
                                                    grammar='root ::= "id-" [0-9]{4}'))[0].outputs[0].text
    assert len(digits) == 7 and digits.startswith("id-") and digits[3:].isdigit()
    anything = llm.generate("A:", kiln.SamplingParams(temperature=1.0, seed=4, max_tokens=60, json_object=True))
    text = anything[0].outputs[0].text
    assert text.startswith("{")
    if anything[0].outputs[0].finish_reason == "stop":
        assert isinstance(json.loads(text), dict)


def test_structured_output_errors_name_the_field(llm):
    with pytest.raises(kiln.InvalidArgumentError, match="json_schema: "):
        llm.generate("A:", kiln.SamplingParams(max_tokens=4, json_schema={"type": "object", "not": {}}))
    with pytest.raises(kiln.InvalidArgumentError, match="grammar: "):
        llm.generate("A:", kiln.SamplingParams(max_tokens=4, grammar="root ::= undefined-rule"))

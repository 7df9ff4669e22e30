"""The tokenizer through the binding, against the references."""

import pytest

import kiln
from conftest import model_dir, reference


@pytest.mark.parametrize("name", ["tiny-qwen2", "tiny-llama"])
def test_encode_and_decode_match_the_reference(name):
    with kiln.Model(model_dir(name)) as model:
        tokenizer = model.tokenizer
        for i in range(4):
            ref = reference(name, i)
            assert tokenizer.encode(ref["prompt"]) == ref["input_ids"]
            assert tokenizer.decode(ref["greedy"]["new_ids"]) == ref["greedy"]["decoded_new"]
        assert tokenizer.vocab_size == 2048
        assert model.max_context == 1024


def test_special_tokens_and_ids():
    with kiln.Model(model_dir("tiny-qwen2")) as model:
        tokenizer = model.tokenizer
        assert tokenizer.encode("<|im_end|>", add_special_tokens=False) == [2047]
        assert len(tokenizer.encode("<|im_end|>", add_special_tokens=False, parse_special=False)) > 1
        assert tokenizer.eos_token_id == 2045
        assert tokenizer.decode([2047], skip_special_tokens=False) == "<|im_end|>"
        assert tokenizer.decode([]) == ""
        with pytest.raises(kiln.OutOfRangeError, match=r"ids\[0\] is 9999"):
            tokenizer.decode([9999])
    with kiln.Model(model_dir("tiny-llama")) as llama:
        assert llama.tokenizer.bos_token_id == 1
        with pytest.raises(kiln.InvalidArgumentError, match="no chat template"):
            llama.tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}])

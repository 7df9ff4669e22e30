"""A loaded model (weights, tokenizer, generation config) and its tokenizer."""

import ctypes
import json
import os
from typing import List, Optional, Sequence, Union

from . import _native
from .sampling_params import SamplingParams


class Model(_native.OwnedHandle):
    """Weights, tokenizer and generation config, loaded once; LLM engines and
    Sessions built from it share them. `path` is a Hugging Face folder or a
    .gguf file; for an .onnx file, Model(path, ...) returns a kiln.OnnxModel
    instead (see onnx_model.py). With load_format="dummy", weights of the
    folder's (or `preset`'s) shapes are generated in `dtype` ("f32", "f16",
    "bf16")."""

    _kind = "model"
    _destroy_function = "kiln_model_destroy"

    def __new__(cls, path=None, *args, **kwargs):
        # An .onnx file is a graph to run on arrays, not an LLM: Model("m.onnx",
        # input_shapes=..., threads=...) returns a kiln.OnnxModel.
        if cls is Model and _is_onnx_path(path):
            from .onnx_model import OnnxModel  # numpy only when ONNX is used
            return OnnxModel(path, *args, **kwargs)
        return super().__new__(cls)

    def __init__(self, path: Optional[Union[str, os.PathLike]] = None, *, tokenizer: Optional[str] = None,
                 load_format: str = "auto", preset: Optional[str] = None, dtype: Optional[str] = None,
                 seed: int = 0):
        lib = _native.lib()
        options = _native.ModelOptions()
        lib.kiln_model_options_init(ctypes.byref(options), ctypes.sizeof(options))
        keep = [_native.encode(x, name) if x is not None else None
                for x, name in ((tokenizer, "tokenizer"), (load_format, "load_format"), (preset, "preset"),
                                (dtype, "dtype"))]
        options.tokenizer, options.load_format, options.preset, options.dummy_dtype = keep
        options.dummy_seed = int(seed)
        self.path = os.fspath(path) if path is not None else None
        encoded_path = _native.encode(self.path, "path") if self.path is not None else None
        handle = ctypes.c_void_p()
        _native.check(lib.kiln_model_load(encoded_path, ctypes.byref(options), ctypes.byref(handle)))
        self._handle = handle
        self._tokenizer = Tokenizer(self) if lib.kiln_model_has_tokenizer(handle) else None

    @property
    def vocab_size(self) -> int:
        return _native.lib().kiln_model_vocab_size(self.handle)

    @property
    def max_context(self) -> int:
        """The longest sequence the model supports."""
        return _native.lib().kiln_model_max_context(self.handle)

    @property
    def tokenizer(self) -> Optional["Tokenizer"]:
        """None for generated weights without a tokenizer."""
        return self._tokenizer

    def default_sampling_params(self) -> SamplingParams:
        """Sampling as the model's generation_config.json intends, as `kiln
        generate` does without sampling flags (greedy when it says do_sample
        false; its max_new_tokens as max_tokens, 16 when it has none)."""
        s = _native.SamplingParamsStruct()
        _native.lib().kiln_model_sampling_params_init(self.handle, ctypes.byref(s), ctypes.sizeof(s))
        return SamplingParams._from_struct(s)


def _is_onnx_path(path) -> bool:
    """An .onnx file, or a .kiln artifact compiled from one."""
    if not isinstance(path, (str, os.PathLike)):
        return False
    return os.fspath(path).lower().endswith(".onnx") or _is_onnx_artifact(os.fspath(path))


def _is_onnx_artifact(path: str) -> bool:
    # The .kiln container (format/artifact_file.h): a 64-byte header (magic,
    # version u32, section count u32, table offset u64), then 64-byte table
    # entries whose first 32 bytes are the section's name. An ONNX graph's
    # artifact has a section "onnx.model"; the loader checks the rest.
    try:
        with open(path, "rb") as f:
            header = f.read(64)
            if len(header) < 64 or header[:8] != b"KILNART\0":
                return False
            count = int.from_bytes(header[12:16], "little")
            offset = int.from_bytes(header[16:24], "little")
            f.seek(offset)
            table = f.read(64 * min(count, 1 << 16))
    except OSError:
        return False
    names = (table[i:i + 32].rstrip(b"\0") for i in range(0, len(table) - 63, 64))
    return b"onnx.model" in names


def load_llm_model(path, **load) -> Model:
    """The Model at `path` for an LLM or a Session; an .onnx path (for which
    Model gives an OnnxModel) is refused."""
    if _is_onnx_path(path):
        raise TypeError(f"{os.fspath(path)} is an ONNX model: run it with kiln.Model(path).run(...), not as an LLM")
    return Model(path, **load)


class Tokenizer:
    """The model's tokenizer: text <-> token ids, and chat prompts."""

    def __init__(self, model: Model):
        self._model = model

    @property
    def vocab_size(self) -> int:
        return self._model.vocab_size

    @property
    def bos_token_id(self) -> Optional[int]:
        value = _native.lib().kiln_model_bos_id(self._model.handle)
        return None if value < 0 else value

    @property
    def eos_token_id(self) -> Optional[int]:
        value = _native.lib().kiln_model_eos_id(self._model.handle)
        return None if value < 0 else value

    def encode(self, text: str, add_special_tokens: bool = True, parse_special: bool = True) -> List[int]:
        """The ids of `text`; with add_special_tokens, BOS where the tokenizer
        adds it; with parse_special, special tokens written in the text
        ("<|im_end|>") become their ids."""
        lib = _native.lib()
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        count = ctypes.c_size_t()
        args = (self._model.handle, data, len(data), int(add_special_tokens), int(parse_special))
        _native.check(lib.kiln_tokenize(*args, None, 0, ctypes.byref(count)))
        ids = (ctypes.c_int32 * max(1, count.value))()
        _native.check(lib.kiln_tokenize(*args, ids, count.value, ctypes.byref(count)))
        return list(ids[: count.value])

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """The text of `token_ids`."""
        ids = [int(i) for i in token_ids]
        array = (ctypes.c_int32 * max(1, len(ids)))(*ids)
        text = ctypes.c_void_p()
        _native.check(_native.lib().kiln_detokenize(self._model.handle, array, len(ids), int(skip_special_tokens),
                                                    ctypes.byref(text)))
        return _native.take_string(text)

    def apply_chat_template(self, messages: Sequence[dict], tokenize: bool = False,
                            add_generation_prompt: bool = True) -> Union[str, List[int]]:
        """The conversation (dicts with "role" and "content", and whatever else
        the template reads) rendered with the model's chat template, ending
        with the assistant's turn; its ids when `tokenize` (generate from the
        text without adding special tokens: the template places them)."""
        if not add_generation_prompt:
            raise ValueError("kiln always renders the generation prompt (add_generation_prompt=True)")
        rendered = ctypes.c_void_p()
        _native.check(_native.lib().kiln_chat_render_json(
            self._model.handle, json.dumps(list(messages), ensure_ascii=False).encode("utf-8"),
            ctypes.byref(rendered)))
        prompt = _native.take_string(rendered)
        return self.encode(prompt, add_special_tokens=False) if tokenize else prompt

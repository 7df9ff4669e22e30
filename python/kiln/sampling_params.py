"""How to pick each next token and when to stop, with vLLM's field names."""

import ctypes
import json
from dataclasses import dataclass, field
from typing import List, Optional, Union

from . import _native


@dataclass
class SamplingParams:
    """Sampling parameters of one request (vLLM's SamplingParams fields that
    kiln supports). Ranges are checked by kiln when a request is added; a
    bad value raises InvalidArgumentError naming the field."""

    n: int = 1  # completions per prompt; kiln produces one
    temperature: float = 1.0  # 0: greedy
    top_p: float = 1.0
    top_k: int = 0  # 0 (or -1): off
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: Optional[int] = None
    max_tokens: Optional[int] = 16
    min_tokens: int = 0
    stop: Optional[Union[str, List[str]]] = None
    stop_token_ids: Optional[List[int]] = None
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    # None: none; 0: the chosen token's log-probability (kiln does not
    # report the most likely alternatives, so larger values are refused).
    logprobs: Optional[int] = None
    # Structured output, enforced token by token (at most one): a JSON
    # Schema (a dict or its JSON text), a GBNF grammar (llama.cpp's format),
    # or any JSON object.
    json_schema: Optional[Union[str, dict]] = None
    grammar: Optional[str] = None
    json_object: bool = False
    _keepalive: list = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self):
        if self.n != 1:
            raise ValueError(f"n={self.n}: kiln generates one completion per prompt (n=1)")
        if self.logprobs is not None and self.logprobs != 0:
            raise ValueError(f"logprobs={self.logprobs}: kiln reports only the chosen token's (logprobs=0)")

    @classmethod
    def _from_struct(cls, s: "_native.SamplingParamsStruct") -> "SamplingParams":
        return cls(
            temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, min_p=s.min_p,
            repetition_penalty=s.repetition_penalty, presence_penalty=s.presence_penalty,
            frequency_penalty=s.frequency_penalty, seed=None if s.seed < 0 else s.seed, max_tokens=s.max_tokens,
            min_tokens=s.min_tokens, ignore_eos=bool(s.ignore_eos), skip_special_tokens=bool(s.skip_special_tokens),
            json_object=bool(s.json_object))

    def _to_struct(self, default_max_tokens: int = 16) -> "_native.SamplingParamsStruct":
        """The C struct; the arrays it points to live as long as this object's
        latest conversion."""
        lib = _native.lib()
        s = _native.SamplingParamsStruct()
        lib.kiln_sampling_params_init(ctypes.byref(s), ctypes.sizeof(s))
        s.temperature = float(self.temperature)
        s.top_p = float(self.top_p)
        s.top_k = 0 if self.top_k == -1 else int(self.top_k)
        s.min_p = float(self.min_p)
        s.repetition_penalty = float(self.repetition_penalty)
        s.presence_penalty = float(self.presence_penalty)
        s.frequency_penalty = float(self.frequency_penalty)
        s.seed = -1 if self.seed is None else int(self.seed) & 0x7FFFFFFFFFFFFFFF
        s.max_tokens = default_max_tokens if self.max_tokens is None else int(self.max_tokens)
        s.min_tokens = int(self.min_tokens)
        s.ignore_eos = int(bool(self.ignore_eos))
        s.skip_special_tokens = int(bool(self.skip_special_tokens))
        s.logprobs = int(self.logprobs is not None)
        stops = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        stop_array = (ctypes.c_char_p * max(1, len(stops)))(*[_native.encode(x, "stop") for x in stops])
        s.stop = ctypes.cast(stop_array, ctypes.POINTER(ctypes.c_char_p))
        s.num_stop = len(stops)
        ids = [int(i) for i in (self.stop_token_ids or [])]
        id_array = (ctypes.c_int32 * max(1, len(ids)))(*ids)
        s.stop_token_ids = ctypes.cast(id_array, _native.c_int32_p)
        s.num_stop_token_ids = len(ids)
        schema = self.json_schema
        if isinstance(schema, dict):
            schema = json.dumps(schema)
        s.json_schema = None if schema is None else _native.encode(schema, "json_schema")
        s.grammar = None if self.grammar is None else _native.encode(self.grammar, "grammar")
        s.json_object = int(bool(self.json_object))
        self._keepalive[:] = [stop_array, id_array, s.json_schema, s.grammar]
        return s

"""Forward passes for your own decoding loop, with numpy arrays in and out:
the logits are written straight into your array, without a copy."""

import ctypes
import os
from typing import Optional, Union

import numpy as np

from . import _native
from .model import Model, load_llm_model

_MODES = {"last": _native.LOGITS_LAST, "all": _native.LOGITS_ALL, "none": _native.LOGITS_NONE}


class Session(_native.OwnedHandle):
    """A KV cache for sequence ids 0 .. max_seqs-1 of up to
    max_tokens_per_seq tokens each (0: the model's context), and forward
    passes that append to it. `model` is a Model, an LLM (its model) or a
    path. Options: threads, max_batch_tokens (tokens per pass; longer runs
    are split), precision ("fp32", "mixed", "bf16"), kv_cache_dtype,
    block_size, backend. Calls are serialized; a session may be shared by
    threads."""

    _kind = "session"
    _destroy_function = "kiln_session_destroy"

    def __init__(self, model, max_seqs: int = 1, max_tokens_per_seq: int = 0, *, threads: int = 0,
                 max_batch_tokens: int = 512, precision: Optional[str] = None,
                 kv_cache_dtype: Optional[str] = None, block_size: int = 16, backend: Optional[str] = None):
        if isinstance(model, (str, os.PathLike)):
            model = load_llm_model(model)
        elif not isinstance(model, Model):
            model = getattr(model, "model", model)  # an LLM
            if not isinstance(model, Model):
                raise TypeError("Session(model): a Model, an LLM or a path")
        self.model = model
        lib = _native.lib()
        o = _native.SessionOptions()
        lib.kiln_session_options_init(ctypes.byref(o), ctypes.sizeof(o))
        o.threads = int(threads)
        o.max_batch_tokens = int(max_batch_tokens)
        o.block_size = int(block_size)
        o.precision = _native.encode(precision, "precision") if precision is not None else None
        o.kv_cache_dtype = _native.encode(kv_cache_dtype, "kv_cache_dtype") if kv_cache_dtype is not None else None
        o.backend = _native.encode(backend, "backend") if backend is not None else None
        handle = ctypes.c_void_p()
        _native.check(lib.kiln_session_create(model.handle, int(max_seqs), int(max_tokens_per_seq),
                                              ctypes.byref(o), ctypes.byref(handle)))
        self._handle = handle
        self.vocab_size = lib.kiln_session_vocab_size(handle)
        self.max_seqs = lib.kiln_session_max_seqs(handle)
        self.max_tokens_per_seq = lib.kiln_session_max_tokens_per_seq(handle)

    def run(self, token_ids, positions=None, seq_ids=None, *, out: Optional[np.ndarray] = None,
            logits: str = "last") -> np.ndarray:
        """One forward pass: token i is token_ids[i] of sequence seq_ids[i]
        (default 0) at positions[i] (default: where its sequence stands; a
        sequence continues at its length). Returns the logits as float32
        rows of vocab_size: logits="last", one per sequence, ordered by where
        each sequence's last token stands; "all", one per token; "none", no
        rows. With `out` (a C-contiguous, writable float32 array holding at
        least rows * vocab_size values) the rows are written into it and a
        view of it is returned; no copy is made."""
        if logits not in _MODES:
            raise ValueError(f"logits={logits!r}: expected 'last', 'all' or 'none'")
        ids = _int32_vector(token_ids, "token_ids")
        n = ids.shape[0]
        pos = None if positions is None else _int32_vector(positions, "positions", n)
        seqs = None if seq_ids is None else _int32_vector(seq_ids, "seq_ids", n)
        if logits == "all":
            rows = n
        elif logits == "none":
            rows = 0
        else:
            rows = 1 if seqs is None else len(np.unique(seqs)) if n else 0
        needed = rows * self.vocab_size
        if out is None:
            out = np.empty((rows, self.vocab_size), dtype=np.float32)
        elif not isinstance(out, np.ndarray) or out.dtype != np.float32:
            raise TypeError("out must be a numpy float32 array")
        elif not out.flags["C_CONTIGUOUS"] or not out.flags["WRITEABLE"]:
            raise ValueError("out must be C-contiguous and writable (the logits are written into it in place)")
        elif out.size < needed:
            raise ValueError(f"out holds {out.size} floats; {rows} rows of {self.vocab_size} need {needed}")
        written = ctypes.c_size_t()
        _native.check(_native.lib().kiln_session_run(
            self.handle, _pointer(ids, _native.c_int32_p), _pointer(pos, _native.c_int32_p),
            _pointer(seqs, _native.c_int32_p), n, _MODES[logits], _pointer(out, _native.c_float_p), out.size,
            ctypes.byref(written)))
        rows = written.value
        if out.ndim == 2 and out.shape[1] == self.vocab_size:
            return out[:rows]
        return out.reshape(-1)[: rows * self.vocab_size].reshape(rows, self.vocab_size)

    def reset(self, seq_id: Optional[int] = None) -> None:
        """Empties a sequence's cache, or every sequence's (seq_id None)."""
        _native.check(_native.lib().kiln_session_reset(self.handle, -1 if seq_id is None else int(seq_id)))

    def truncate(self, seq_id: int, length: int) -> None:
        """Keeps a sequence's first `length` tokens; the next run continues there."""
        _native.check(_native.lib().kiln_session_truncate(self.handle, int(seq_id), int(length)))

    def seq_length(self, seq_id: int = 0) -> int:
        """Tokens in a sequence's cache."""
        length = ctypes.c_int32()
        _native.check(_native.lib().kiln_session_seq_length(self.handle, int(seq_id), ctypes.byref(length)))
        return length.value


def _int32_vector(values, name: str, length: Optional[int] = None) -> np.ndarray:
    """`values` as a contiguous 1-D int32 array (as given when it already is
    one); integers outside int32 are an error, not wrapped."""
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"{name} must hold integers, got {array.dtype}")
    if array.dtype != np.int32:
        if array.size and (array.min() < np.iinfo(np.int32).min or array.max() > np.iinfo(np.int32).max):
            raise ValueError(f"{name} holds values outside int32")
        array = array.astype(np.int32)
    array = np.ascontiguousarray(array)
    if length is not None and array.shape[0] != length:
        raise ValueError(f"{name} has {array.shape[0]} values for {length} tokens")
    return array


def _pointer(array: Optional[np.ndarray], kind):
    return None if array is None else array.ctypes.data_as(kind)

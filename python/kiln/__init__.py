"""kiln for Python: ctypes over libkiln.so (kiln's C API).

    from kiln import LLM, SamplingParams
    llm = LLM("path/to/model", threads=4)
    outputs = llm.generate(["Hello"], SamplingParams(temperature=0, max_tokens=32))
    print(outputs[0].outputs[0].text)

    import kiln, numpy as np
    model = kiln.Model("model.onnx")             # ONNX: a kiln.OnnxModel
    outputs = model.run({"x": np.zeros((1, 3, 224, 224), np.float32)})  # {name: array}

libkiln.so is found through $KILN_LIBRARY, next to this package, in the
repository's build trees, or by the system's loader (see _native.py)."""

from .errors import (CancelledError, CorruptError, InternalError, InvalidArgumentError, KilnError, KilnIOError,
                     KilnMemoryError, NotFoundError, OutOfRangeError, ResourceExhaustedError, UnsupportedError)
from .llm import LLM
from .model import Model, Tokenizer
from .outputs import CompletionOutput, RequestOutput, StreamEvent
from .sampling_params import SamplingParams

__all__ = [
    "LLM", "Model", "Tokenizer", "Session", "SamplingParams", "RequestOutput", "CompletionOutput", "StreamEvent",
    "OnnxModel", "TensorInfo",
    "KilnError", "InvalidArgumentError", "NotFoundError", "CorruptError", "UnsupportedError", "OutOfRangeError",
    "ResourceExhaustedError", "KilnIOError", "CancelledError", "InternalError", "KilnMemoryError",
    "library_version", "set_log_level", "load_backend_plugin",
]


def __getattr__(name):
    # Session and OnnxModel need numpy; the rest of the package does not.
    if name == "Session":
        from .session import Session
        return Session
    if name in ("OnnxModel", "TensorInfo"):
        from . import onnx_model
        return getattr(onnx_model, name)
    raise AttributeError(f"module 'kiln' has no attribute {name!r}")


def library_version() -> str:
    """The release of the libkiln.so in use, e.g. "0.1.0"."""
    from . import _native
    return _native.lib().kiln_version().decode()


def set_log_level(level: str) -> None:
    """What kiln writes to stderr: "debug", "info", "warn", "error" or "off"."""
    from . import _native
    levels = {"debug": 0, "info": 1, "warn": 2, "error": 3, "off": 4}
    if level not in levels:
        raise ValueError(f"log level {level!r}: expected one of {list(levels)}")
    _native.lib().kiln_set_log_level(levels[level])


def load_backend_plugin(path) -> None:
    """Loads a backend plugin (a shared library written against
    include/kiln/kiln_backend.h), so that `backend=` can name its backends.
    Loading the same file again does nothing; a refused file raises with
    kiln's message naming the file and the problem."""
    import os
    from . import _native
    _native.check(_native.lib().kiln_load_backend_plugin(_native.encode(os.fspath(path), "path")))

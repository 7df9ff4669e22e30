"""ctypes declarations of kiln's C API (include/kiln/kiln.h) and the loading
of libkiln.so.

The library is looked for, in order: at $KILN_LIBRARY (a path to
libkiln.so; nothing else is tried when it is set); next to this package
(kiln/libkiln.so); in the repository's build trees (build/src/libkiln.so,
then build-*/src/libkiln.so); then by the system's loader (LD_LIBRARY_PATH,
an installed libkiln.so.0)."""

import ctypes
import os
import pathlib
import threading

from .errors import error_for

API_VERSION = 1  # KILN_API_VERSION of the header these declarations follow

c_int32_p = ctypes.POINTER(ctypes.c_int32)
c_float_p = ctypes.POINTER(ctypes.c_float)


class ModelOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("tokenizer", ctypes.c_char_p),
        ("load_format", ctypes.c_char_p),
        ("preset", ctypes.c_char_p),
        ("dummy_dtype", ctypes.c_char_p),
        ("dummy_seed", ctypes.c_uint64),
    ]


class EngineOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("threads", ctypes.c_int32),
        ("kv_cache_memory_bytes", ctypes.c_int64),
        ("kv_cache_memory_fraction", ctypes.c_double),
        ("kv_cache_dtype", ctypes.c_char_p),
        ("block_size", ctypes.c_int32),
        ("enable_prefix_caching", ctypes.c_int),
        ("max_num_seqs", ctypes.c_int32),
        ("max_num_batched_tokens", ctypes.c_int32),
        ("max_prefill_chunk", ctypes.c_int32),
        ("max_model_len", ctypes.c_int32),
        ("precision", ctypes.c_char_p),
        ("backend", ctypes.c_char_p),
        ("seed", ctypes.c_uint64),
        ("spec_method", ctypes.c_char_p),
        ("spec_tokens", ctypes.c_int32),
        ("spec_ngram_min", ctypes.c_int32),
        ("spec_ngram_max", ctypes.c_int32),
        ("draft_model", ctypes.c_char_p),
        ("draft_dtype", ctypes.c_char_p),
    ]


class SamplingParamsStruct(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("temperature", ctypes.c_double),
        ("top_k", ctypes.c_int32),
        ("top_p", ctypes.c_double),
        ("min_p", ctypes.c_double),
        ("repetition_penalty", ctypes.c_double),
        ("presence_penalty", ctypes.c_double),
        ("frequency_penalty", ctypes.c_double),
        ("seed", ctypes.c_int64),
        ("max_tokens", ctypes.c_int32),
        ("min_tokens", ctypes.c_int32),
        ("stop", ctypes.POINTER(ctypes.c_char_p)),
        ("num_stop", ctypes.c_size_t),
        ("stop_token_ids", c_int32_p),
        ("num_stop_token_ids", ctypes.c_size_t),
        ("ignore_eos", ctypes.c_int),
        ("skip_special_tokens", ctypes.c_int),
        ("logprobs", ctypes.c_int),
        ("grammar", ctypes.c_char_p),
        ("json_schema", ctypes.c_char_p),
        ("json_object", ctypes.c_int),
    ]


class TokenEvent(ctypes.Structure):
    _fields_ = [
        ("request_id", ctypes.c_int64),
        ("token", ctypes.c_int32),
        ("text", ctypes.c_void_p),
        ("text_len", ctypes.c_size_t),
        ("logprob", ctypes.c_float),
        ("finished", ctypes.c_int),
        ("finish_reason", ctypes.c_int),
    ]


TOKEN_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(TokenEvent), ctypes.c_void_p)


class Request(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("prompt", ctypes.c_char_p),
        ("prompt_ids", c_int32_p),
        ("num_prompt_ids", ctypes.c_size_t),
        ("add_special_tokens", ctypes.c_int),
        ("params", ctypes.POINTER(SamplingParamsStruct)),
        ("on_token", TOKEN_CALLBACK),
        ("user_data", ctypes.c_void_p),
    ]


class Completion(ctypes.Structure):
    _fields_ = [
        ("request_id", ctypes.c_int64),
        ("text", ctypes.c_void_p),
        ("text_len", ctypes.c_size_t),
        ("token_ids", c_int32_p),
        ("num_tokens", ctypes.c_size_t),
        ("prompt_token_ids", c_int32_p),
        ("num_prompt_tokens", ctypes.c_size_t),
        ("logprobs", c_float_p),
        ("finish_reason", ctypes.c_int),
        ("cached_tokens", ctypes.c_int32),
        ("time_to_first_token", ctypes.c_double),
        ("time_per_output_token", ctypes.c_double),
    ]


class ChatMessage(ctypes.Structure):
    _fields_ = [("role", ctypes.c_char_p), ("content", ctypes.c_char_p)]


class SessionOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("threads", ctypes.c_int32),
        ("max_batch_tokens", ctypes.c_int32),
        ("precision", ctypes.c_char_p),
        ("kv_cache_dtype", ctypes.c_char_p),
        ("block_size", ctypes.c_int32),
        ("backend", ctypes.c_char_p),
    ]


class Tensor(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_int),
        ("rank", ctypes.c_size_t),
        ("dims", ctypes.POINTER(ctypes.c_int64)),
        ("data", ctypes.c_void_p),
        ("size_bytes", ctypes.c_size_t),
    ]


class InputShape(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dims", ctypes.POINTER(ctypes.c_int64)), ("rank", ctypes.c_size_t)]


class OnnxOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("input_shapes", ctypes.POINTER(InputShape)),
        ("num_input_shapes", ctypes.c_size_t),
        ("fixed_inputs", ctypes.POINTER(Tensor)),
        ("num_fixed_inputs", ctypes.c_size_t),
        ("backend", ctypes.c_char_p),
        ("precision", ctypes.c_char_p),
        ("threads", ctypes.c_int32),
        ("recompile_if_stale", ctypes.c_int32),
    ]


class TensorInfoStruct(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_int),
        ("rank", ctypes.c_size_t),
        ("dims", ctypes.POINTER(ctypes.c_int64)),
    ]


# kiln_dtype values and their names (include/kiln/kiln.h).
DTYPES = {0: "f32", 1: "f16", 2: "bf16", 3: "f64", 4: "i64", 5: "i32", 6: "i16", 7: "i8", 8: "u8", 9: "bool"}

LOGITS_LAST, LOGITS_ALL, LOGITS_NONE = 0, 1, 2
FINISH_REASONS = {0: None, 1: "stop", 2: "length", 3: "abort", 4: "error"}

_P = ctypes.c_void_p  # opaque handles
_STATUS = ctypes.c_int

# name: (result type, argument types)
_PROTOTYPES = {
    "kiln_status_name": (ctypes.c_char_p, [ctypes.c_int]),
    "kiln_last_error": (ctypes.c_char_p, []),
    "kiln_api_version": (ctypes.c_int, []),
    "kiln_version": (ctypes.c_char_p, []),
    "kiln_set_log_level": (None, [ctypes.c_int]),
    "kiln_string_free": (None, [ctypes.c_void_p]),
    "kiln_load_backend_plugin": (_STATUS, [ctypes.c_char_p]),
    "kiln_model_options_init": (None, [ctypes.POINTER(ModelOptions), ctypes.c_size_t]),
    "kiln_model_load": (_STATUS, [ctypes.c_char_p, ctypes.POINTER(ModelOptions), ctypes.POINTER(_P)]),
    "kiln_model_destroy": (None, [_P]),
    "kiln_model_vocab_size": (ctypes.c_int32, [_P]),
    "kiln_model_max_context": (ctypes.c_int32, [_P]),
    "kiln_model_bos_id": (ctypes.c_int32, [_P]),
    "kiln_model_eos_id": (ctypes.c_int32, [_P]),
    "kiln_model_has_tokenizer": (ctypes.c_int, [_P]),
    "kiln_tokenize": (_STATUS, [_P, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, c_int32_p,
                                ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]),
    "kiln_detokenize": (_STATUS, [_P, c_int32_p, ctypes.c_size_t, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]),
    "kiln_chat_render": (_STATUS, [_P, ctypes.POINTER(ChatMessage), ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]),
    "kiln_chat_render_json": (_STATUS, [_P, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]),
    "kiln_engine_options_init": (None, [ctypes.POINTER(EngineOptions), ctypes.c_size_t]),
    "kiln_engine_create": (_STATUS, [_P, ctypes.POINTER(EngineOptions), ctypes.POINTER(_P)]),
    "kiln_engine_destroy": (None, [_P]),
    "kiln_engine_max_model_len": (ctypes.c_int32, [_P]),
    "kiln_sampling_params_init": (None, [ctypes.POINTER(SamplingParamsStruct), ctypes.c_size_t]),
    "kiln_model_sampling_params_init": (None, [_P, ctypes.POINTER(SamplingParamsStruct), ctypes.c_size_t]),
    "kiln_finish_reason_name": (ctypes.c_char_p, [ctypes.c_int]),
    "kiln_request_init": (None, [ctypes.POINTER(Request), ctypes.c_size_t]),
    "kiln_completion_free": (None, [ctypes.POINTER(Completion)]),
    "kiln_engine_add_request": (_STATUS, [_P, ctypes.POINTER(Request), ctypes.POINTER(ctypes.c_int64)]),
    "kiln_engine_wait": (_STATUS, [_P, ctypes.c_int64, ctypes.POINTER(ctypes.POINTER(Completion))]),
    "kiln_engine_abort": (_STATUS, [_P, ctypes.c_int64]),
    "kiln_session_options_init": (None, [ctypes.POINTER(SessionOptions), ctypes.c_size_t]),
    "kiln_session_create": (_STATUS, [_P, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(SessionOptions),
                                      ctypes.POINTER(_P)]),
    "kiln_session_destroy": (None, [_P]),
    "kiln_session_run": (_STATUS, [_P, c_int32_p, c_int32_p, c_int32_p, ctypes.c_size_t, ctypes.c_int, c_float_p,
                                   ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]),
    "kiln_session_reset": (_STATUS, [_P, ctypes.c_int32]),
    "kiln_session_truncate": (_STATUS, [_P, ctypes.c_int32, ctypes.c_int32]),
    "kiln_session_seq_length": (_STATUS, [_P, ctypes.c_int32, ctypes.POINTER(ctypes.c_int32)]),
    "kiln_session_vocab_size": (ctypes.c_int32, [_P]),
    "kiln_session_max_seqs": (ctypes.c_int32, [_P]),
    "kiln_session_max_tokens_per_seq": (ctypes.c_int32, [_P]),
    "kiln_dtype_name": (ctypes.c_char_p, [ctypes.c_int]),
    "kiln_dtype_size": (ctypes.c_size_t, [ctypes.c_int]),
    "kiln_onnx_options_init": (None, [ctypes.POINTER(OnnxOptions), ctypes.c_size_t]),
    "kiln_onnx_model_load": (_STATUS, [ctypes.c_char_p, ctypes.POINTER(OnnxOptions), ctypes.POINTER(_P)]),
    "kiln_onnx_model_destroy": (None, [_P]),
    "kiln_onnx_model_num_inputs": (ctypes.c_size_t, [_P]),
    "kiln_onnx_model_num_outputs": (ctypes.c_size_t, [_P]),
    "kiln_onnx_model_input_info": (_STATUS, [_P, ctypes.c_size_t, ctypes.POINTER(TensorInfoStruct)]),
    "kiln_onnx_model_output_info": (_STATUS, [_P, ctypes.c_size_t, ctypes.POINTER(TensorInfoStruct)]),
    "kiln_onnx_model_output_shape": (_STATUS, [_P, ctypes.POINTER(Tensor), ctypes.c_size_t, ctypes.c_size_t,
                                               ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t,
                                               ctypes.POINTER(ctypes.c_size_t)]),
    "kiln_onnx_model_run": (_STATUS, [_P, ctypes.POINTER(Tensor), ctypes.c_size_t, ctypes.POINTER(Tensor),
                                      ctypes.c_size_t]),
}


def _candidates():
    """Where libkiln.so may be, in the order tried."""
    explicit = os.environ.get("KILN_LIBRARY")
    if explicit:
        return [explicit]
    here = pathlib.Path(__file__).resolve().parent
    found = [str(here / "libkiln.so")]
    repo = here.parent.parent
    builds = [repo / "build"] + sorted(p for p in repo.glob("build-*") if p.is_dir())
    found += [str(b / "src" / "libkiln.so") for b in builds]
    found += ["libkiln.so.0", "libkiln.so"]
    return found


_lock = threading.Lock()
_lib = None


def lib() -> ctypes.CDLL:
    """libkiln.so with every C API function declared; loaded on first use."""
    global _lib
    with _lock:
        if _lib is None:
            _lib = _load()
        return _lib


def _load() -> ctypes.CDLL:
    # oneDNN's OpenMP threads otherwise spin ~0.3 s after each convolution
    # and take the cores from kiln's own threads; a short spin (what the kiln
    # command sets) lets go within tens of microseconds yet spares a wake-up
    # per convolution. libgomp reads this when it is loaded (a process that
    # loaded it before, through torch say, keeps its policy).
    if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
        os.environ["GOMP_SPINCOUNT"] = "3000"
    tried = []
    for candidate in _candidates():
        if os.sep in candidate and not os.path.exists(candidate):
            tried.append(f"{candidate} (no such file)")
            continue
        try:
            library = ctypes.CDLL(candidate)
        except OSError as e:
            tried.append(f"{candidate} ({e})")
            continue
        break
    else:
        raise ImportError("kiln: cannot load libkiln.so; set KILN_LIBRARY to its path. Tried: " + "; ".join(tried))
    for name, (restype, argtypes) in _PROTOTYPES.items():
        function = getattr(library, name)
        function.restype = restype
        function.argtypes = argtypes
    version = library.kiln_api_version()
    if version != API_VERSION:
        raise ImportError(f"kiln: {candidate} has C API version {version}; this package needs {API_VERSION}")
    library.path = candidate
    return library


def check(status: int) -> None:
    """Raises the exception for a failed call's status, with kiln's message
    (read on this thread, right after the call)."""
    if status != 0:
        raise error_for(status, lib().kiln_last_error().decode("utf-8", "replace"))


def encode(text, what: str) -> bytes:
    """`text` as UTF-8 bytes for a C string."""
    if isinstance(text, bytes):
        data = text
    elif isinstance(text, str):
        data = text.encode("utf-8")
    else:
        raise TypeError(f"{what} must be str, not {type(text).__name__}")
    if b"\0" in data:
        raise ValueError(f"{what} contains a NUL character")
    return data


def take_string(pointer: ctypes.c_void_p) -> str:
    """The text of a string the library returned, which is then freed."""
    try:
        return ctypes.string_at(pointer).decode("utf-8", "replace")
    finally:
        lib().kiln_string_free(pointer)


def text_at(pointer, length: int) -> str:
    return ctypes.string_at(pointer, length).decode("utf-8", "replace") if length else ""


class OwnedHandle:
    """A kiln handle this object owns: `close()` (also on leaving a `with`
    block or on garbage collection) returns it with the C function named
    `_destroy_function`; `handle` refuses use after that, naming `_kind`."""

    _kind = "object"
    _destroy_function = ""
    _handle = None

    def close(self) -> None:
        """Releases the handle (once; later calls do nothing)."""
        if self._handle is not None:
            getattr(lib(), self._destroy_function)(self._handle)
            self._handle = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass  # interpreter shutdown

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def handle(self) -> ctypes.c_void_p:
        if self._handle is None:
            raise ValueError(f"the {self._kind} is closed")
        return self._handle

"""Offline generation in the shape of vLLM's LLM class: many prompts
batched together, a streaming iterator, chat, and aborts."""

import ctypes
import os
import queue
import threading
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Union

from . import _native
from .errors import NotFoundError
from .model import Model, Tokenizer, load_llm_model
from .outputs import CompletionOutput, RequestOutput, StreamEvent
from .sampling_params import SamplingParams

Prompt = Union[str, Dict[str, object]]  # text, {"prompt": text} or {"prompt_token_ids": [...]}
_DONE = object()


class LLM(_native.OwnedHandle):
    """An engine over a model: continuous batching on a paged KV cache.

    `model` is a path (a Hugging Face folder or a .gguf file) or a loaded
    Model. Options (all optional): threads (0: one per physical core),
    kv_cache_memory (bytes as an int, or a fraction of available memory as a
    float in (0, 1]), kv_cache_dtype ("f32", "f16", "bf16", "int8"), block_size,
    enable_prefix_caching, max_num_seqs, max_num_batched_tokens,
    max_prefill_chunk, max_model_len, precision ("fp32", "mixed", "bf16"),
    backend, seed, spec_method ("none", "ngram", "draft": speculative
    decoding of greedy requests, with unchanged output), spec_tokens,
    spec_ngram_min, spec_ngram_max, draft_model (with "draft": a path, or
    "self"), draft_dtype (with "self": "q4_0", "q8_0", "bf16", "f16", "f32");
    and for loading from a path: tokenizer, load_format,
    preset, dtype. Every method is thread-safe; requests from several
    threads are batched together."""

    _kind = "engine"
    _destroy_function = "kiln_engine_destroy"

    _ENGINE_FIELDS = ("threads", "kv_cache_dtype", "block_size", "enable_prefix_caching", "max_num_seqs",
                      "max_num_batched_tokens", "max_prefill_chunk", "max_model_len", "precision", "backend",
                      "seed", "spec_method", "spec_tokens", "spec_ngram_min", "spec_ngram_max", "draft_model",
                      "draft_dtype")
    _LOAD_FIELDS = ("tokenizer", "load_format", "preset", "dtype")

    def __init__(self, model: Union[str, os.PathLike, Model], **options):
        unknown = set(options) - set(self._ENGINE_FIELDS) - set(self._LOAD_FIELDS) - {"kv_cache_memory"}
        if unknown:
            raise TypeError(f"LLM() got unknown options {sorted(unknown)}; kiln accepts "
                            f"{sorted(self._ENGINE_FIELDS + self._LOAD_FIELDS + ('kv_cache_memory',))}")
        load = {k: options[k] for k in self._LOAD_FIELDS if k in options}
        if isinstance(model, Model):
            if load:
                raise TypeError(f"{sorted(load)} apply when loading from a path, not to a loaded Model")
            self.model = model
        else:
            self.model = load_llm_model(model, **load)
        lib = _native.lib()
        o = _native.EngineOptions()
        lib.kiln_engine_options_init(ctypes.byref(o), ctypes.sizeof(o))
        for name in self._ENGINE_FIELDS:
            if name in options and options[name] is not None:
                value = options[name]
                setattr(o, name, _native.encode(value, name) if isinstance(value, str) else int(value))
        memory = options.get("kv_cache_memory")
        if isinstance(memory, float):
            o.kv_cache_memory_fraction = memory
        elif memory is not None:
            o.kv_cache_memory_bytes = int(memory)
        handle = ctypes.c_void_p()
        _native.check(lib.kiln_engine_create(self.model.handle, ctypes.byref(o), ctypes.byref(handle)))
        self._handle = handle
        self._callbacks_lock = threading.Lock()
        self._callbacks = {}  # request id -> (ctypes callback, [exception raised in it])

    # Facts.

    def get_tokenizer(self) -> Tokenizer:
        if self.model.tokenizer is None:
            raise ValueError("the model has no tokenizer")
        return self.model.tokenizer

    def get_default_sampling_params(self) -> SamplingParams:
        """The model's generation_config.json defaults (as `kiln generate`)."""
        return self.model.default_sampling_params()

    @property
    def max_model_len(self) -> int:
        return _native.lib().kiln_engine_max_model_len(self.handle)

    # Generation.

    def generate(self, prompts: Union[Prompt, Sequence[Prompt]],
                 sampling_params: Union[None, SamplingParams, Sequence[SamplingParams]] = None,
                 use_tqdm: bool = False) -> List[RequestOutput]:
        """Generates a completion of each prompt, all batched together, and
        returns them in order. `sampling_params` is one for all, one per
        prompt, or None for the model's defaults (get_default_sampling_params)."""
        prompt_list = [prompts] if isinstance(prompts, (str, dict)) else list(prompts)
        params_list = self._params_per_prompt(sampling_params, len(prompt_list))
        return self._run_all([(p, params, True) for p, params in zip(prompt_list, params_list)])

    def chat(self, messages: Union[Sequence[dict], Sequence[Sequence[dict]]],
             sampling_params: Union[None, SamplingParams, Sequence[SamplingParams]] = None,
             use_tqdm: bool = False) -> List[RequestOutput]:
        """Generates the assistant's reply to a conversation (a list of
        {"role", "content"} dicts) or to each of several, rendered with the
        model's chat template."""
        conversations = [messages] if messages and isinstance(messages[0], dict) else list(messages)
        tokenizer = self.get_tokenizer()
        rendered = [tokenizer.apply_chat_template(c) for c in conversations]
        params_list = self._params_per_prompt(sampling_params, len(rendered))
        return self._run_all([(p, params, False) for p, params in zip(rendered, params_list)])

    def generate_stream(self, prompt: Prompt, sampling_params: Optional[SamplingParams] = None,
                        add_special_tokens: bool = True) -> Iterator[str]:
        """Yields the completion's text piece by piece as it is generated.
        Leaving the loop early aborts the request. The generator's return
        value (StopIteration.value) is the RequestOutput."""
        pieces = queue.SimpleQueue()

        def on_token(event: StreamEvent) -> bool:
            if event.text:
                pieces.put(event.text)
            return False

        request_id = self.add_request(prompt, sampling_params, on_token=on_token,
                                      add_special_tokens=add_special_tokens)
        outcome = {}

        def wait():
            try:
                outcome["output"] = self.wait(request_id)
            except BaseException as e:  # handed to the consumer
                outcome["error"] = e
            finally:
                pieces.put(_DONE)

        waiter = threading.Thread(target=wait, name=f"kiln-stream-{request_id}", daemon=True)
        waiter.start()
        completed = False
        try:
            while True:
                piece = pieces.get()
                if piece is _DONE:
                    break
                yield piece
            completed = True
        finally:
            if not completed:
                try:
                    self.abort(request_id)
                except NotFoundError:
                    pass  # collected meanwhile
            waiter.join()
        if "error" in outcome:
            raise outcome["error"]
        return outcome["output"]

    # Requests, one at a time.

    def add_request(self, prompt: Prompt, sampling_params: Optional[SamplingParams] = None,
                    on_token: Optional[Callable[[StreamEvent], bool]] = None,
                    add_special_tokens: bool = True) -> int:
        """Queues a request and returns its id at once; it runs while some
        thread waits for any request. `on_token`, when given, sees each
        StreamEvent on the thread running the engine; returning True aborts
        the request. Collect the result with wait()."""
        params = sampling_params if sampling_params is not None else self.get_default_sampling_params()
        request = _native.Request()
        lib = _native.lib()
        lib.kiln_request_init(ctypes.byref(request), ctypes.sizeof(request))
        text, ids = _split_prompt(prompt)
        if ids is not None:
            id_array = (ctypes.c_int32 * max(1, len(ids)))(*ids)
            request.prompt_ids = ctypes.cast(id_array, _native.c_int32_p)
            request.num_prompt_ids = len(ids)
        if text is not None:
            request.prompt = _native.encode(text, "prompt")
        request.add_special_tokens = int(add_special_tokens)
        params_struct = params._to_struct()
        request.params = ctypes.pointer(params_struct)
        errors = []
        callback = None
        if on_token is not None:
            callback = _native.TOKEN_CALLBACK(_wrap_callback(on_token, errors))
            request.on_token = callback
        request_id = ctypes.c_int64()
        # The callback must outlive the request; registered before it can run.
        with self._callbacks_lock:
            status = lib.kiln_engine_add_request(self.handle, ctypes.byref(request), ctypes.byref(request_id))
            if status == 0:
                self._callbacks[request_id.value] = (callback, errors, text)
        _native.check(status)
        return request_id.value

    def wait(self, request_id: int) -> RequestOutput:
        """Runs the engine until the request has finished and returns its
        output (finish_reason "abort" if it was aborted). Raises an exception
        that a stream callback raised."""
        lib = _native.lib()
        completion = ctypes.POINTER(_native.Completion)()
        status = lib.kiln_engine_wait(self.handle, int(request_id), ctypes.byref(completion))
        message = lib.kiln_last_error()
        with self._callbacks_lock:
            _, errors, prompt = self._callbacks.pop(int(request_id), (None, [], None))
        if status != 0:
            raise _native.error_for(status, message.decode("utf-8", "replace"))
        try:
            output = _to_output(completion.contents, prompt)
        finally:
            lib.kiln_completion_free(completion)
        if errors:
            raise errors[0]
        return output

    def abort(self, request_id: int) -> None:
        """Ends a request at the engine's next step, from any thread; its
        waiter gets the output so far with finish_reason "abort"."""
        _native.check(_native.lib().kiln_engine_abort(self.handle, int(request_id)))

    # Helpers.

    def _params_per_prompt(self, sampling_params, count: int) -> List[SamplingParams]:
        if sampling_params is None:
            return [self.get_default_sampling_params()] * count
        if isinstance(sampling_params, SamplingParams):
            return [sampling_params] * count
        params = list(sampling_params)
        if len(params) != count:
            raise ValueError(f"{len(params)} sampling params for {count} prompts")
        return params

    def _run_all(self, requests) -> List[RequestOutput]:
        """Adds every request, then collects each; on an error, aborts the rest."""
        ids = []
        try:
            for prompt, params, add_special in requests:
                ids.append(self.add_request(prompt, params, add_special_tokens=add_special))
            outputs = []
            for request_id in ids:
                outputs.append(self.wait(request_id))
            return outputs
        except BaseException:
            self._discard(ids)
            raise

    def _discard(self, ids) -> None:
        for request_id in ids:
            try:
                self.abort(request_id)
                self.wait(request_id)
            except Exception:
                pass  # already collected


def _split_prompt(prompt: Prompt):
    """(text, ids) of a prompt; one of them is None."""
    if isinstance(prompt, str):
        return prompt, None
    if isinstance(prompt, dict):
        if "prompt_token_ids" in prompt:
            return None, [int(i) for i in prompt["prompt_token_ids"]]
        if "prompt" in prompt:
            return str(prompt["prompt"]), None
    raise TypeError(f"a prompt is a str, {{'prompt': str}} or {{'prompt_token_ids': [...]}}, not {prompt!r:.80}")


def _wrap_callback(on_token, errors):
    """A C callback calling `on_token`; an exception it raises is kept in
    `errors` (for wait() to raise) and aborts the request."""

    def callback(event_pointer, _user_data):
        try:
            e = event_pointer.contents
            event = StreamEvent(request_id=e.request_id, token=e.token, text=_native.text_at(e.text, e.text_len),
                                logprob=e.logprob, finished=bool(e.finished),
                                finish_reason=_native.FINISH_REASONS.get(e.finish_reason))
            return 1 if on_token(event) else 0
        except BaseException as exc:  # noqa: BLE001 - nothing may cross into C
            errors.append(exc)
            return 1

    return callback


def _to_output(c: "_native.Completion", prompt: Optional[str]) -> RequestOutput:
    ids = list(c.token_ids[: c.num_tokens]) if c.num_tokens else []
    logprobs = list(c.logprobs[: c.num_tokens]) if c.logprobs else None
    completion = CompletionOutput(
        index=0, text=_native.text_at(c.text, c.text_len), token_ids=ids,
        cumulative_logprob=sum(logprobs) if logprobs is not None else None, logprobs=logprobs,
        finish_reason=_native.FINISH_REASONS.get(c.finish_reason))
    return RequestOutput(
        request_id=c.request_id, prompt=prompt,
        prompt_token_ids=list(c.prompt_token_ids[: c.num_prompt_tokens]) if c.num_prompt_tokens else [],
        outputs=[completion], num_cached_tokens=c.cached_tokens,
        metrics={"time_to_first_token": c.time_to_first_token, "time_per_output_token": c.time_per_output_token})

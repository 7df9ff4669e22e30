"""What generation returns, in the shape of vLLM's RequestOutput."""

from dataclasses import dataclass, field
from typing import List, Optional


@dataclass
class CompletionOutput:
    """One completion of a prompt."""

    index: int
    text: str
    token_ids: List[int]  # including a final end-of-sequence or stop id
    cumulative_logprob: Optional[float]
    logprobs: Optional[List[float]]  # per token, when SamplingParams.logprobs was set
    finish_reason: Optional[str]  # "stop", "length" or "abort"
    stop_reason: Optional[str] = None

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class RequestOutput:
    """A finished request: its prompt and its completion (outputs[0])."""

    request_id: int
    prompt: Optional[str]
    prompt_token_ids: List[int]
    outputs: List[CompletionOutput]
    finished: bool = True
    num_cached_tokens: int = 0
    metrics: dict = field(default_factory=dict)  # time_to_first_token, time_per_output_token (seconds)


@dataclass
class StreamEvent:
    """What an on_token callback of LLM.add_request is told."""

    request_id: int
    token: int  # -1 when the event only reports the end
    text: str  # text this token completes (often empty)
    logprob: float
    finished: bool
    finish_reason: Optional[str]

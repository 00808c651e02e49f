"""What the client returns: plain, immutable Python values (no Cap'n Proto readers escape the package).

Health and Stats mirror the schema's HealthReply and StatsReply field for field (snake_case names), built
from the schema at import time, so a field appended to the protocol appears here without a client change.
"""
import dataclasses
import re
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

from . import _schema


@dataclass(frozen=True)
class TopLogprob:
    token_id: int
    logprob: float


@dataclass(frozen=True)
class TokenLogprobs:
    logprob: float                    # of the chosen token under the model's raw distribution
    top: Tuple[TopLogprob, ...]       # the `logprobs` most likely tokens, most likely first


@dataclass(frozen=True)
class Chunk:
    """New output of one sample: final text (never retracted; stop strings already cut) and its ids."""
    sample_index: int
    token_ids: Tuple[int, ...]
    text: str
    logprobs: Tuple[TokenLogprobs, ...]   # one per token id when logprobs > 0 was asked


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    cached_prompt_tokens: int         # prompt tokens served from the prefix cache


@dataclass(frozen=True)
class Finish:
    sample_index: int
    reason: str                       # "stop" | "length" | "cancelled"
    usage: Usage
    ttft_ms: float                    # arrival -> first token of this sample
    tpot_ms: float                    # mean time per output token after the first
    seed: int                         # the request's seed (given or drawn by the server)
    num_replays: int = 0              # re-runs after a lost worker group (the tokens are the same)
    num_draft_tokens: int = 0         # speculative proposals verified for this sample
    num_accepted_tokens: int = 0      # of those, kept (the tokens are the same either way)
    beam_score: float = 0.0           # beam search: cumulative_logprob / length^length_penalty
    cumulative_logprob: float = 0.0   # beam search: the sum of the hypothesis's token logprobs


@dataclass(frozen=True)
class PromptLogprobs:
    token_ids: Tuple[int, ...]                 # the whole prompt as the model saw it
    logprobs: Tuple[TokenLogprobs, ...]        # one per token after the first


@dataclass
class Sample:
    """One of the n samples of a request, assembled from its chunks and its finish."""
    index: int
    text: str = ""
    token_ids: List[int] = field(default_factory=list)
    logprobs: List[TokenLogprobs] = field(default_factory=list)
    finish: Optional[Finish] = None

    @property
    def finish_reason(self) -> Optional[str]:
        return self.finish.reason if self.finish else None

    @property
    def usage(self) -> Optional[Usage]:
        return self.finish.usage if self.finish else None


@dataclass
class GenerateResult:
    """A finished generate request. text, token_ids, logprobs and finish_reason are sample 0's; usage
    counts the prompt once and the completion tokens of all samples (as OpenAI's usage does)."""
    request_id: int
    samples: List[Sample]
    prompt_logprobs: Optional[PromptLogprobs] = None

    @property
    def text(self) -> str:
        return self.samples[0].text

    @property
    def token_ids(self) -> List[int]:
        return self.samples[0].token_ids

    @property
    def logprobs(self) -> List[TokenLogprobs]:
        return self.samples[0].logprobs

    @property
    def finish_reason(self) -> Optional[str]:
        return self.samples[0].finish_reason

    @property
    def seed(self) -> int:
        """The seed the request ran with: pass it as `seed=` to replay the same samples."""
        return self.samples[0].finish.seed

    @property
    def usage(self) -> Usage:
        first = self.samples[0].finish.usage
        return Usage(first.prompt_tokens, sum(s.finish.usage.completion_tokens for s in self.samples),
                     first.cached_prompt_tokens)


@dataclass(frozen=True)
class Tokenized:
    token_ids: Tuple[int, ...]
    max_model_len: int                # the model's context length


def snake_case(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _mirror(name: str, struct) -> type:
    fields = [snake_case(f) for f in struct.schema.fieldnames]
    return dataclasses.make_dataclass(name, fields, frozen=True, namespace={"__module__": __name__})


Health = _mirror("Health", _schema.client.HealthReply)  # ok, num_worker_groups, draining, model_name, ...
Stats = _mirror("Stats", _schema.client.StatsReply)     # num_waiting, num_running, blocks_used, ...

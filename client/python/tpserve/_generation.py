"""Folds the replies to one generate request into chunks and a GenerateResult, the same way for Client and
AsyncClient: chunks and a promptLogprobs message before them, one finish per sample, or one error."""
from typing import Any, Optional

from .errors import TpserveError
from .types import Chunk, GenerateResult, Sample


class Generation:
    def __init__(self, request_id: int, n: int):
        self.result = GenerateResult(request_id, [Sample(i) for i in range(n)])
        self.num_finished = 0

    @property
    def is_done(self) -> bool:
        return self.num_finished == len(self.result.samples)

    def add(self, kind: str, payload: Any) -> Optional[Chunk]:
        """Takes one reply; returns it when it is a chunk. Raises the server's error."""
        if kind == "error":
            raise payload
        if kind == "promptLogprobs":
            self.result.prompt_logprobs = payload
        elif kind in ("chunk", "finish"):
            if payload.sample_index >= len(self.result.samples):
                raise TpserveError(f"server sent {kind} for sample {payload.sample_index} of "
                                   f"{len(self.result.samples)}", self.result.request_id)
            sample = self.result.samples[payload.sample_index]
            if kind == "chunk":
                sample.text += payload.text
                sample.token_ids.extend(payload.token_ids)
                sample.logprobs.extend(payload.logprobs)
                return payload
            if sample.finish is None:
                self.num_finished += 1
            sample.finish = payload
        return None

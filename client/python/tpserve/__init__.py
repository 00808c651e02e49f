"""tpserve: the Python client of the tpserve inference server (its ZeroMQ + Cap'n Proto client protocol).

    from tpserve import Client
    with Client("tcp://127.0.0.1:5555") as client:
        print(client.generate("The capital of France is", max_tokens=8).text)
        for chunk in client.stream(messages=[{"role": "user", "content": "Hi!"}], max_tokens=32):
            print(chunk.text, end="", flush=True)
"""
from ._schema import PROTOCOL_VERSION
from .async_client import AsyncClient, AsyncStream
from .client import Client, Stream
from .errors import (CancelledError, ConnectionLostError, InternalError, InvalidRequestError, OverloadedError,
                     PromptTooLongError, TpserveError, TpserveTimeoutError, UnauthenticatedError, UnavailableError,
                     WorkerLostError)
from .types import (Chunk, Finish, GenerateResult, Health, PromptLogprobs, Sample, Stats, Tokenized, TokenLogprobs,
                    TopLogprob, Usage)

__version__ = "0.3.0"
__all__ = [
    "PROTOCOL_VERSION", "AsyncClient", "AsyncStream", "Client", "Stream", "CancelledError", "ConnectionLostError",
    "InternalError",
    "InvalidRequestError", "OverloadedError", "PromptTooLongError", "TpserveError", "TpserveTimeoutError",
    "UnauthenticatedError", "UnavailableError", "WorkerLostError", "Chunk", "Finish", "GenerateResult", "Health",
    "PromptLogprobs", "Sample", "Stats", "Tokenized", "TokenLogprobs", "TopLogprob", "Usage",
]

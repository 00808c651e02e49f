"""Typed exceptions: one class per ErrorKind of the client protocol, all subclasses of TpserveError."""
from typing import Dict, Optional, Type


class TpserveError(Exception):
    """An error the server answered (`kind` is its ErrorKind name) or one the client met itself (kind None)."""

    kind: Optional[str] = None

    def __init__(self, message: str, request_id: Optional[int] = None):
        super().__init__(message)
        self.message = message
        self.request_id = request_id


class InternalError(TpserveError):
    kind = "internal"


class InvalidRequestError(TpserveError):
    """A field out of range, an empty prompt, a bad token id, a protocol version the server does not speak."""
    kind = "invalidRequest"


class PromptTooLongError(TpserveError):
    """The prompt (plus max_tokens) exceeds the model's context length."""
    kind = "promptTooLong"


class OverloadedError(TpserveError):
    """The server's queue is full: retry later."""
    kind = "overloaded"


class CancelledError(TpserveError):
    kind = "cancelled"


class WorkerLostError(TpserveError):
    """The worker group running the request went away."""
    kind = "workerLost"


class UnauthenticatedError(TpserveError):
    """Missing or wrong API key."""
    kind = "unauthenticated"


class UnavailableError(TpserveError):
    """No worker group serves (starting, draining or lost): retry later."""
    kind = "unavailable"


class ConnectionLostError(TpserveError, ConnectionError):
    """The connection to the coordinator dropped (it died or restarted) while the request was in flight: the
    request is gone with the coordinator, which held its state. Send it again (with a seed, the same tokens)."""


class TpserveTimeoutError(TpserveError, TimeoutError):
    """The client waited `timeout` seconds for the server's next message (or to send one) in vain."""


_BY_KIND: Dict[str, Type[TpserveError]] = {
    cls.kind: cls
    for cls in (InternalError, InvalidRequestError, PromptTooLongError, OverloadedError, CancelledError,
                WorkerLostError, UnauthenticatedError, UnavailableError)
}


def error_from_reply(kind: str, message: str, request_id: int) -> TpserveError:
    """The exception for a server `error` reply; a kind newer than this client is a plain TpserveError."""
    cls = _BY_KIND.get(kind)
    if cls is None:
        error = TpserveError(f"{kind}: {message}", request_id)
        error.kind = kind
        return error
    return cls(message, request_id)

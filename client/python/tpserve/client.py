"""Client: the blocking Python client of tpserve. One ZeroMQ DEALER socket to a coordinator's client endpoint,
speaking comm/schema/client.capnp (the C++ twin is client/client.h).

Replies are routed by request id, so several streams can be open on one Client and read in any order. While
it waits for the server, the client sends a heartbeat every `heartbeat_interval` seconds: the coordinator
cancels the requests of a client silent for 30 s (its --client-timeout-ms), so a stream left unread for that
long is cancelled. Not thread-safe: use one Client per thread (AsyncClient for many requests in one thread).
"""
import collections
import os
import time
from typing import Any, Deque, Dict, Optional, Sequence, Tuple

import zmq
from zmq.utils.monitor import recv_monitor_message

from . import _wire
from ._generation import Generation
from ._keys import use_curve_keys
from ._connection import MONITORED_EVENTS, ConnectionWatch
from .errors import TpserveError, TpserveTimeoutError
from .types import Chunk, GenerateResult, Health, Stats, Tokenized

_LINGER_MS = 500  # on close, how long a last message (a cancel) may wait to leave


def api_key_or_default(api_key: Optional[str]) -> str:
    """The key sent with each request: the one given, else $TPSERVE_API_KEY, else none."""
    return os.environ.get("TPSERVE_API_KEY", "") if api_key is None else api_key


class Client:
    def __init__(self, endpoint: str = "tcp://127.0.0.1:5555", api_key: Optional[str] = None,
                 timeout: float = 60.0, heartbeat_interval: float = 2.0, keys_dir: Optional[str] = None,
                 key_name: Optional[str] = None):
        """Connects in the background: a server that is not there shows up as TpserveTimeoutError after
        `timeout` seconds, the longest the client waits for the server's next message."""
        self.endpoint = endpoint
        self._api_key = api_key_or_default(api_key)
        self._timeout = timeout
        self._heartbeat_interval = heartbeat_interval
        self._context = zmq.Context()
        self._socket = self._context.socket(zmq.DEALER)
        self._socket.setsockopt(zmq.LINGER, _LINGER_MS)
        self._socket.setsockopt(zmq.SNDTIMEO, int(timeout * 1000))
        use_curve_keys(self._socket, keys_dir, key_name)  # CURVE when the coordinator has keys (--keys DIR)
        self._monitor = self._socket.get_monitor_socket(MONITORED_EVENTS)
        self._watch = ConnectionWatch(endpoint)
        self._socket.connect(endpoint)
        self._inbox: Dict[int, Deque[Tuple[str, Any]]] = {}  # replies of the requests still awaited
        self._next_request_id = 1
        self._last_sent = time.monotonic()
        self._poller = zmq.Poller()
        self._poller.register(self._socket, zmq.POLLIN)
        self._poller.register(self._monitor, zmq.POLLIN)

    # --- generation ---

    def generate(self, prompt: Optional[str] = None, *, token_ids: Optional[Sequence[int]] = None,
                 messages: Optional[Sequence[_wire.Message]] = None, **params) -> GenerateResult:
        """Runs one request to its end. Exactly one of prompt (text), token_ids or messages (chat);
        params as in tpserve._wire.generate_filler (max_tokens, temperature, seed, stop, n, logprobs, ...)."""
        fill = _wire.generate_filler(prompt, token_ids, messages, False, params)
        with Stream(self, self._start("generate", fill), params.get("n")) as stream:
            return stream.result

    def chat(self, messages: Sequence[_wire.Message], **params) -> GenerateResult:
        """generate() on a conversation, rendered with the model's chat format."""
        return self.generate(messages=messages, **params)

    def stream(self, prompt: Optional[str] = None, *, token_ids: Optional[Sequence[int]] = None,
               messages: Optional[Sequence[_wire.Message]] = None, **params) -> "Stream":
        """Sends the request now; returns an iterator of its chunks (see Stream)."""
        fill = _wire.generate_filler(prompt, token_ids, messages, True, params)
        return Stream(self, self._start("generate", fill), params.get("n"))

    def cancel(self, request_id: int) -> None:
        """Cancels a generate request; its samples end with finish reason "cancelled"."""
        self._send(request_id, "cancel")

    # --- the rest of the protocol ---

    def health(self) -> Health:
        return self._call("health", "health")

    def stats(self) -> Stats:
        return self._call("stats", "stats")

    def metrics(self) -> str:
        """The coordinator's metrics in Prometheus text format."""
        return self._call("metrics", "metrics")

    def tokenize(self, text: Optional[str] = None, *, messages: Optional[Sequence[_wire.Message]] = None,
                 add_special_tokens: bool = True) -> Tokenized:
        return self._call("tokenize", "tokenize", _wire.tokenize_filler(text, messages, add_special_tokens))

    def detokenize(self, token_ids: Sequence[int]) -> str:
        return self._call("detokenize", "detokenize", _wire.detokenize_filler(token_ids))

    def close(self) -> None:
        if not self._socket.closed:
            self._socket.disable_monitor()
            self._monitor.close()
            self._socket.close()
            self._context.term()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- messages ---

    def _send(self, request_id: int, kind: str, fill=None) -> None:
        try:
            self._socket.send(_wire.encode(request_id, self._api_key, kind, fill))
        except zmq.Again:
            raise TpserveTimeoutError(f"could not send to {self.endpoint} in {self._timeout} s", request_id)
        self._last_sent = time.monotonic()

    def _check_connection(self) -> None:
        """Fails every request awaited when an established connection dropped (reads the monitor's events)."""
        while True:
            try:
                event = recv_monitor_message(self._monitor, zmq.NOBLOCK)["event"]
            except zmq.Again:
                return
            if self._watch.dropped(event):
                for request_id, inbox in self._inbox.items():
                    inbox.append(("error", self._watch.error(request_id)))

    def _start(self, kind: str, fill=None) -> int:
        self._check_connection()  # a drop before this request concerns only those before it
        request_id = self._next_request_id
        self._next_request_id += 1
        self._inbox[request_id] = collections.deque()
        try:
            self._send(request_id, kind, fill)
        except BaseException:
            del self._inbox[request_id]
            raise
        return request_id

    def _forget(self, request_id: int) -> None:
        """Replies to request_id that still come are dropped."""
        self._inbox.pop(request_id, None)

    def _next(self, request_id: int) -> Tuple[str, Any]:
        """The next reply to request_id: (body kind, payload); heartbeats while it waits."""
        inbox = self._inbox[request_id]
        deadline = time.monotonic() + self._timeout
        while not inbox:
            now = time.monotonic()
            if now - self._last_sent >= self._heartbeat_interval:
                self._send(0, "heartbeat")
            if now >= deadline:
                raise TpserveTimeoutError(f"no reply from {self.endpoint} in {self._timeout} s", request_id)
            ready = dict(self._poller.poll(1 + int(1000 * min(deadline - now, self._heartbeat_interval))))
            if self._socket in ready:
                self._receive_ready()
            if self._monitor in ready:
                self._check_connection()
        return inbox.popleft()

    def _receive_ready(self) -> None:
        while True:
            try:
                decoded = _wire.decode(self._socket.recv(zmq.NOBLOCK))
            except zmq.Again:
                return
            if decoded is not None and decoded[0] in self._inbox:
                self._inbox[decoded[0]].append(decoded[1:])

    def _call(self, kind: str, reply_kind: str, fill=None) -> Any:
        request_id = self._start(kind, fill)
        try:
            while True:
                got, payload = self._next(request_id)
                if got == "error":
                    raise payload
                if got == reply_kind:
                    return payload
        finally:
            self._forget(request_id)


class Stream:
    """The chunks of one generate request (the n samples interleaved, each chunk naming its sample), then
    StopIteration; a server error is raised as its TpserveError. Leaving early (break, close(), the end of a
    `with` block, or dropping the stream) cancels the request on the server and frees its KV blocks."""

    def __init__(self, client: Client, request_id: int, n: Optional[int]):
        self.request_id = request_id
        self._client = client
        self._generation = Generation(request_id, max(n or 1, 1))
        self._is_open = True

    def __iter__(self) -> "Stream":
        return self

    def __next__(self) -> Chunk:
        while self._is_open and not self._generation.is_done:
            kind, payload = self._client._next(self.request_id)
            try:
                chunk = self._generation.add(kind, payload)
            except TpserveError:
                self._close(cancel=False)
                raise
            if chunk is not None:
                return chunk
        self._close(cancel=False)
        raise StopIteration

    @property
    def result(self) -> GenerateResult:
        """The whole result; reads the rest of the stream first. After close(), what had arrived."""
        for _ in self:
            pass
        return self._generation.result

    def close(self) -> None:
        self._close(cancel=True)

    def _close(self, cancel: bool) -> None:
        if not self._is_open:
            return
        self._is_open = False
        self._client._forget(self.request_id)
        if cancel and not self._generation.is_done and not self._client._socket.closed:
            self._client.cancel(self.request_id)

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # the interpreter is exiting or the socket is gone: nothing left to cancel with
            pass

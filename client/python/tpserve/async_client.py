"""AsyncClient: the asyncio twin of Client (zmq.asyncio), for many concurrent requests on one connection.

One reader task (started with the first request) routes each reply to its request's queue and, while any
request is awaited, sends a heartbeat every `heartbeat_interval` seconds, so a request is kept alive however
slowly its stream is consumed. Use it from one event loop.
"""
import asyncio
import time
from typing import Any, Dict, Optional, Sequence, Set, Tuple

import zmq
import zmq.asyncio
from zmq.utils.monitor import parse_monitor_message

from . import _wire
from ._connection import MONITORED_EVENTS, ConnectionWatch
from ._generation import Generation
from ._keys import use_curve_keys
from .client import _LINGER_MS, api_key_or_default
from .errors import TpserveError, TpserveTimeoutError
from .types import Chunk, GenerateResult, Health, Stats, Tokenized


class AsyncClient:
    def __init__(self, endpoint: str = "tcp://127.0.0.1:5555", api_key: Optional[str] = None,
                 timeout: float = 60.0, heartbeat_interval: float = 2.0, keys_dir: Optional[str] = None,
                 key_name: Optional[str] = None):
        self.endpoint = endpoint
        self._api_key = api_key_or_default(api_key)
        self._timeout = timeout
        self._heartbeat_interval = heartbeat_interval
        self._context = zmq.asyncio.Context()
        self._socket = self._context.socket(zmq.DEALER)
        self._socket.setsockopt(zmq.LINGER, _LINGER_MS)
        use_curve_keys(self._socket, keys_dir, key_name)  # CURVE when the coordinator has keys (--keys DIR)
        self._monitor = self._socket.get_monitor_socket(MONITORED_EVENTS)
        self._watch = ConnectionWatch(endpoint)
        self._poller = zmq.asyncio.Poller()
        self._poller.register(self._socket, zmq.POLLIN)
        self._poller.register(self._monitor, zmq.POLLIN)
        self._socket.connect(endpoint)
        self._inbox: Dict[int, asyncio.Queue] = {}
        self._next_request_id = 1
        self._last_sent = time.monotonic()
        self._reader: Optional[asyncio.Task] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._cancels: Set[asyncio.Task] = set()  # cancels of dropped streams, held until sent

    # --- generation ---

    async def generate(self, prompt: Optional[str] = None, *, token_ids: Optional[Sequence[int]] = None,
                       messages: Optional[Sequence[_wire.Message]] = None, **params) -> GenerateResult:
        """As Client.generate."""
        fill = _wire.generate_filler(prompt, token_ids, messages, False, params)
        async with AsyncStream(self, self._allocate_id(), params.get("n"), fill) as stream:
            return await stream.result()

    async def chat(self, messages: Sequence[_wire.Message], **params) -> GenerateResult:
        return await self.generate(messages=messages, **params)

    def stream(self, prompt: Optional[str] = None, *, token_ids: Optional[Sequence[int]] = None,
               messages: Optional[Sequence[_wire.Message]] = None, **params) -> "AsyncStream":
        """Checks the arguments now; the request is sent when the stream is first read (or entered):
        `async for chunk in client.stream(...)`."""
        fill = _wire.generate_filler(prompt, token_ids, messages, True, params)
        return AsyncStream(self, self._allocate_id(), params.get("n"), fill)

    async def cancel(self, request_id: int) -> None:
        await self._send(request_id, "cancel")

    # --- the rest of the protocol ---

    async def health(self) -> Health:
        return await self._call("health", "health")

    async def stats(self) -> Stats:
        return await self._call("stats", "stats")

    async def metrics(self) -> str:
        return await self._call("metrics", "metrics")

    async def tokenize(self, text: Optional[str] = None, *, messages: Optional[Sequence[_wire.Message]] = None,
                       add_special_tokens: bool = True) -> Tokenized:
        return await self._call("tokenize", "tokenize", _wire.tokenize_filler(text, messages, add_special_tokens))

    async def detokenize(self, token_ids: Sequence[int]) -> str:
        return await self._call("detokenize", "detokenize", _wire.detokenize_filler(token_ids))

    async def close(self) -> None:
        if self._cancels:
            await asyncio.gather(*self._cancels, return_exceptions=True)
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
        if not self._socket.closed:
            self._socket.disable_monitor()
            self._monitor.close()
            self._socket.close()
            self._context.term()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # --- messages ---

    def _allocate_id(self) -> int:
        self._next_request_id += 1
        return self._next_request_id - 1

    async def _send(self, request_id: int, kind: str, fill=None) -> None:
        try:
            await asyncio.wait_for(self._socket.send(_wire.encode(request_id, self._api_key, kind, fill)),
                                   self._timeout)
        except asyncio.TimeoutError:
            raise TpserveTimeoutError(f"could not send to {self.endpoint} in {self._timeout} s", request_id)
        self._last_sent = time.monotonic()

    async def _start(self, request_id: int, kind: str, fill=None) -> None:
        self._inbox[request_id] = asyncio.Queue()
        if self._reader is None or self._reader.done():
            self._loop = asyncio.get_running_loop()
            self._reader = self._loop.create_task(self._read())
        try:
            await self._send(request_id, kind, fill)
        except BaseException:
            self._forget(request_id)
            raise

    def _forget(self, request_id: int) -> None:
        self._inbox.pop(request_id, None)

    def _cancel_soon(self, request_id: int) -> None:
        """Sends a cancel from outside a coroutine (a stream dropped unclosed)."""
        def start() -> None:
            task = self._loop.create_task(self.cancel(request_id))
            self._cancels.add(task)
            task.add_done_callback(self._cancels.discard)
        self._loop.call_soon_threadsafe(start)

    async def _next(self, request_id: int) -> Tuple[str, Any]:
        try:
            return await asyncio.wait_for(self._inbox[request_id].get(), self._timeout)
        except asyncio.TimeoutError:
            raise TpserveTimeoutError(f"no reply from {self.endpoint} in {self._timeout} s", request_id)

    async def _read(self) -> None:
        """Routes replies to their requests' queues; heartbeats while a request is awaited."""
        try:
            while True:
                ready = dict(await self._poller.poll(int(1000 * self._heartbeat_interval)))
                if self._socket in ready:
                    decoded = _wire.decode(await self._socket.recv())
                    if decoded is not None and decoded[0] in self._inbox:
                        self._inbox[decoded[0]].put_nowait(decoded[1:])
                if self._monitor in ready:
                    event = parse_monitor_message(await self._monitor.recv_multipart())["event"]
                    if self._watch.dropped(event):  # the requests in flight are lost with the coordinator
                        for request_id, queue in self._inbox.items():
                            queue.put_nowait(("error", self._watch.error(request_id)))
                if self._inbox and time.monotonic() - self._last_sent >= self._heartbeat_interval:
                    await self._send(0, "heartbeat")
        except Exception as e:  # the socket failed: every waiting request learns it now, not at its timeout
            for request_id, queue in self._inbox.items():
                queue.put_nowait(("error", TpserveError(f"connection to {self.endpoint} failed: {e}", request_id)))

    async def _call(self, kind: str, reply_kind: str, fill=None) -> Any:
        request_id = self._allocate_id()
        await self._start(request_id, kind, fill)
        try:
            while True:
                got, payload = await self._next(request_id)
                if got == "error":
                    raise payload
                if got == reply_kind:
                    return payload
        finally:
            self._forget(request_id)


class AsyncStream:
    """As Stream, for `async for`. Leaving early (break then aclose(), the end of an `async with` block, or
    dropping the stream) cancels the request on the server."""

    def __init__(self, client: AsyncClient, request_id: int, n: Optional[int], fill):
        self.request_id = request_id
        self._client = client
        self._fill = fill
        self._generation = Generation(request_id, max(n or 1, 1))
        self._is_started = False
        self._is_open = True

    async def _ensure_started(self) -> None:
        if not self._is_started:
            self._is_started = True
            await self._client._start(self.request_id, "generate", self._fill)

    def __aiter__(self) -> "AsyncStream":
        return self

    async def __anext__(self) -> Chunk:
        await self._ensure_started()
        while self._is_open and not self._generation.is_done:
            kind, payload = await self._client._next(self.request_id)
            try:
                chunk = self._generation.add(kind, payload)
            except TpserveError:
                self._close()
                raise
            if chunk is not None:
                return chunk
        self._close()
        raise StopAsyncIteration

    async def result(self) -> GenerateResult:
        """The whole result; reads the rest of the stream first. After aclose(), what had arrived."""
        async for _ in self:
            pass
        return self._generation.result

    async def aclose(self) -> None:
        if self._close():
            await self._client.cancel(self.request_id)

    def _close(self) -> bool:
        """Stops routing replies here; True when the request is still running on the server."""
        if not self._is_open:
            return False
        self._is_open = False
        self._client._forget(self.request_id)
        return self._is_started and not self._generation.is_done

    async def __aenter__(self) -> "AsyncStream":
        await self._ensure_started()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    def __del__(self) -> None:
        try:
            if self._close():
                self._client._cancel_soon(self.request_id)
        except Exception:  # the loop is closed: nothing left to cancel with
            pass

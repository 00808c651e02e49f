"""The Python client's side of the protocol against a scripted fake coordinator (a ZeroMQ ROUTER in a
thread; no model): heartbeats while a reply is awaited, cancel when a stream is left, replies routed by
request id, unreadable replies skipped."""
import asyncio
import threading
import time

import pytest
import zmq

import tpserve
from tpserve import _schema

wire = _schema.client
HEARTBEAT = 0.05  # seconds, the clients' heartbeat interval in these tests


class FakeCoordinator:
    """Records every client message as (request id, body kind); `script(fake)` runs in its thread."""

    def __init__(self, script):
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.ROUTER)
        self.socket.setsockopt(zmq.LINGER, 0)
        port = self.socket.bind_to_random_port("tcp://127.0.0.1")
        self.endpoint = f"tcp://127.0.0.1:{port}"
        self.received = []
        self.peer = None
        self.error = None
        self.thread = threading.Thread(target=self._run, args=(script,))
        self.thread.start()

    def _run(self, script):
        try:
            script(self)
        except Exception as e:  # reported by join()
            self.error = e

    def receive_until(self, kind: str, timeout: float = 5.0):
        """Receives until a message of `kind` arrives; returns its request id."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.socket.poll(10):
                self.peer, data = self.socket.recv_multipart()
                with wire.ClientMessage.from_bytes(data) as m:
                    assert m.version == tpserve.PROTOCOL_VERSION
                    self.received.append((m.requestId, str(m.body.which())))
                if self.received[-1][1] == kind:
                    return self.received[-1][0]
        raise AssertionError(f"no {kind} message in {timeout} s; got {self.received}")

    def receive_for(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.socket.poll(10):
                self.peer, data = self.socket.recv_multipart()
                with wire.ClientMessage.from_bytes(data) as m:
                    self.received.append((m.requestId, str(m.body.which())))

    def reply(self, request_id: int, body_kind: str, **fields) -> None:
        m = wire.ServerMessage.new_message(version=tpserve.PROTOCOL_VERSION, requestId=request_id)
        body = m.body.init(body_kind)
        for name, value in fields.items():
            setattr(body, name, value)
        self.socket.send_multipart([self.peer, m.to_bytes()])

    def count(self, kind: str) -> int:
        return sum(1 for _, k in self.received if k == kind)

    def join(self) -> None:
        self.thread.join(10)
        assert not self.thread.is_alive()
        self.socket.close()
        self.context.term()
        if self.error:
            raise self.error


def answer_slowly(fake):
    """Answers a generate request after 0.5 s of silence, with a stray reply and garbage first."""
    request_id = fake.receive_until("generate")
    fake.receive_for(0.5)
    fake.reply(request_id + 100, "chunk", text="not yours")
    fake.socket.send_multipart([fake.peer, b"not a capnp message"])
    fake.reply(request_id, "chunk", text="Hi", tokenIds=[5, 6])
    fake.reply(request_id, "finish", reason="length", seed=77)


def test_client_heartbeats_while_it_waits():
    fake = FakeCoordinator(answer_slowly)
    with tpserve.Client(fake.endpoint, timeout=5, heartbeat_interval=HEARTBEAT) as client:
        result = client.generate("hello", max_tokens=2)
    fake.join()
    assert (result.text, result.token_ids, result.finish_reason, result.seed) == ("Hi", [5, 6], "length", 77)
    assert fake.count("heartbeat") >= 4  # 0.5 s of waiting at 0.05 s: ~10


def test_async_client_heartbeats_while_it_waits():
    fake = FakeCoordinator(answer_slowly)

    async def main():
        async with tpserve.AsyncClient(fake.endpoint, timeout=5, heartbeat_interval=HEARTBEAT) as client:
            return await client.generate("hello", max_tokens=2)

    result = asyncio.run(asyncio.wait_for(main(), 30))
    fake.join()
    assert (result.text, result.token_ids, result.seed) == ("Hi", [5, 6], 77)
    assert fake.count("heartbeat") >= 4


def stream_then_expect_cancel(fake):
    request_id = fake.receive_until("generate")
    fake.reply(request_id, "chunk", text="a", tokenIds=[1])
    assert fake.receive_until("cancel") == request_id


def test_leaving_a_stream_sends_cancel():
    fake = FakeCoordinator(stream_then_expect_cancel)
    with tpserve.Client(fake.endpoint, timeout=5) as client:
        with client.stream("hello", max_tokens=100) as stream:
            assert next(stream).text == "a"
        fake.join()


def test_dropped_async_stream_sends_cancel():
    fake = FakeCoordinator(stream_then_expect_cancel)

    async def main():
        async with tpserve.AsyncClient(fake.endpoint, timeout=5) as client:
            async for chunk in client.stream("hello", max_tokens=100):
                assert chunk.text == "a"
                break

    asyncio.run(asyncio.wait_for(main(), 30))
    fake.join()


def test_error_replies_are_typed():
    def refuse(fake):
        fake.reply(fake.receive_until("stats"), "error", kind="overloaded", message="queue full")
        fake.reply(fake.receive_until("health"), "error", kind=42, message="from a newer server")

    fake = FakeCoordinator(refuse)
    with tpserve.Client(fake.endpoint, timeout=5) as client:
        with pytest.raises(tpserve.OverloadedError, match="queue full") as overloaded:
            client.stats()
        with pytest.raises(tpserve.TpserveError, match="newer server") as unknown:
            client.health()
    fake.join()
    assert overloaded.value.request_id == 1 and overloaded.value.kind == "overloaded"
    assert type(unknown.value) is tpserve.TpserveError and unknown.value.kind == "42"

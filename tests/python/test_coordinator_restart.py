"""A worker group outlives its coordinator (issue 11, item 4): with a standalone `tpserve-coordinator` and an
`mpirun -np 2 tpserve-worker` group, the coordinator is killed (SIGKILL) and started again on the same ports.
A client with a request in flight learns at once that it is lost (ConnectionLostError, not a timeout).
The group notices within 3 s, keeps its weights (the same rank processes: no reload) and registers with the
new coordinator, which serves the very ids it served before (greedy, and seeded with the seed a reply
returned). Every wait is on observable state with a deadline.
"""
import asyncio
import os
import signal
import subprocess
import time

import pytest
import tpserve

from client_testing import alive, group_ranks, run_ids, start_coordinator, start_group, wait_for, worker_ranks
from conftest import assert_no_process_left, free_port, start_server

PROMPT = "The capital of France is"


async def start_async_stream(endpoint: str):
    client = tpserve.AsyncClient(endpoint, timeout=60)
    stream = client.stream(PROMPT, max_tokens=200, ignore_eos=True)
    await stream.__anext__()
    return client, stream


async def finish_async_stream(client, stream):
    try:
        async for _ in stream:
            pass
    finally:
        await client.close()


def healthy(endpoint: str) -> bool:
    with tpserve.Client(endpoint, timeout=5) as client:
        try:
            return client.health().ok
        except tpserve.TpserveError:
            return False


def test_group_registers_with_a_restarted_coordinator_without_reloading():
    port, worker_port = free_port(), free_port()
    endpoint = f"tcp://127.0.0.1:{port}"
    coordinator = start_coordinator(port, worker_port)
    mpirun = start_group(2, worker_port)
    try:
        wait_for(lambda: healthy(endpoint), 120, "the group to register")
        ranks = wait_for(lambda: (lambda p: p if len(p) == 2 else None)(group_ranks(mpirun)), 30, "two ranks")
        with tpserve.Client(endpoint, timeout=60) as client:
            greedy = client.generate(PROMPT, max_tokens=16)
            seeded = client.generate(PROMPT, max_tokens=16, temperature=0.9)
        assert greedy.token_ids == run_ids("--prompt", PROMPT, "--max-tokens", "16")

        # A request in flight when the coordinator dies: its client hears at once that it is gone.
        lost_client = tpserve.Client(endpoint, timeout=60)
        lost_stream = lost_client.stream(PROMPT, max_tokens=200, ignore_eos=True)
        next(lost_stream)
        loop = asyncio.new_event_loop()  # the async client's requests live on one loop
        lost_async = loop.run_until_complete(start_async_stream(endpoint))
        coordinator.send_signal(signal.SIGKILL)
        coordinator.wait()
        killed_at = time.monotonic()
        with pytest.raises(tpserve.ConnectionLostError):
            for _ in lost_stream:
                pass
        with pytest.raises(tpserve.ConnectionLostError):
            loop.run_until_complete(finish_async_stream(*lost_async))
        loop.close()
        assert time.monotonic() - killed_at < 10
        lost_client.close()
        coordinator = start_coordinator(port, worker_port)
        restarted_at = time.monotonic()
        wait_for(lambda: healthy(endpoint), 30, "the group to register with the new coordinator")
        # Noticed within 2.5 s of silence, then a Hello: no model load in between.
        assert time.monotonic() - restarted_at < 10
        assert group_ranks(mpirun) == ranks, "the group's ranks were restarted"
        assert mpirun.poll() is None
        with tpserve.Client(endpoint, timeout=60) as client:
            assert client.generate(PROMPT, max_tokens=16).token_ids == greedy.token_ids
            again = client.generate(PROMPT, max_tokens=16, temperature=0.9, seed=seeded.seed)
            assert again.token_ids == seeded.token_ids
    finally:
        coordinator.send_signal(signal.SIGTERM)  # drains, then shuts the group down
        coordinator.wait(timeout=60)
        try:
            assert mpirun.wait(timeout=30) == 0
        finally:
            if mpirun.poll() is None:
                os.killpg(mpirun.pid, signal.SIGKILL)
            wait_for(lambda: not any(alive(pid) for pid in ranks.values()), 15, "the ranks to exit")


def test_serve_relaunches_a_crashed_coordinator():
    """`tpserve serve` relaunches a coordinator that died on its own; its worker group registers with it
    without reloading, and the service answers the same ids again."""
    server = start_server("--restart-backoff-ms", "100", http=False)
    try:
        ranks = wait_for(lambda: (lambda r: r if len(r) == 2 else None)(worker_ranks(server)), 30, "two ranks")
        with tpserve.Client(server.endpoint, timeout=60) as client:
            before = client.generate(PROMPT, max_tokens=16).token_ids
        coordinator = int(subprocess.run(["pgrep", "-P", str(server.process.pid), "-f", "tpserve-coordinator"],
                                         capture_output=True, text=True).stdout.split()[0])
        os.kill(coordinator, signal.SIGKILL)
        wait_for(lambda: alive(coordinator) is False, 10, "the coordinator to die")
        wait_for(lambda: healthy(server.endpoint), 60, "the relaunched coordinator with its group")
        assert worker_ranks(server) == ranks, "the group's ranks were restarted"
        with tpserve.Client(server.endpoint, timeout=60) as client:
            assert client.generate(PROMPT, max_tokens=16).token_ids == before
    finally:
        assert server.stop() == 0
        assert_no_process_left(server)

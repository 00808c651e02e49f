"""Shared pytest fixtures: a real `tpserve serve` (coordinator + mpirun worker group) on free ports.

The tests run from ctest with TPSERVE_BUILD_DIR and TPSERVE_MODEL set (tests/python/CMakeLists.txt);
run by hand: TPSERVE_BUILD_DIR=build TPSERVE_MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf pytest tests/python
"""
import os
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("TPSERVE_BUILD_DIR", REPO / "build")).resolve()
MODEL = Path(os.environ.get("TPSERVE_MODEL", REPO / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf")).resolve()
TPSERVE = BUILD / "client" / "tpserve"
TPSERVE_RUN = BUILD / "worker" / "tpserve-run"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_ready(url: str) -> bool:
    """Whether the gateway at `url` answers GET /health with 200 (a worker group serves)."""
    try:
        with urllib.request.urlopen(url + "/health", timeout=5) as reply:
            return reply.status == 200
    except OSError:  # refused while it starts, or 503 (HTTPError is an OSError)
        return False


@dataclass
class Server:
    endpoint: str       # the coordinator's client endpoint, tcp://127.0.0.1:P
    http_url: str       # the OpenAI gateway, http://127.0.0.1:Q ("" without --http-port)
    process: subprocess.Popen

    def stop(self) -> int:
        """SIGTERM (drain), then wait; returns the exit code. Kills the group if it does not exit in time."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
                raise
        return self.process.returncode


def start_server(*flags: str, tp: int = 2, http: bool = True, ready_timeout: float = 120.0,
                 client_flags: tuple = ()) -> Server:
    """Starts `tpserve serve --model MODEL --tp TP` on free ports with extra flags; returns when `health` is ok.
    client_flags: what the readiness probe (`tpserve health`) needs, e.g. ("--keys", DIR)."""
    port, worker_port = free_port(), free_port()
    args = [str(TPSERVE), "serve", "--model", str(MODEL), "--tp", str(tp), "--host", "127.0.0.1",
            "--port", str(port), "--worker-port", str(worker_port), *flags]
    http_url = ""
    if http:
        http_port = free_port()
        args += ["--http-port", str(http_port)]
        http_url = f"http://127.0.0.1:{http_port}"
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    process = subprocess.Popen(args, env=env, start_new_session=True)
    server = Server(f"tcp://127.0.0.1:{port}", http_url, process)
    key_flags = ["--api-key", flags[flags.index("--api-key") + 1]] if "--api-key" in flags else []
    deadline = time.monotonic() + ready_timeout
    while True:  # readiness: poll `tpserve health` (a bounded wait on a condition, not a sleep)
        if process.poll() is not None:
            raise RuntimeError(f"tpserve serve exited with {process.returncode} before it was ready")
        probe = subprocess.run([str(TPSERVE), "health", "--server", server.endpoint, "--timeout-s", "5", *key_flags,
                                *client_flags], capture_output=True, timeout=30)
        if probe.returncode == 0 and (not http or http_ready(http_url)):
            return server
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError("tpserve serve was not healthy in time")
        time.sleep(0.2)


def assert_no_process_left(server: Server) -> None:
    """Every process `tpserve serve` started (its session: coordinator, mpirun, ranks, gateway) is gone."""
    deadline = time.monotonic() + 30
    while True:
        try:
            os.killpg(server.process.pid, 0)
        except ProcessLookupError:
            return
        if time.monotonic() > deadline:
            os.killpg(server.process.pid, signal.SIGKILL)
            raise AssertionError("processes of tpserve serve were left running after it exited")
        time.sleep(0.1)


@pytest.fixture(scope="session")
def server():
    """One TP-2 server (with the HTTP gateway) shared by a test session."""
    s = start_server()
    yield s
    assert s.stop() == 0
    assert_no_process_left(s)


@pytest.fixture(scope="session")
def zmq_server():
    """One TP-2 server without the HTTP gateway: the Python client's tests speak the native protocol only."""
    s = start_server(http=False)
    yield s
    assert s.stop() == 0


API_KEY = "test-key-0123"


@pytest.fixture(scope="session")
def api_key_server():
    """A TP-2 server that requires API_KEY (the readiness probe sends it)."""
    s = start_server("--api-key", API_KEY, http=False, client_flags=("--api-key", API_KEY))
    yield s
    assert s.stop() == 0

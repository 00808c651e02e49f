"""Helpers shared by the Python tests: the independent reference (tpserve-run), bounded waits on observable
state, and the processes of a server (its worker ranks)."""
import os
import subprocess
import sys
import time
from typing import Dict, List

from conftest import BUILD, MODEL, REPO, TPSERVE_RUN

sys.path.insert(0, str(REPO / "deploy"))
import worker_ranks as worker_processes  # noqa: E402  (deploy/worker_ranks.py)

PROMPT = "The capital of France is"


def start_coordinator(port: int, worker_port: int, *flags: str, **popen_args) -> subprocess.Popen:
    """A standalone tpserve-coordinator on loopback, in a session of its own."""
    return subprocess.Popen([str(BUILD / "coordinator" / "tpserve-coordinator"), "--model", str(MODEL), "--port",
                             str(port), "--worker-port", str(worker_port), *flags], start_new_session=True,
                            **popen_args)


def start_group(np: int, worker_port: int, *flags: str, **popen_args) -> subprocess.Popen:
    """`mpirun -np NP tpserve-worker` on this host (the line `tpserve serve` runs), registering with the
    coordinator at 127.0.0.1:worker_port; a session of its own, so it can be ended whole."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return subprocess.Popen(["mpirun", "-np", str(np), "--oversubscribe", "--bind-to", "none", "--mca",
                             "mpi_yield_when_idle", "1", "--mca", "btl", "self,vader",
                             str(BUILD / "worker" / "tpserve-worker"), "--model", str(MODEL), "--coordinator",
                             f"tcp://127.0.0.1:{worker_port}", *flags], env=env, start_new_session=True,
                            **popen_args)


def group_ranks(mpirun: subprocess.Popen) -> Dict[int, int]:
    """{rank: pid} of the tpserve-worker processes of one mpirun job (its session)."""
    return session_ranks(mpirun.pid)


def run_ids(*flags: str) -> List[int]:
    """The ids `tpserve-run --print-ids` generates on one rank without a server: the reference the
    server's output must equal exactly (greedy and seeded sampling are deterministic at any TP degree)."""
    out = subprocess.run([str(TPSERVE_RUN), "--model", str(MODEL), "--print-ids", *flags],
                         capture_output=True, text=True, timeout=300, check=True)
    return [int(x) for x in out.stdout.split()]


def wait_until_idle(stats, timeout: float = 10.0):
    """Polls stats() (a callable) until no sequence runs and no KV block is in use; returns the last stats.
    Fails after `timeout` seconds: a request that was not cancelled keeps its blocks far longer."""
    deadline = time.monotonic() + timeout
    while True:
        s = stats()
        if s.blocks_used == 0 and s.num_running == 0 and s.num_waiting == 0:
            return s
        if time.monotonic() > deadline:
            raise AssertionError(f"server not idle after {timeout} s: {s}")
        time.sleep(0.02)


def wait_for(condition, timeout: float, what: str):
    """Polls `condition` until it returns something true (returned) or `timeout` seconds pass (AssertionError)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def alive(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def worker_ranks(server) -> Dict[int, int]:
    """{rank: pid} of the tpserve-worker processes of this server's session."""
    return session_ranks(server.process.pid)


def session_ranks(session: int) -> Dict[int, int]:
    """{rank: pid} of the tpserve-worker processes in session `session`."""
    return worker_processes.worker_ranks(worker_processes.session_pids(session))

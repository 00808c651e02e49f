"""Helpers shared by the Python tests: the independent reference (tpserve-run), bounded waits on observable
state, and the processes of a server (its worker ranks)."""
import os
import subprocess
import time
from typing import Dict, List

from conftest import MODEL, TPSERVE_RUN

PROMPT = "The capital of France is"


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
    ranks = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            if os.getsid(pid) != server.process.pid:
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"tpserve-worker" not in f.read().split(b"\0")[0]:
                    continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
            ranks[int(env[b"OMPI_COMM_WORLD_RANK"])] = pid
        except (OSError, KeyError, ValueError):
            continue  # exited meanwhile, or not a rank
    return ranks

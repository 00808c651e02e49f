"""Which processes are tpserve-worker ranks, and which MPI rank each one is, read from /proc (for supervisors,
tests and benchmarks that signal or watch one rank of a group)."""
import os
from typing import Dict, Iterable, List


def worker_ranks(pids: Iterable[int]) -> Dict[int, int]:
    """{MPI rank: pid} of those of `pids` that are tpserve-worker processes (OMPI_COMM_WORLD_RANK in their
    environment); the others, and processes that exit meanwhile, are left out."""
    ranks = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"tpserve-worker" not in f.read().split(b"\0")[0]:
                    continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
            ranks[int(env[b"OMPI_COMM_WORLD_RANK"])] = pid
        except (OSError, KeyError, ValueError):
            continue
    return ranks


def session_pids(session: int) -> List[int]:
    """The processes of session `session` (a process started with start_new_session and what it started)."""
    pids = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.getsid(int(entry)) == session:
                pids.append(int(entry))
        except OSError:
            continue  # exited meanwhile
    return pids

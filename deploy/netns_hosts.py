"""Two "hosts" on one machine, from Python: the network namespaces of deploy/netns-setup.sh (A and B joined by
one veth pair on 10.77.0.0/24), for the tests and benchmarks that cut the link between them.

    hosts = TwoHosts.create("tpf")           # namespaces tpfa<pid>, tpfb<pid>; needs root and iproute2
    with hosts.entered("a"):                  # this thread, and every thread and process it starts, on A
        ...                                   # (a coordinator, the clients, netns-mpirun.sh groups)
    hosts.cut(); hosts.restore()              # the veth link down / up again (and carrying traffic)
    hosts.teardown()                          # ends what runs in them, removes them

A namespace is entered with setns(2) on the calling thread only (Linux keeps the network namespace per
thread); threads and processes started from it inherit it, which is what lets a ZeroMQ client made there
(its I/O thread is started by the first socket) reach a coordinator bound inside the namespace.
"""
import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional

from worker_ranks import worker_ranks

DEPLOY = Path(__file__).resolve().parent
CLONE_NEWNET = 0x40000000
ADDR_A = "10.77.0.1"
ADDR_B = "10.77.0.2"
_LIBC = ctypes.CDLL(None, use_errno=True)


def available() -> bool:
    """Whether namespaces can be made here: root, iproute2 and mpirun."""
    return os.geteuid() == 0 and shutil.which("ip") is not None and shutil.which("mpirun") is not None


def _setns(fd: int) -> None:
    if _LIBC.setns(fd, CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"setns: {os.strerror(errno)}")


class TwoHosts:
    def __init__(self, ns_a: str, ns_b: str):
        self.names = {"a": ns_a, "b": ns_b}
        self.env = dict(os.environ, TPSERVE_NS_A=ns_a, TPSERVE_NS_B=ns_b)

    @classmethod
    def create(cls, prefix: str) -> "TwoHosts":
        """Makes the namespaces (names of this process's own, so concurrent runs do not collide).
        subprocess.CalledProcessError (with netns-setup.sh's stderr) when they cannot be made here."""
        hosts = cls(f"{prefix}a{os.getpid()}", f"{prefix}b{os.getpid()}")
        try:
            subprocess.run([str(DEPLOY / "netns-setup.sh")], env=hosts.env, check=True, capture_output=True,
                           timeout=60)
        except subprocess.CalledProcessError:  # (no CAP_SYS_ADMIN, say): nothing half made is left
            hosts.teardown()
            raise
        return hosts

    def teardown(self) -> None:
        subprocess.run([str(DEPLOY / "netns-teardown.sh")], env=self.env, capture_output=True, timeout=60)

    @contextlib.contextmanager
    def entered(self, host: str) -> Iterator[None]:
        """Runs the block with this thread in namespace `host` ("a" or "b"), then back where it was."""
        with open("/proc/thread-self/ns/net") as home, open(f"/run/netns/{self.names[host]}") as target:
            _setns(target.fileno())
            try:
                yield
            finally:
                _setns(home.fileno())

    def cut(self) -> None:
        """The link between the hosts goes down (both ends lose carrier): nothing crosses, nothing is refused."""
        subprocess.run(["ip", "-n", self.names["a"], "link", "set", "tpserve-va", "down"], check=True, timeout=10)

    def restore(self, timeout: float = 10.0) -> None:
        """The link up again; returns once A reaches B over it (a connection to a closed port of B is refused,
        which only a reachable peer answers), so that a group launched next finds its daemons' host."""
        subprocess.run(["ip", "-n", self.names["a"], "link", "set", "tpserve-va", "up"], check=True, timeout=10)
        deadline = time.monotonic() + timeout
        while True:
            probe = subprocess.run(["ip", "netns", "exec", self.names["a"], "timeout", "1", "bash", "-c",
                                    f"exec 3<>/dev/tcp/{ADDR_B}/9"], capture_output=True, text=True, timeout=10)
            if "refused" in probe.stderr:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{ADDR_B} not reachable {timeout} s after the link came back")
            time.sleep(0.05)

    def pids(self, host: str) -> List[int]:
        """Every process in namespace `host`."""
        out = subprocess.run(["ip", "netns", "pids", self.names[host]], capture_output=True, text=True, timeout=10)
        return [int(pid) for pid in out.stdout.split()]

    def ranks(self) -> Dict[int, int]:
        """{MPI rank: pid} of the tpserve-worker processes in either namespace."""
        return worker_ranks(self.pids("a") + self.pids("b"))

    def start_group(self, np: int, leader: str, worker: Path, *args: str, **popen_args) -> subprocess.Popen:
        """`deploy/netns-mpirun.sh NP tpserve-worker ARGS` with rank 0 (the leader) on host `leader` and the
        other ranks alternating; mpirun itself runs on the leader's host. Its own session, so it can be ended
        whole.
        popen_args: e.g. stdout, stderr."""
        env = dict(self.env, TPSERVE_NETNS_LEADER=leader, OMPI_ALLOW_RUN_AS_ROOT="1",
                   OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        return subprocess.Popen([str(DEPLOY / "netns-mpirun.sh"), str(np), str(worker), *args], env=env,
                                start_new_session=True, **popen_args)


def end_job(job: subprocess.Popen, grace: float) -> Optional[int]:
    """What a group's supervisor does once the ranks of the job `job` are gone: waits `grace` seconds for mpirun
    to exit by itself (its out-of-band keepalives give up on an unreachable host's daemon) and returns its exit
    code; past that (mpirun sent the cut host a message, which TCP retransmits for minutes) ends the job's
    session and returns None."""
    try:
        return job.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
        return None

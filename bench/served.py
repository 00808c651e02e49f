"""A real `tpserve serve` for the benchmark scripts (soak, overload, CURVE cost): started on free loopback
ports, waited for until a worker group serves, stopped with SIGTERM (drain) on exit; and the coordinator
process's state read from /proc."""
import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import tpserve

REPO = Path(__file__).resolve().parents[1]
DEFAULT_BUILD = REPO / "build"
DEFAULT_MODEL = REPO / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_state(pid):
    """Open file descriptors, threads and resident memory of a process."""
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    threads = len(os.listdir(f"/proc/{pid}/task"))
    rss_kb = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss_kb = int(line.split()[1])
    return {"fds": fds, "threads": threads, "rss_kb": rss_kb}


def cpu_seconds(pid):
    """CPU time the live threads of a process have run so far (the scheduler's nanosecond count,
    /proc/PID/task/*/schedstat; threads that already exited are not counted)."""
    total_ns = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total_ns += int(f.read().split()[0])
        except FileNotFoundError:  # the thread ended meanwhile
            pass
    return total_ns / 1e9


class Served:
    """What `serve` yields: the client endpoint, the serve process, the coordinator's pid and the exit."""

    def __init__(self, endpoint, process, coordinator_pid):
        self.endpoint, self.process, self.coordinator_pid = endpoint, process, coordinator_pid
        self.exit_code = None

    def child_pid(self, program):
        """The pid of the serve process's child running `program` (tpserve-coordinator, tpserve-http)."""
        found = subprocess.run(["pgrep", "-P", str(self.process.pid), "-f", program], capture_output=True, text=True)
        return int(found.stdout.split()[0])


@contextlib.contextmanager
def serve(build=DEFAULT_BUILD, model=DEFAULT_MODEL, tp=1, flags=(), keys=None, health_timeout_s=120):
    """`tpserve serve --model MODEL --tp TP FLAGS...` (with --keys KEYS when given); yields a Served once a
    worker group serves. On exit: SIGTERM, then SIGKILL of the whole session after 120 s (exit_code "killed")."""
    port = free_port()
    endpoint = f"tcp://127.0.0.1:{port}"
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    command = [f"{build}/client/tpserve", "serve", "--model", str(model), "--tp", str(tp), "--port", str(port),
               "--worker-port", str(free_port()), *flags]
    if keys:
        command += ["--keys", str(keys)]
    process = subprocess.Popen(command, env=env, start_new_session=True, stderr=subprocess.DEVNULL)
    served = Served(endpoint, process, None)
    try:
        with tpserve.Client(endpoint, timeout=10, keys_dir=keys) as probe:
            deadline = time.monotonic() + health_timeout_s
            while True:
                try:
                    if probe.health().ok:
                        break
                except tpserve.TpserveError:
                    pass
                if time.monotonic() > deadline or process.poll() is not None:
                    raise SystemExit(f"{command[0]} serve never became healthy")
                time.sleep(0.2)
        served.coordinator_pid = served.child_pid("tpserve-coordinator")
        yield served
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            served.exit_code = process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            served.exit_code = "killed"

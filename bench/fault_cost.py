#!/usr/bin/env python3
"""What fault tolerance costs while serving (issue 11): a real `tpserve serve --tp N` under a streaming load,
with the CPU time of every thread of every rank and of the coordinator read from /proc (schedstat, ns) before
and after the load window. The heartbeat threads have names of their own (tp-heartbeat: rank to rank, 250 ms;
tp-leader-beat: leader to coordinator, 500 ms), so their share is read off directly; replay state has no
thread or work of its own (it is the sequence the scheduler keeps anyway), so the coordinator's whole CPU
time per generated token bounds it. The same window is also measured idle (no request), where the heartbeats
are all the work there is.

Usage: bench/fault_cost.py [--build build] [--model M] [--tp 2] [--requests 8] [--max-tokens 128]
                           [--rounds 3] [--idle-s 10]
"""
import argparse
import collections
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import tpserve

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "deploy"))
import worker_ranks as worker_processes  # noqa: E402  (deploy/worker_ranks.py)

PROMPTS = ["Tell me a long story about the sea", "Write a poem about mountains and rivers",
           "Explain how a steam engine works", "List ten facts about the moon"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def session_processes(session):
    """{pid: command name} of the processes in `session` (tpserve serve's own, its children and ranks)."""
    procs = {}
    for pid in worker_processes.session_pids(session):
        try:
            procs[pid] = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue  # exited meanwhile
    return procs


def thread_cpu_ns(pid):
    """{(tid, thread name): CPU ns so far} of every thread of `pid`."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
            out[(int(tid), name)] = int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
        except OSError:
            continue
    return out


def snapshot(pids):
    return {pid: thread_cpu_ns(pid) for pid in pids}


def by_kind(name):
    if name.startswith("tp-"):
        return name
    if name.startswith("ZMQbg"):
        return "zmq I/O"
    return "rest"


def delta(before, after):
    """{pid: {thread kind: CPU s}} spent between two snapshots."""
    out = {}
    for pid, threads in after.items():
        kinds = collections.Counter()
        for key, ns in threads.items():
            kinds[by_kind(key[1])] += (ns - before.get(pid, {}).get(key, 0)) / 1e9
        out[pid] = kinds
    return out


def load(endpoint, requests, max_tokens):
    """`requests` streams at once; returns the tokens they generated."""
    counts = [0] * requests

    def one(i):
        with tpserve.Client(endpoint, timeout=300) as client:
            with client.stream(PROMPTS[i % len(PROMPTS)], max_tokens=max_tokens, ignore_eos=True) as s:
                for chunk in s:
                    counts[i] += len(chunk.token_ids)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(requests)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts)


def report(title, wall, spent, procs, tokens):
    print(f"\n{title}: {wall:.1f} s wall" + (f", {tokens} tokens ({tokens / wall:.1f} tok/s)" if tokens else ""))
    print(f"{'process':<24}{'CPU s':>9}{'tp-heartbeat':>14}{'tp-leader-beat':>16}{'zmq I/O':>10}{'share beats':>13}")
    for pid, kinds in sorted(spent.items(), key=lambda kv: procs[kv[0]]):
        total = sum(kinds.values())
        beats = kinds["tp-heartbeat"] + kinds["tp-leader-beat"]
        share = f"{100 * beats / total:.3f}%" if total > 0 else "-"
        print(f"{procs[pid] + ' ' + str(pid):<24}{total:>9.3f}{kinds['tp-heartbeat']:>14.4f}"
              f"{kinds['tp-leader-beat']:>16.4f}{kinds['zmq I/O']:>10.3f}{share:>13}")
    coordinator = sum(sum(k.values()) for pid, k in spent.items() if procs[pid] == "tpserve-coordin")
    if tokens:
        print(f"coordinator CPU per generated token: {1e6 * coordinator / tokens:.1f} us (all of its work: "
              "scheduling, codecs, detokenizing, streaming; replay state adds none of its own)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=str(REPO / "build"))
    ap.add_argument("--model", default=str(REPO / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--idle-s", type=float, default=10.0)
    ap.add_argument("--log", default="/tmp/fault_cost_serve.log")
    args = ap.parse_args()
    port, worker_port = free_port(), free_port()
    endpoint = f"tcp://127.0.0.1:{port}"
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    with open(args.log, "w") as log:
        serve = subprocess.Popen([str(Path(args.build) / "client" / "tpserve"), "serve", "--model", args.model,
                                  "--tp", str(args.tp), "--port", str(port), "--worker-port", str(worker_port)],
                                 env=env, start_new_session=True, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 120
        with tpserve.Client(endpoint, timeout=30) as probe:
            while not probe.health().ok:
                if time.monotonic() > deadline:
                    raise RuntimeError("the server did not become healthy")
                time.sleep(0.1)
        load(endpoint, 2, 8)  # warm-up
        procs = {pid: name for pid, name in session_processes(serve.pid).items()
                 if name in ("tpserve-worker", "tpserve-coordin")}
        before, start = snapshot(procs), time.monotonic()
        tokens = sum(load(endpoint, args.requests, args.max_tokens) for _ in range(args.rounds))
        report(f"serving, {args.rounds} rounds of {args.requests} streams x {args.max_tokens} tokens",
               time.monotonic() - start, delta(before, snapshot(procs)), procs, tokens)
        before, start = snapshot(procs), time.monotonic()
        time.sleep(args.idle_s)  # the measured window itself: nothing to wait for
        report("idle", time.monotonic() - start, delta(before, snapshot(procs)), procs, 0)
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(serve.pid, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main())

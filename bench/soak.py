#!/usr/bin/env python3
"""Soak: a real `tpserve serve` under a mix of normal, cancelled, vanished, malformed and oversized
requests for --seconds, with a client process killed (SIGKILL) every few seconds. At the end it checks
the coordinator's state: 0 KV blocks in use, nothing running or waiting, no leaked file descriptors
(sockets) or threads (from /proc), RSS within 5 % of its value after warm-up, and every admitted
request answered (a finish or a typed error). Prints a report; exits 1 when a check fails.

Usage: bench/soak.py [--seconds 1800] [--build build] [--model M] [--tp 2] [--json OUT]
"""
import argparse
import json
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import zmq

import tpserve
from served import DEFAULT_BUILD, DEFAULT_MODEL, proc_state, serve

# A child client that streams requests until it is killed (the "vanished" clients).
VANISHING_CLIENT = """
import sys, tpserve
c = tpserve.Client(sys.argv[1], timeout=120)
while True:
    for chunk in c.stream("Tell me a long story about the sea", max_tokens=200, ignore_eos=True):
        pass
"""


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = {}
        self.unanswered = []

    def add(self, kind, outcome):
        with self.lock:
            self.counts.setdefault(kind, {}).setdefault(outcome, 0)
            self.counts[kind][outcome] += 1


def normal(client, rng, tally):
    try:
        r = client.generate("The capital of France is", max_tokens=rng.randint(4, 48), temperature=0.8)
        tally.add("normal", r.finish_reason)
    except tpserve.OverloadedError:
        tally.add("normal", "overloaded")


def cancelled(client, rng, tally):
    stream = client.stream("Count from one to a hundred:", max_tokens=128, ignore_eos=True)
    for i, _ in enumerate(stream):
        if i >= rng.randint(1, 5):
            break
    stream.close()  # leaving the stream cancels the request
    tally.add("cancelled", "left")


def malformed(endpoint, rng, tally):
    ctx = zmq.Context.instance()
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(endpoint)
    s.send(bytes(rng.getrandbits(8) for _ in range(rng.choice([7, 8, 64, 333]))))
    # The coordinator answers an unreadable message with an error (request id 0) or drops it.
    tally.add("malformed", "answered" if s.poll(5000) else "dropped")
    s.close()


def oversized(client, endpoint, rng, tally):
    if rng.random() < 0.5:
        try:
            client.generate(token_ids=[1] * 9000, max_tokens=4)  # beyond the 8192-token context
            tally.add("oversized", "ACCEPTED")
        except tpserve.PromptTooLongError:
            tally.add("oversized", "prompt_too_long")
    else:  # beyond the 8 MiB message limit: the socket drops the peer
        ctx = zmq.Context.instance()
        s = ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.connect(endpoint)
        s.send(b"\0" * (9 << 20))
        tally.add("oversized", "too_big_message")
        s.close()


def driver(endpoint, stop, rng_seed, tally):
    rng = random.Random(rng_seed)
    with tpserve.Client(endpoint, timeout=120) as client:
        while not stop.is_set():
            kind = rng.choices(["normal", "cancelled", "malformed", "oversized"], [6, 2, 1, 1])[0]
            try:
                if kind == "normal":
                    normal(client, rng, tally)
                elif kind == "cancelled":
                    cancelled(client, rng, tally)
                elif kind == "malformed":
                    malformed(endpoint, rng, tally)
                else:
                    oversized(client, endpoint, rng, tally)
            except tpserve.TpserveError as e:  # a typed error is an answer; a timeout is not
                tally.add(kind, type(e).__name__)
                if isinstance(e, tpserve.TpserveTimeoutError):
                    with tally.lock:
                        tally.unanswered.append(f"{kind}: {e}")


def run_mix(endpoint, seconds, args, tally, seed, pid=None):
    """The drivers' mix for `seconds`, killing a streaming client process every few seconds."""
    stop = threading.Event()
    threads = [threading.Thread(target=driver, args=(endpoint, stop, 100 * seed + i, tally)) for i in range(args.drivers)]
    for t in threads:
        t.start()
    rng = random.Random(seed)
    end = time.monotonic() + seconds
    victims, killed, samples = [], 0, []
    while time.monotonic() < end:
        victims.append(subprocess.Popen([sys.executable, "-c", VANISHING_CLIENT, endpoint]))
        time.sleep(rng.uniform(0.5, 2 * args.kill_every))  # let it get a request in flight
        victim = victims.pop(rng.randrange(len(victims)))
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        killed += 1
        if pid is not None:
            samples.append({"t": round(seconds - (end - time.monotonic()), 1), **proc_state(pid)})
    stop.set()
    for t in threads:
        t.join()
    for v in victims:
        v.kill()
        v.wait()
    return killed, samples


def wait_idle(client, deadline_s):
    deadline = time.monotonic() + deadline_s
    while True:
        s = client.stats()
        if s.blocks_used == 0 and s.num_running == 0 and s.num_waiting == 0:
            return s
        if time.monotonic() > deadline:
            return s
        time.sleep(0.2)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=1800)
    p.add_argument("--build", default=str(DEFAULT_BUILD))
    p.add_argument("--model", default=str(DEFAULT_MODEL))
    p.add_argument("--tp", type=int, default=2)
    p.add_argument("--drivers", type=int, default=3)
    p.add_argument("--kill-every", type=float, default=3.0, help="seconds between killed clients")
    p.add_argument("--json", help="write the report here")
    args = p.parse_args()

    report = {"seconds": args.seconds, "checks": {}}
    with serve(args.build, args.model, args.tp) as served:
        endpoint, pid = served.endpoint, served.coordinator_pid
        with tpserve.Client(endpoint, timeout=10) as probe:
            tally = Tally()
            # Warm-up: the same mix for a while, so allocator pools and ZeroMQ buffers reach their steady
            # state before the baseline is taken.
            run_mix(endpoint, max(10.0, 0.1 * args.seconds), args, tally, seed=1)
            wait_idle(probe, 90)
            baseline = proc_state(pid)
            report["after_warmup"] = baseline
            tally = Tally()
            killed, samples = run_mix(endpoint, args.seconds, args, tally, seed=2, pid=pid)
            # Vanished clients' requests are cancelled when their sends fail or their silence exceeds the
            # client timeout; wait (bounded) for the coordinator to be idle again.
            idle = wait_idle(probe, 90)
            final = proc_state(pid)
        report.update(counts=tally.counts, clients_killed=killed, final=final, samples=samples,
                      stats={"blocks_used": idle.blocks_used, "running": idle.num_running, "waiting": idle.num_waiting})
        checks = report["checks"]
        checks["blocks_in_use_0"] = idle.blocks_used == 0 and idle.num_running == 0 and idle.num_waiting == 0
        checks["no_leaked_threads"] = final["threads"] <= baseline["threads"]
        # fds: the probe's connection is open at both points; vanished clients' sockets are closed by then.
        checks["no_leaked_fds"] = final["fds"] <= baseline["fds"]
        checks["rss_within_5pct"] = final["rss_kb"] <= baseline["rss_kb"] * 1.05
        checks["every_admitted_request_answered"] = not tally.unanswered
        checks["oversized_never_accepted"] = "ACCEPTED" not in tally.counts.get("oversized", {})
        report["unanswered"] = tally.unanswered[:10]
    report["serve_exit"] = served.exit_code
    ok = all(checks.values()) and served.exit_code == 0
    print(json.dumps({k: v for k, v in report.items() if k != "samples"}, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    print("soak:", "PASSED" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Fault injection, measured (issue 11): a real `tpserve serve --tp N` while 2 requests stream; one rank is
killed (SIGKILL) or stopped (SIGSTOP), leader or follower, --faults-per-kind times each, in turn. Per fault:

  detection  kill -> the coordinator no longer counts the group (its health reply, polled every 5 ms)
  ttft       kill -> the first token any of the interrupted requests receives after the detection (the
             group's exit, relaunch, model load, re-registration and the re-prefill of prompt + streamed
             tokens: what a client sees as the pause in its stream)

and checks that the interrupted requests end without an error with the ids of an uninterrupted run of the
same requests (made first, on the same server). Prints p50 / max per kind; --json writes every sample.
The relaunch backoff is --restart-backoff-ms (default here 0: the figures are the recovery's own; `tpserve
serve` waits 500 ms before a first relaunch by default, doubling for further ones in a row).

The kind coordinator-restart (--kinds coordinator-restart) runs a standalone tpserve-coordinator and an
`mpirun -np N tpserve-worker` group instead; the coordinator is killed (SIGKILL) mid-stream and a new one
started on the same ports at once. Per fault:

  detection  kill -> the group's leader logs that the coordinator went silent (its stderr, read as it comes)
  register   kill -> the new coordinator counts the group again (same rank processes: no model reload)
  ttft       kill -> the first token of the requests resubmitted (with the seeds their first run reported)
             once the new coordinator has a group (before that it answers `unavailable, retry later`)

The kinds cut-follower and cut-leader (--kinds cut-follower,cut-leader; root and iproute2) put the group on
two network namespace "hosts" joined by one veth link (deploy/netns_hosts.py), with a standalone coordinator
(behind CURVE keys) and the clients on host A; the leader is on A (cut-follower: it loses its follower) or on B
(cut-leader: it loses the coordinator and its follower). The link goes down mid-stream; this script is the
group's supervisor: once every rank has exited it restores the link and relaunches the group. Per fault:

  detection  cut -> the coordinator no longer counts the group (its health reply, polled every 5 ms)
  exit       cut -> every rank of the cut group has exited (the group ends itself: heartbeat, then abort)
  job exit   cut -> mpirun has exited (its out-of-band keepalives give up on the unreachable host's daemon), or
             was killed 10 s after the ranks (a message it sent to that daemon waits on TCP retransmissions)
  ttft       cut -> the first token of the interrupted requests from the relaunched group

Usage: bench/fault_injection.py [--faults-per-kind 20] [--kinds K,...] [--build build] [--model M] [--tp 2]
                                [--json OUT]
"""
import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import tpserve

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "deploy"))
import netns_hosts  # noqa: E402  (deploy/netns_hosts.py: the two namespace "hosts")
import worker_ranks as worker_processes  # noqa: E402  (deploy/worker_ranks.py)

REQUESTS = [("Tell me a long story about the sea", {}),
            ("Write a poem about mountains and rivers", {"temperature": 0.8, "seed": 42})]
MAX_TOKENS = 64
KINDS = {"kill-follower": (1, signal.SIGKILL), "kill-leader": (0, signal.SIGKILL),
         "stop-follower": (1, signal.SIGSTOP), "stop-leader": (0, signal.SIGSTOP)}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.005)


def worker_ranks(session, lost):
    """{rank: pid} of the tpserve-worker processes of the session led by `session`, but those in `lost`
    (ranks of a lost group may still be exiting while the relaunched group starts)."""
    return worker_processes.worker_ranks(pid for pid in worker_processes.session_pids(session) if pid not in lost)


def stream(endpoint, i, out, params_override=None, client_args=None):
    prompt, params = REQUESTS[i]
    params = dict(params, **(params_override or {}))
    try:
        with tpserve.Client(endpoint, timeout=120, **(client_args or {})) as client:
            with client.stream(prompt, max_tokens=MAX_TOKENS, ignore_eos=True, **params) as s:
                for chunk in s:
                    out["ids"].extend(chunk.token_ids)
                    out["times"].append(time.monotonic())
                out["replays"] = s.result.samples[0].finish.num_replays
                out["seed"] = s.result.seed
    except Exception as e:
        out["error"] = repr(e)


def start_streams(endpoint, seeds=None, client_args=None):
    """Streams every request of REQUESTS (with seeds[i] as its seed when given) on its own thread."""
    outs = [{"ids": [], "times": [], "error": None, "replays": None, "seed": None} for _ in REQUESTS]
    threads = [threading.Thread(target=stream, args=(endpoint, i, outs[i], {"seed": seeds[i]} if seeds else None,
                                                     client_args))
               for i in range(len(REQUESTS))]
    for t in threads:
        t.start()
    return outs, threads


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--faults-per-kind", type=int, default=20)
    ap.add_argument("--build", default=str(REPO / "build"))
    ap.add_argument("--model", default=str(REPO / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--restart-backoff-ms", type=int, default=0)
    ap.add_argument("--kinds", default=",".join(KINDS),
                    help="comma-separated, of " + ", ".join([*KINDS, *STANDALONE_KINDS]))
    ap.add_argument("--json")
    ap.add_argument("--log", default="/tmp/fault_injection_serve.log", help="the servers' stderr")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # run the cleanup and the report
    kinds = args.kinds.split(",")
    assert set(kinds) <= set(KINDS) | set(STANDALONE_KINDS), f"--kinds: unknown in {kinds}"
    samples = {kind: [] for kind in kinds}
    try:
        rank_faults(args, [k for k in kinds if k in KINDS], samples)
        for kind in kinds:
            if kind in STANDALONE_KINDS:
                STANDALONE_KINDS[kind](args, samples[kind])
    finally:  # also on SIGTERM or a failed check: what was measured is reported
        report(args, samples)
    return 0


def rank_faults(args, kinds, samples):
    """--faults-per-kind rank faults of each of `kinds` (KINDS) under one `tpserve serve`, the kinds in turn."""
    if not kinds:
        return
    port, worker_port = free_port(), free_port()
    log = open(args.log, "w")
    endpoint = f"tcp://127.0.0.1:{port}"
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    serve = subprocess.Popen([str(Path(args.build) / "client" / "tpserve"), "serve", "--model", args.model,
                              "--tp", str(args.tp), "--port", str(port), "--worker-port", str(worker_port),
                              "--max-restarts", "1000000", "--restart-backoff-ms", str(args.restart_backoff_ms)],
                             env=env, start_new_session=True, stdout=log, stderr=log)
    try:
        probe = tpserve.Client(endpoint, timeout=30)
        wait_for(lambda: probe.health().ok, 120, "the server")
        reference, threads = start_streams(endpoint)
        for t in threads:
            t.join()
        assert all(r["error"] is None for r in reference), reference
        lost = set()
        for n in range(args.faults_per_kind):
            for kind in kinds:
                rank, sig = KINDS[kind]
                wait_for(lambda: probe.health().ok, 120, "a serving group")
                ranks = wait_for(lambda: (lambda r: r if len(r) == args.tp else None)(worker_ranks(serve.pid, lost)),
                                 60, "the group's ranks")
                outs, threads = start_streams(endpoint)
                wait_for(lambda: all(len(o["ids"]) >= 4 for o in outs), 60, "both requests streaming")
                killed_at = time.monotonic()
                os.kill(ranks[rank], sig)
                lost |= set(ranks.values())
                wait_for(lambda: probe.health().num_worker_groups == 0, 30, "the coordinator to notice")
                detected_at = time.monotonic()
                for t in threads:
                    t.join(120)
                # Tokens between the fault and its detection come from steps the lost group had finished.
                resumed = [next((t for t in o["times"] if t > detected_at), None) for o in outs]
                for o, r in zip(outs, reference):
                    assert o["error"] is None and o["ids"] == r["ids"], (kind, o["error"])
                    assert o["replays"] == 1, (kind, o["replays"])
                sample = {"detection_s": detected_at - killed_at,
                          "ttft_after_fault_s": min(t for t in resumed if t is not None) - killed_at}
                samples[kind].append(sample)
                print(f"{kind} #{n + 1}: detected in {sample['detection_s']:.2f} s, first token after "
                      f"{sample['ttft_after_fault_s']:.2f} s", flush=True)
                for pid in ranks.values():  # a stopped rank mpirun did not reap
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        probe.close()
    finally:  # also on SIGTERM or a failed check: the server goes
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(serve.pid, signal.SIGKILL)


def coordinator_restarts(args, got):
    """--faults-per-kind SIGKILLs of a standalone coordinator while REQUESTS stream; each time a new coordinator
    starts on the same ports at once, and the requests are resubmitted with the seeds of their first run."""
    port, worker_port = free_port(), free_port()
    endpoint = f"tcp://127.0.0.1:{port}"
    log = open(args.log, "w")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")

    def start_coordinator():
        return subprocess.Popen([str(Path(args.build) / "coordinator" / "tpserve-coordinator"), "--model",
                                 args.model, "--port", str(port), "--worker-port", str(worker_port)],
                                start_new_session=True, stdout=log, stderr=log)

    coordinator = start_coordinator()
    mpirun = subprocess.Popen(["mpirun", "-np", str(args.tp), "--oversubscribe", "--bind-to", "none", "--mca",
                               "mpi_yield_when_idle", "1", "--mca", "btl", "self,vader",
                               str(Path(args.build) / "worker" / "tpserve-worker"), "--model", args.model,
                               "--coordinator", f"tcp://127.0.0.1:{worker_port}"],
                              env=env, start_new_session=True, stdout=log, stderr=subprocess.PIPE, text=True)
    lost_at = []  # when the leader logged each loss of its coordinator (the group's detection)

    def read_group_log():
        for line in mpirun.stderr:
            if "keeping the weights loaded and registering again" in line:
                lost_at.append(time.monotonic())
            log.write(line)
    threading.Thread(target=read_group_log, daemon=True).start()
    try:
        probe = tpserve.Client(endpoint, timeout=30)
        wait_for(lambda: probe.health().num_worker_groups == 1, 120, "the group to register")
        ranks = worker_ranks(mpirun.pid, set())
        reference, threads = start_streams(endpoint)
        for t in threads:
            t.join()
        assert all(r["error"] is None for r in reference), reference
        seeds = [r["seed"] for r in reference]
        for n in range(args.faults_per_kind):
            outs, threads = start_streams(endpoint, seeds)
            wait_for(lambda: all(len(o["ids"]) >= 4 for o in outs), 60, "both requests streaming")
            num_lost = len(lost_at)
            killed_at = time.monotonic()
            coordinator.send_signal(signal.SIGKILL)
            coordinator.wait()
            probe.close()
            coordinator = start_coordinator()
            for t in threads:
                t.join(60)
            assert all("ConnectionLost" in (o["error"] or "") for o in outs), [o["error"] for o in outs]
            probe = tpserve.Client(endpoint, timeout=30)
            wait_for(lambda: probe.health().num_worker_groups == 1, 60, "the group to register again")
            registered_at = time.monotonic()
            # A new coordinator without a group answers `unavailable, retry later`: resubmit once it has one.
            resubmitted, threads = start_streams(endpoint, seeds)
            for t in threads:
                t.join(120)
            for o, r in zip(resubmitted, reference):
                assert o["error"] is None and o["ids"] == r["ids"], o["error"]
            assert worker_ranks(mpirun.pid, set()) == ranks, "the group's ranks were restarted"
            assert len(lost_at) == num_lost + 1, "the group did not log the lost coordinator"
            sample = {"detection_s": lost_at[-1] - killed_at, "register_s": registered_at - killed_at,
                      "ttft_after_fault_s": min(o["times"][0] for o in resubmitted) - killed_at}
            got.append(sample)
            print(f"coordinator-restart #{n + 1}: group noticed in {sample['detection_s']:.2f} s, registered after "
                  f"{sample['register_s']:.2f} s, first token after {sample['ttft_after_fault_s']:.2f} s", flush=True)
        probe.close()
    finally:
        coordinator.send_signal(signal.SIGTERM)  # drains, then shuts the group down
        try:
            coordinator.wait(timeout=60)
            mpirun.wait(timeout=30)
        except subprocess.TimeoutExpired:
            for p in (coordinator, mpirun):
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)


def link_cuts(args, got, leader):
    """--faults-per-kind cuts of the link between the two hosts of a group whose leader is on `leader` ("a":
    with the coordinator; "b": across the link from it), the requests streaming from host A."""
    if not netns_hosts.available():
        raise RuntimeError("the cut kinds need root, iproute2 and mpirun")
    keys = tempfile.mkdtemp(prefix="tpserve-bench-keys.")
    subprocess.run([str(Path(args.build) / "client" / "tpserve"), "keys", "init", keys], check=True,
                   capture_output=True)
    client_args = {"keys_dir": keys}
    hosts = netns_hosts.TwoHosts.create("tpb")
    log = open(args.log, "w")
    coordinator = group = None
    try:
        with hosts.entered("a"):
            port, worker_port = free_port(), free_port()
            endpoint = f"tcp://127.0.0.1:{port}"
            coordinator = subprocess.Popen([str(Path(args.build) / "coordinator" / "tpserve-coordinator"), "--model",
                                            args.model, "--host", "0.0.0.0", "--port", str(port), "--worker-port",
                                            str(worker_port), "--keys", keys],
                                           start_new_session=True, stdout=log, stderr=log)

            def start_group():
                return hosts.start_group(args.tp, leader, Path(args.build) / "worker" / "tpserve-worker", "--model",
                                         args.model, "--coordinator", f"tcp://{netns_hosts.ADDR_A}:{worker_port}",
                                         "--keys", keys, "--threads", "1", stdout=log, stderr=log)

            probe = tpserve.Client(endpoint, timeout=30, **client_args)
            group = start_group()
            wait_for(lambda: probe.health().num_worker_groups == 1, 120, "the group to register")
            reference, threads = start_streams(endpoint, client_args=client_args)
            for t in threads:
                t.join()
            assert all(r["error"] is None for r in reference), reference
            for n in range(args.faults_per_kind):
                wait_for(lambda: probe.health().num_worker_groups == 1, 120, "a serving group")
                ranks = wait_for(lambda: (lambda r: r if len(r) == args.tp else None)(hosts.ranks()), 60, "the ranks")
                outs, threads = start_streams(endpoint, client_args=client_args)
                wait_for(lambda: all(len(o["ids"]) >= 4 for o in outs), 60, "both requests streaming")
                cut_at = time.monotonic()
                hosts.cut()
                wait_for(lambda: probe.health().num_worker_groups == 0, 30, "the coordinator to notice")
                detected_at = time.monotonic()
                wait_for(lambda: not set(ranks.values()) & set(hosts.ranks().values()), 30, "the ranks to exit")
                exited_at = time.monotonic()
                is_job_killed = netns_hosts.end_job(group, grace=10) is None
                group_exited_at = time.monotonic()
                hosts.restore()
                group = start_group()
                for t in threads:
                    t.join(120)
                for o, r in zip(outs, reference):
                    assert o["error"] is None and o["ids"] == r["ids"], (leader, o["error"])
                    assert o["replays"] == 1, (leader, o["replays"])
                resumed = [next((t for t in o["times"] if t > exited_at), None) for o in outs]
                sample = {"detection_s": detected_at - cut_at, "exit_s": exited_at - cut_at,
                          "job_exit_s": group_exited_at - cut_at, "job_killed": is_job_killed,
                          "ttft_after_fault_s": min(t for t in resumed if t is not None) - cut_at}
                got.append(sample)
                print(f"cut, leader on {leader} #{n + 1}: detected in {sample['detection_s']:.2f} s, ranks gone after "
                      f"{sample['exit_s']:.2f} s, mpirun {'killed' if is_job_killed else 'exited'} after "
                      f"{sample['job_exit_s']:.2f} s, first token after "
                      f"{sample['ttft_after_fault_s']:.2f} s", flush=True)
            probe.close()
            coordinator.send_signal(signal.SIGTERM)  # drains, then shuts the group down
            coordinator.wait(timeout=60)
            group.wait(timeout=30)
    finally:
        for p in (coordinator, group):
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        hosts.teardown()


STANDALONE_KINDS = {"coordinator-restart": coordinator_restarts,
                    "cut-follower": lambda args, got: link_cuts(args, got, "a"),
                    "cut-leader": lambda args, got: link_cuts(args, got, "b")}


def report(args, samples):
    print(f"\nfault injection: TP {args.tp}, {len(REQUESTS)} streaming requests of {MAX_TOKENS} "
          f"tokens, relaunch backoff {args.restart_backoff_ms} ms; ids equal to the uninterrupted run after "
          "every fault")
    print(f"{'kind':<21}{'faults':>7}{'detect p50':>12}{'detect max':>12}{'ttft p50':>10}{'ttft max':>10}")
    for kind, got in samples.items():
        d = [s["detection_s"] for s in got]
        t = [s["ttft_after_fault_s"] for s in got]
        if got:
            print(f"{kind:<21}{len(got):>7}{statistics.median(d):>11.2f}s{max(d):>11.2f}s"
                  f"{statistics.median(t):>9.2f}s{max(t):>9.2f}s")
    for kind, got in samples.items():
        if got and "register_s" in got[0]:
            r = sorted(s["register_s"] for s in got)
            print(f"{kind}: re-registered p50 {statistics.median(r):.2f} s, max {r[-1]:.2f} s")
        if got and "exit_s" in got[0]:
            e = sorted(s["exit_s"] for s in got)
            j = sorted(s["job_exit_s"] for s in got)
            killed = sum(s["job_killed"] for s in got)
            print(f"{kind}: every rank exited p50 {statistics.median(e):.2f} s, max {e[-1]:.2f} s; mpirun exited "
                  f"p50 {statistics.median(j):.2f} s, max {j[-1]:.2f} s ({killed} of {len(got)} killed)")
    print("target: detection within 3 s (the heartbeat: 2 s between ranks, 2.5 s leader -> coordinator)")
    if args.json:
        Path(args.json).write_text(json.dumps(samples, indent=1))


if __name__ == "__main__":
    sys.exit(main())

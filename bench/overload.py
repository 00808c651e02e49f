#!/usr/bin/env python3
"""Overload (issue 12): a real `tpserve serve --tp 1` with a bounded admission queue, offered twice the
request rate it sustains. Measures the rate it sustains (tpserve-bench, closed loop), then an open-loop
Poisson run at FACTOR times that rate through tpserve-bench, while the coordinator's RSS is sampled from
/proc; reports how fast the overflow is answered `overloaded` (send to error), the TTFT of the admitted
requests beside the bound the queue sets, and the RSS over time (a plot with --plot).

Usage: bench/overload.py [--build build] [--model M] [--seconds 60] [--factor 2] [--max-queue 16]
                         [--max-num-seqs 16] [--threads N] [--json OUT] [--plot OUT.png]
"""
import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from served import DEFAULT_BUILD, DEFAULT_MODEL, proc_state, serve

SHAPE = ["--input-len", "64", "--output-len", "32"]  # every request: 64 random prompt tokens, 32 out


def bench(build, endpoint, label, extra):
    """One tpserve-bench run; returns its JSON report."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([f"{build}/bench/tpserve-bench", "--server", endpoint, *SHAPE, "--label", label,
                        "--json", out.name, "--progress-every", "100000", *extra],
                       check=True, stdout=subprocess.DEVNULL)
        return json.loads(Path(out.name).read_text())


def sample_rss(pid, stop, samples, start, period_s=0.25):
    while not stop.is_set():
        samples.append((round(time.monotonic() - start, 2), proc_state(pid)["rss_kb"]))
        stop.wait(period_s)


def plot(samples, phases, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.plot([t for t, _ in samples], [kb / 1024 for _, kb in samples], lw=1.2)
    for name, (t0, t1) in phases.items():
        ax.axvspan(t0, t1, alpha=0.12 if name == "overload" else 0.05, color="C3" if name == "overload" else "C0")
        ax.text((t0 + t1) / 2, ax.get_ylim()[1], name, ha="center", va="top", fontsize=8)
    ax.set_ylim(0, 1.25 * max(kb for _, kb in samples) / 1024)
    ax.set_xlabel("seconds since the server became healthy")
    ax.set_ylabel("coordinator RSS (MiB)")
    ax.set_title("tpserve coordinator memory under 2x overload (bench/overload.py)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=str(DEFAULT_BUILD))
    p.add_argument("--model", default=str(DEFAULT_MODEL))
    p.add_argument("--seconds", type=float, default=60, help="length of the overload run")
    p.add_argument("--factor", type=float, default=2.0, help="offered rate / sustained rate")
    p.add_argument("--max-queue", type=int, default=16, help="the coordinator's --max-queue")
    p.add_argument("--max-num-seqs", type=int, default=16, help="the coordinator's --max-num-seqs")
    p.add_argument("--threads", type=int, default=0, help="the rank's kernel threads (0: tpserve serve's default)")
    p.add_argument("--json", help="write the report here")
    p.add_argument("--plot", help="write the RSS plot (PNG) here")
    args = p.parse_args()

    report = {"max_queue": args.max_queue, "max_num_seqs": args.max_num_seqs, "factor": args.factor,
              "threads": args.threads}
    samples, phases = [], {}
    flags = ["--max-queue", str(args.max_queue), "--max-num-seqs", str(args.max_num_seqs)]
    if args.threads:
        flags += ["--threads", str(args.threads)]
    with serve(args.build, args.model, 1, flags) as served:
        start = time.monotonic()
        stop = threading.Event()
        sampler = threading.Thread(target=sample_rss, args=(served.coordinator_pid, stop, samples, start))
        sampler.start()
        try:
            t0 = time.monotonic() - start
            unloaded = bench(args.build, served.endpoint, "unloaded",
                             ["--num-requests", "4", "--concurrency", "1", "--token-salt", "1"])
            # The sustained rate: a closed loop that fills the running batch and the queue, as overload will.
            depth = args.max_num_seqs + args.max_queue
            sustained = bench(args.build, served.endpoint, "sustained",
                              ["--num-requests", str(3 * depth), "--concurrency", str(depth), "--token-salt", "3"])
            phases["calibration"] = (t0, time.monotonic() - start)
            rate = args.factor * sustained["request_throughput"]
            t0 = time.monotonic() - start
            overload = bench(args.build, served.endpoint, "overload",
                             ["--num-requests", str(max(1, round(rate * args.seconds))), "--request-rate", f"{rate:.4f}",
                              "--seed", "7", "--token-salt", "2", "--max-duration-s", str(4 * args.seconds)])
            phases["overload"] = (t0, time.monotonic() - start)
            t0 = time.monotonic() - start
            stop.wait(10)  # after: does the memory come back down?
            phases["after"] = (t0, time.monotonic() - start)
        finally:
            stop.set()
            sampler.join()
    unloaded_ttft_ms = unloaded["ttft_ms"]["median"]
    report.update(
        sustained_req_s=sustained["request_throughput"], offered_req_s=rate,
        sent=overload["completed"] + overload["failed"], admitted=overload["completed"], failures=overload["failures"],
        reject_ms=overload["failed_ms"], admitted_ttft_ms=overload["ttft_ms"],
        # A request admitted at the back of a full queue starts when the max_queue ahead of it have: running
        # slots free up at the sustained rate. Then its own prefill, as unloaded.
        unloaded_ttft_ms=unloaded_ttft_ms, sustained_ttft_ms=sustained["ttft_ms"],
        ttft_bound_ms=args.max_queue / sustained["request_throughput"] * 1e3 + unloaded_ttft_ms,
        rss_kb={"first": samples[0][1], "peak": max(kb for _, kb in samples), "last": samples[-1][1]},
        serve_exit=served.exit_code, phases=phases)
    print(json.dumps(report, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps({**report, "rss_samples": samples}, indent=1))
    if args.plot:
        plot(samples, phases, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())

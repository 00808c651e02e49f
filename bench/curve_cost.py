#!/usr/bin/env python3
"""The cost of CurveZMQ (issue 12): the same load on `tpserve serve --tp 1` without keys and with --keys
(every socket encrypted and authenticated), interleaved for ROUNDS rounds, a fresh server per run.
Per token: tpserve-bench's TPOT at concurrency 1 and 8 (streamed, 64 prompt / 64 output tokens). Per request:
the round trip of a `health` call (the smallest request) from the Python client, 500 times.

Usage: bench/curve_cost.py [--build build] [--model M] [--rounds 3] [--json OUT]
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import tpserve
from served import DEFAULT_BUILD, DEFAULT_MODEL, serve


def bench(build, endpoint, keys, concurrency, salt):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        command = [f"{build}/bench/tpserve-bench", "--server", endpoint, "--input-len", "64", "--output-len", "64",
                   "--num-requests", str(3 * concurrency), "--concurrency", str(concurrency), "--token-salt", str(salt),
                   "--json", out.name, "--progress-every", "100000"]
        if keys:
            command += ["--keys", keys]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        r = json.loads(Path(out.name).read_text())
    return {"tpot_p50_ms": r["tpot_ms"]["median"], "ttft_p50_ms": r["ttft_ms"]["median"],
            "out_tok_s": r["output_throughput"]}


def health_rtt_ms(endpoint, keys, calls=500):
    with tpserve.Client(endpoint, timeout=10, keys_dir=keys) as client:
        client.health()  # connect (and the CURVE handshake) outside the timing
        times = []
        for _ in range(calls):
            t = time.perf_counter()
            client.health()
            times.append((time.perf_counter() - t) * 1e3)
    times.sort()
    return {"p50": statistics.median(times), "p99": times[int(0.99 * (len(times) - 1))]}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=str(DEFAULT_BUILD))
    p.add_argument("--model", default=str(DEFAULT_MODEL))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", help="write the runs here")
    args = p.parse_args()
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        keys = f"{tmp}/keys"
        subprocess.run([f"{args.build}/client/tpserve", "keys", "init", keys], check=True, stdout=subprocess.DEVNULL)
        for round_ in range(1, args.rounds + 1):
            for mode in ("plain", "curve"):
                use = keys if mode == "curve" else None
                with serve(args.build, args.model, 1, keys=use) as served:
                    run = {"round": round_, "mode": mode, "health_rtt_ms": health_rtt_ms(served.endpoint, use)}
                    for c in (1, 8):
                        run[f"c{c}"] = bench(args.build, served.endpoint, use, c, 100 * round_ + c)
                runs.append(run)
                print(json.dumps(run), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""What the OpenAI gateway costs per token, as CPU time rather than latency (which a shared machine blurs):
one `tpserve serve --tp 1 --http-port P`, the same tpserve-bench load (streamed, 64 prompt / 64 output
tokens, concurrency 8) through ZeroMQ (tcp://) and through the gateway (http://, POST /v1/completions),
interleaved for ROUNDS rounds; the CPU time (user + system, /proc) the coordinator and the gateway used
during each run, per output token and per request, beside the wall time per token of the run.

Usage: bench/gateway_cpu.py [--build build] [--model M] [--rounds 3] [--requests 32] [--json OUT]
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from served import DEFAULT_BUILD, DEFAULT_MODEL, cpu_seconds, free_port, serve


def run(build, server, requests, salt, extra):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([f"{build}/bench/tpserve-bench", "--server", server, "--input-len", "64", "--output-len", "64",
                        "--num-requests", str(requests), "--concurrency", "8", "--token-salt", str(salt),
                        "--json", out.name, "--progress-every", "100000", *extra], check=True, stdout=subprocess.DEVNULL)
        return json.loads(Path(out.name).read_text())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=str(DEFAULT_BUILD))
    p.add_argument("--model", default=str(DEFAULT_MODEL))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--requests", type=int, default=32)
    p.add_argument("--json", help="write the runs here")
    args = p.parse_args()
    http_port = free_port()
    runs = []
    with serve(args.build, args.model, 1, ["--http-port", str(http_port)]) as served:
        gateway = served.child_pid("tpserve-http")
        processes = {"coordinator": served.coordinator_pid, "gateway": gateway}
        paths = {"zeromq": (served.endpoint, []), "http": (f"http://127.0.0.1:{http_port}", ["--vocab-size", "49152"])}
        run(args.build, served.endpoint, 8, 1, [])  # warm-up
        for round_ in range(1, args.rounds + 1):
            for path, (server, extra) in paths.items():
                before = {name: cpu_seconds(pid) for name, pid in processes.items()}
                r = run(args.build, server, args.requests, 100 * round_ + len(path), extra)
                used = {name: cpu_seconds(pid) - before[name] for name, pid in processes.items()}
                tokens = r["total_output_tokens"]
                row = {"round": round_, "path": path, "tokens": tokens, "failed": r["failed"],
                       "wall_us_per_token": r["duration_s"] / tokens * 1e6,
                       **{f"{name}_cpu_us_per_token": s / tokens * 1e6 for name, s in used.items()},
                       **{f"{name}_cpu_us_per_request": s / args.requests * 1e6 for name, s in used.items()}}
                runs.append(row)
                print(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""By-hand check of the gateway under many concurrent streams (not a pytest test: it takes minutes).

Opens N streaming /v1/completions connections to a running gateway, waits until every one has received
its first event, then measures GET /health latency (sequential probes) while they all still stream, and
prints the gateway's thread count (/proc/PID/task) and the latency percentiles.

  build/client/tpserve serve --model M --tp 2 --http-port 8000 --max-queue 2000 --max-num-seqs 256 \
      --kv-memory-mb 1024 &
  tests/python/http_streams_check.py --url http://127.0.0.1:8000 --streams 1000 --gateway-pid $(pgrep -f tpserve-http)
"""
import argparse
import asyncio
import json
import os
import statistics
import time


async def stream(host, port, body, first_event, done, errors):
    try:
        reader, writer = await asyncio.open_connection(host, port, limit=1 << 20)
        payload = json.dumps(body).encode()
        writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(payload) + payload)
        await writer.drain()
        status = await reader.readline()
        if b" 200 " not in status:
            errors.append(status.decode(errors="replace").strip())
            first_event.set_result(False) if not first_event.done() else None
            return
        seen_first = False
        while True:
            line = await reader.readline()
            if not line:
                break
            if line.startswith(b"data: ") and not seen_first:
                seen_first = True
                first_event.set_result(True)
            if line.startswith(b"data: [DONE]"):
                break
        writer.close()
    except Exception as e:  # noqa: BLE001 — a check script: report, do not stop the others
        errors.append(repr(e))
        if not first_event.done():
            first_event.set_result(False)
    finally:
        done.append(1)


async def health_latency(host, port):
    start = time.perf_counter()
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    await writer.drain()
    status = await reader.readline()
    await reader.read()
    writer.close()
    return (time.perf_counter() - start) * 1000, status


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", default="http://127.0.0.1:8000")
    p.add_argument("--streams", type=int, default=1000)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--probes", type=int, default=200)
    p.add_argument("--streaming", type=int, default=200, help="probe once this many streams have tokens")
    p.add_argument("--gateway-pid", type=int)
    args = p.parse_args()
    host, port = args.url.removeprefix("http://").split(":")
    port = int(port)
    body = {"prompt": "Once upon a time", "max_tokens": args.max_tokens, "temperature": 0, "stream": True,
            "ignore_eos": True}
    loop = asyncio.get_running_loop()
    firsts, done, errors = [], [], []
    tasks = []
    t0 = time.perf_counter()
    for _ in range(args.streams):
        f = loop.create_future()
        firsts.append(f)
        tasks.append(asyncio.create_task(stream(host, port, body, f, done, errors)))
    # The scheduler runs --max-num-seqs at a time; the others wait in its queue with their connection
    # open. Probe once `--streaming` of them are receiving tokens.
    while sum(f.done() for f in firsts) < min(args.streaming, args.streams):
        await asyncio.sleep(0.05)
    print(f"{sum(f.done() and f.result() for f in firsts)}/{args.streams} streams receiving after "
          f"{time.perf_counter() - t0:.1f} s; {len(done)} finished; errors: {errors[:3]}")
    latencies, bad = [], 0
    open_streams = args.streams - len(done)
    for _ in range(args.probes):
        ms, status = await health_latency(host, port)
        latencies.append(ms)
        bad += b" 200 " not in status
    open_streams = min(open_streams, args.streams - len(done))
    if bad:
        print(f"{bad} /health probes were not 200")
    threads = len(os.listdir(f"/proc/{args.gateway_pid}/task")) if args.gateway_pid else None
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
    print(f"with at least {open_streams} streams open throughout: /health over {len(latencies)} "
          f"probes p50 {statistics.median(latencies):.2f} ms, p99 {p99:.2f} ms, max {latencies[-1]:.2f} ms; "
          f"gateway threads: {threads}")
    await asyncio.gather(*tasks)
    print(f"all {len(done)} streams done after {time.perf_counter() - t0:.1f} s; errors: {len(errors)}")


if __name__ == "__main__":
    asyncio.run(main())

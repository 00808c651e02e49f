#!/usr/bin/env python3
"""Speculative decoding on tpserve beside llama.cpp's llama-server, the same GGUF files, threads and requests,
through the same OpenAI chat endpoint: prompt lookup (`--method ngram`: llama-server `--spec-type
ngram-simple`) or a draft model (`--method draft --draft-model FILE`: tpserve serve --draft-model, llama-server
--model-draft; e.g. SmolLM2 requantized to F32 as the target, drafted by the Q4_1 file).

Workloads (SmolLM2-135M-Instruct by default, greedy, ignore_eos, MAX_TOKENS output tokens each):
  code_edit  a Python function to output again with a variable renamed (the answer copies the prompt),
  summary    an article to summarise by quoting it (the answer repeats parts of the prompt),
  free       a story (little to look up: what speculation costs when it does not help).
For each workload and batch size B (B concurrent streamed requests), per round and engine, speculation off
then on: decode tokens/s (the sum over the streams of tokens per second after their first token: prefill is
not in it), and the acceptance rate (kept / proposed: tpserve's stats
counters, llama-server's per-response timings). Each round runs everything once, so the on/off ratios
compare runs minutes apart on this noisy machine; the median over rounds is reported.

  bench/speculative.py [--rounds 2] [--batches 1,4,16] [--k 4] [--max-tokens 128] [--model FILE]
                       [--method ngram|draft] [--draft-model FILE] [--results DIR]
Writes RESULTS/results.json (default bench/results/speculative, or speculative-draft) and a Markdown
table on stdout.
"""
import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CODE = '''def summarize(data, threshold=0.5):
    """Counts, sums and averages the values of data above a threshold."""
    count = 0
    total = 0.0
    largest = None
    for value in data:
        if value is None:
            continue
        if value > threshold:
            count += 1
            total += value
            if largest is None or value > largest:
                largest = value
    average = total / count if count else 0.0
    return {"count": count, "total": total, "average": average, "largest": largest}
'''

ARTICLE = ("The city council voted on Tuesday to expand the bicycle lane network by forty kilometres over the next "
           "three years. The plan, which passed by seven votes to two, will connect the northern suburbs to the "
           "central station and add protected lanes on four of the busiest streets. Supporters said the network "
           "would reduce traffic and make cycling safer for children and older residents. Opponents argued that "
           "the cost, estimated at twelve million euros, was too high and that shop owners on the affected "
           "streets had not been consulted. The mayor said the first section, along the river, would open next "
           "spring, and that the council would publish a timetable for the remaining sections in June.")

WORKLOADS = {
    "code_edit": "Rewrite this Python function with the variable `data` renamed to `items`. Output the whole "
                 "function and nothing else.\n\n```python\n" + CODE + "```",
    "summary": "Summarize the following article in a few sentences, quoting its key sentences word for word.\n\n"
               + ARTICLE,
    "free": "Write a short story about a lighthouse keeper who finds a message in a bottle.",
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url, body, timeout=600):
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as reply:
        return json.loads(reply.read())


def wait_healthy(url, process, timeout=300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{url}: the server exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{url} never became healthy")


def tpserve_stats(build, endpoint):
    out = subprocess.run([str(build / "client" / "tpserve"), "stats", "--server", endpoint], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    stats = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    return int(stats["spec_draft_tokens"]), int(stats["spec_accepted_tokens"])


def model_id(url):
    with urllib.request.urlopen(url + "/v1/models", timeout=30) as reply:
        return json.loads(reply.read())["data"][0]["id"]


def stream_chat(url, body):
    """One streamed chat completion: (first content time, last content time, completion tokens, timings)."""
    request = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    first = last = None
    tokens, timings = 0, {}
    with urllib.request.urlopen(request, timeout=600) as reply:
        for raw in reply:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[len("data: "):])
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            timings = chunk.get("timings", timings)
            if any(c.get("delta", {}).get("content") for c in chunk.get("choices", [])):
                last = time.monotonic()
                first = first or last
    return first, last, tokens, timings


def run_batch(url, prompt, batch, max_tokens, extra):
    """B concurrent streamed chat completions. Returns (output tokens, decode tokens/s, [timings]): the
    decode rate is the sum over the streams of (tokens - 1) / (last - first content chunk), what the
    batch generates per second once every stream has its first token (prefill is not in it)."""
    results = [None] * batch
    errors = []
    model = model_id(url)

    def one(i):
        body = {"model": model, "messages": [{"role": "user", "content": prompt + f"\n\n(Request {i}.)"}],
                "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True, "stream": True,
                "stream_options": {"include_usage": True}, **extra}
        try:
            results[i] = stream_chat(url, body)
        except Exception as e:  # reported below: a failed run must not pass as a fast one
            errors.append(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(batch)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"{url}: {errors[0]}")
    rate = sum((n - 1) / (last - first) for first, last, n, _ in results if n > 1 and last > first)
    return sum(r[2] for r in results), rate, [r[3] for r in results]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=str(REPO / "build"))
    parser.add_argument("--model", default=str(REPO / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    parser.add_argument("--llama-server", default=str(REPO / "third_party/llama.cpp/build/bin/llama-server"))
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batches", default="1,4,16")
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--method", choices=["ngram", "draft"], default="ngram")
    parser.add_argument("--draft-model", help="--method draft: the draft model's GGUF (same vocabulary)")
    parser.add_argument("--results")
    args = parser.parse_args()
    if args.method == "draft" and not args.draft_model:
        parser.error("--method draft needs --draft-model")
    if args.results is None:
        args.results = str(REPO / "bench" / "results" / ("speculative" if args.method == "ngram" else
                                                         "speculative-draft"))
    draft_flags = ["--draft-model", args.draft_model] if args.method == "draft" else []
    build, results = Path(args.build), Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    batches = [int(b) for b in args.batches.split(",")]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")

    port, worker_port, http_port = free_port(), free_port(), free_port()
    servers = {}
    logs = []
    tp = subprocess.Popen([str(build / "client" / "tpserve"), "serve", "--model", args.model, "--tp", "1",
                           "--threads", str(args.threads), "--port", str(port), "--worker-port", str(worker_port),
                           "--http-port", str(http_port), "--max-num-seqs", str(max(batches)), *draft_flags],
                          stdout=open(results / "tpserve.log", "w"), stderr=subprocess.STDOUT, env=env,
                          start_new_session=True)
    servers["tpserve"] = (f"http://127.0.0.1:{http_port}", tp)
    have_llama = Path(args.llama_server).is_file()
    if have_llama:
        llama_spec = (["--spec-type", "ngram-simple", "--spec-draft-n-max", str(args.k)] if args.method == "ngram" else
                      ["--spec-type", "draft-simple", "--model-draft", args.draft_model,
                       "--spec-draft-n-max", str(args.k), "-td", str(args.threads)])
        for name, spec in (("llama-server", []), ("llama-server-spec", llama_spec)):
            p = free_port()
            log = open(results / f"{name}.log", "w")
            logs.append(log)
            proc = subprocess.Popen([args.llama_server, "-m", args.model, "-t", str(args.threads), "-tb",
                                     str(args.threads), "--parallel", str(max(batches)), "--cont-batching", "-c",
                                     str(max(batches) * 1024), "--kv-unified", "--cache-ram", "0", "--no-webui",
                                     "--host", "127.0.0.1", "--port", str(p), *spec],
                                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            servers[name] = (f"http://127.0.0.1:{p}", proc)
    try:
        for url, proc in servers.values():
            wait_healthy(url, proc)
        rows = {}
        for round_index in range(args.rounds):
            for workload, prompt in WORKLOADS.items():
                for batch in batches:
                    runs = [("tpserve", "off", {"speculative": {"method": "off"}}),
                            ("tpserve", "on", {"speculative": {"method": args.method, "k": args.k}})]
                    if have_llama:
                        runs += [("llama-server", "off", {}), ("llama-server-spec", "on", {})]
                    for server, mode, extra in runs:
                        url = servers[server][0]
                        before = tpserve_stats(build, f"tcp://127.0.0.1:{port}") if server == "tpserve" else None
                        tokens, rate, timings = run_batch(url, prompt, batch, args.max_tokens, extra)
                        if server == "tpserve":
                            after = tpserve_stats(build, f"tcp://127.0.0.1:{port}")
                            drafted, kept = after[0] - before[0], after[1] - before[1]
                        else:
                            drafted = sum(t.get("draft_n", 0) for t in timings)
                            kept = sum(t.get("draft_n_accepted", 0) for t in timings)
                        engine = "tpserve" if server == "tpserve" else "llama.cpp"
                        key = (workload, batch, engine, mode)
                        rows.setdefault(key, []).append(
                            {"tokens_per_s": rate, "drafted": drafted, "kept": kept, "tokens": tokens})
                        print(f"round {round_index + 1} {workload} B={batch} {engine} {mode}: "
                              f"{rate:.1f} decode tok/s, kept {kept}/{drafted}", file=sys.stderr, flush=True)
        table = []
        for (workload, batch, engine, mode), runs in sorted(rows.items()):
            table.append({"workload": workload, "batch": batch, "engine": engine, "speculative": mode,
                          "tokens_per_s": statistics.median(r["tokens_per_s"] for r in runs),
                          "acceptance": (sum(r["kept"] for r in runs) / sum(r["drafted"] for r in runs)
                                         if sum(r["drafted"] for r in runs) else None),
                          "runs": runs})
        (results / "results.json").write_text(json.dumps({"method": args.method, "model": args.model,
                                                          "draft_model": args.draft_model, "k": args.k,
                                                          "max_tokens": args.max_tokens, "threads": args.threads,
                                                          "rows": table}, indent=1))
        by_key = {(r["workload"], r["batch"], r["engine"], r["speculative"]): r for r in table}
        peer = "ngram-simple" if args.method == "ngram" else f"draft-simple, --spec-draft-n-max {args.k}"
        print(f"| workload | B | tpserve off | tpserve {args.method}:{args.k} | speed-up | accepted | llama.cpp off | "
              f"llama.cpp {peer} | speed-up | accepted |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for workload in WORKLOADS:
            for batch in batches:
                cells = []
                for engine in ("tpserve", "llama.cpp"):
                    off, on = by_key.get((workload, batch, engine, "off")), by_key.get((workload, batch, engine, "on"))
                    if off is None or on is None:
                        cells += ["-"] * 4
                        continue
                    acc = on["acceptance"]
                    cells += [f"{off['tokens_per_s']:.1f}", f"{on['tokens_per_s']:.1f}",
                              f"{on['tokens_per_s'] / off['tokens_per_s']:.2f}x",
                              "-" if acc is None else f"{100 * acc:.0f}%"]
                print(f"| {workload} | {batch} | " + " | ".join(cells) + " |")
    finally:
        for _, proc in servers.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for _, proc in servers.values():
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


if __name__ == "__main__":
    main()

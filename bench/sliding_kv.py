#!/usr/bin/env python3
"""KV memory a long sequence holds on a sliding-window model, with the sliding layers' pages freed
(tpserve-worker --sliding-kv free, the default) and kept (--sliding-kv keep), through a real `tpserve serve`.

For each prompt length and mode: one greedy request of LENGTH random token ids and --tokens output
tokens (ignore_eos); after its first chunk (the prompt is in the cache) the coordinator's stats give the
KV pages in use, converted to MiB of the worker's --kv-memory-mb. Also: whether the request was served
at all (keep refuses what its pages cannot hold), the generated ids of both modes (must be equal), the
decode time per token after the first, and the bound the layout predicts (full layers x every token,
sliding layers x their window plus the blocks in flight).
  bench/sliding_kv.py [--model models/gemma-3-270m-q4_k_m.gguf] [--lengths 1000,4000,8000] [--tokens 32]
                      [--kv-memory-mb 256] [--out bench/results/sliding_kv/gemma3_270m.json]
Measured: bench/README.md "Sliding-window KV (issue 13)".
"""
import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import served  # noqa: E402
import tpserve  # noqa: E402


def run_one(client, length, tokens, vocab, kv_mb):
    rng = random.Random(length)
    ids = [rng.randrange(1000, vocab) for _ in range(length)]
    row = {"length": length}
    try:
        stream = client.stream(token_ids=ids, max_tokens=tokens, ignore_eos=True, temperature=0.0)
        times, out = [], []
        for chunk in stream:
            if not out:
                stats = client.stats()
                row["pages_used"], row["pages_total"] = stats.blocks_used, stats.blocks_total
                row["kv_mib_held"] = kv_mb * stats.blocks_used / stats.blocks_total
            out.extend(chunk.token_ids)
            times.append(time.monotonic())
        row["served"] = True
        row["ids"] = out
        row["decode_ms_per_token"] = 1e3 * (times[-1] - times[0]) / max(1, len(times) - 1)
    except tpserve.TpserveError as e:
        row["served"] = False
        row["error"] = str(e)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=str(served.REPO / "models" / "gemma-3-270m-q4_k_m.gguf"))
    ap.add_argument("--build", default=str(served.DEFAULT_BUILD))
    ap.add_argument("--lengths", default="1000,4000,8000")
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--kv-memory-mb", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(served.REPO / "bench" / "results" / "sliding_kv" / "gemma3_270m.json"))
    args = ap.parse_args()
    lengths = [int(x) for x in args.lengths.split(",")]
    results = {"model": Path(args.model).name, "kv_memory_mb": args.kv_memory_mb, "tokens": args.tokens, "modes": {}}
    for mode in ("keep", "free"):
        flags = ["--kv-memory-mb", str(args.kv_memory_mb), "--sliding-kv", mode, "--threads", str(args.threads),
                 "--max-model-len", str(max(lengths) + args.tokens + 16)]
        with served.serve(build=args.build, model=args.model, flags=flags) as s:
            with tpserve.Client(s.endpoint, timeout=600) as client:
                vocab = 262144 if "gemma" in Path(args.model).name else 49152
                rows = [run_one(client, n, args.tokens, vocab, args.kv_memory_mb) for n in lengths]
        results["modes"][mode] = rows
        for r in rows:
            held = f"{r['kv_mib_held']:.1f} MiB held ({r['pages_used']} of {r['pages_total']} pages)" if r["served"] \
                else f"refused: {r['error']}"
            print(f"{mode:5s} {r['length']:6d} tokens: {held}", flush=True)
    for keep, free in zip(results["modes"]["keep"], results["modes"]["free"]):
        if keep["served"] and free["served"] and keep["ids"] != free["ids"]:
            print(f"MISMATCH at length {keep['length']}: the two modes generated different ids", flush=True)
            results["mismatch"] = True
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

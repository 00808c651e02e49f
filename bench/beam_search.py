#!/usr/bin/env python3
"""Beam search throughput on a real `tpserve serve` (SmolLM2-135M-Instruct Q4_1 by default).

A beam search of width W runs W sequences per step, as n = W independent samples do, so its physical cost
is a batch of W: for C concurrent requests, per round, it times C requests of beam width W beside C requests
of n = W seeded samples (the same batch shape without the search: no forks, no parking, no ranking), and
beside C greedy requests (n = 1). Every request: the same prompt, MAX_TOKENS output tokens, ignore_eos.
Reported: requests/s, hypothesis tokens/s (requests x W x MAX_TOKENS / s) and the ratio beam ÷ n = W
(time), the median over rounds.

  bench/beam_search.py [--widths 2,4] [--concurrency 1,8] [--max-tokens 64] [--rounds 2] [--tp 1]
Writes bench/results/beam_search/results.json and a Markdown table on stdout.
"""
import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import served  # noqa: E402
import tpserve  # noqa: E402

PROMPT = ("Write a short paragraph about the history of the bicycle, from the draisine of 1817 to the safety "
          "bicycle of the 1880s, and what changed for the people who rode them.")


def timed_batch(endpoint, concurrency, params):
    """Wall seconds for `concurrency` concurrent requests with `params`; the token counts they returned."""
    counts, errors = [], []

    def one():
        try:
            with tpserve.Client(endpoint, timeout=600) as client:
                result = client.generate(PROMPT, **params)
                counts.append(sum(len(s.token_ids) for s in result.samples))
        except Exception as e:  # reported after the batch
            errors.append(e)

    threads = [threading.Thread(target=one) for _ in range(concurrency)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return time.monotonic() - start, counts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=str(served.DEFAULT_BUILD))
    ap.add_argument("--model", default=str(served.DEFAULT_MODEL))
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--widths", default="2,4")
    ap.add_argument("--concurrency", default="1,8")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--results", default=str(served.REPO / "bench" / "results" / "beam_search"))
    args = ap.parse_args()
    widths = [int(w) for w in args.widths.split(",")]
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    base = {"max_tokens": args.max_tokens, "ignore_eos": True}
    rows = []
    with served.serve(build=args.build, model=args.model, tp=args.tp) as server:
        timed_batch(server.endpoint, 1, dict(base, max_tokens=4))  # warm-up
        for c in concurrencies:
            greedy = [timed_batch(server.endpoint, c, base)[0] for _ in range(args.rounds)]
            for w in widths:
                beam, sampled = [], []
                for _ in range(args.rounds):  # interleaved: the pair of a round ran back to back
                    seconds, counts = timed_batch(server.endpoint, c, dict(base, n=w, beam=w))
                    assert all(n == w * args.max_tokens for n in counts), counts
                    beam.append(seconds)
                    sampled.append(timed_batch(server.endpoint, c, dict(base, n=w, temperature=1.0, seed=7))[0])
                ratio = statistics.median(b / s for b, s in zip(beam, sampled))
                b, s, g = statistics.median(beam), statistics.median(sampled), statistics.median(greedy)
                rows.append({"concurrency": c, "width": w, "beam_s": b, "sampled_s": s, "greedy_s": g,
                             "beam_requests_per_s": c / b, "beam_hypothesis_tokens_per_s": c * w * args.max_tokens / b,
                             "sampled_tokens_per_s": c * w * args.max_tokens / s,
                             "greedy_tokens_per_s": c * args.max_tokens / g, "beam_over_sampled": ratio})
    out = Path(args.results)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))
    print(f"| C | width | beam: requests/s | beam: hypothesis tok/s | n = W sampled: tok/s | beam ÷ sampled (time) "
          f"| greedy n = 1: tok/s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['concurrency']} | {r['width']} | {r['beam_requests_per_s']:.2f} | "
              f"{r['beam_hypothesis_tokens_per_s']:.1f} | {r['sampled_tokens_per_s']:.1f} | "
              f"{r['beam_over_sampled']:.2f}x | {r['greedy_tokens_per_s']:.1f} |")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""serve_summary.py RESULTS: the tables of bench/serve-sweep.sh, as markdown.

Reads RESULTS/serve_sweep.json (the sweep's parameters) and RESULTS/serve_*.json (tpserve-bench
--json) and prints the concurrency sweep, tpserve vs llama.cpp's llama-server, continuous vs static
batching and prefix caching, each figure beside its peer as a ratio. bench/summarize.py imports
serving_section() for bench/README.md.
"""
import json
import os
import sys


def _ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "-"


def _share(run, key):
    return f"{100 * run[key]:.1f}%" if key in run else "-"


def serving_section(res):
    """Markdown for the serving sweep in directory `res`; "" when it did not run."""
    try:
        with open(os.path.join(res, "serve_sweep.json")) as f:
            sweep = json.load(f)
    except (OSError, ValueError):
        return ""
    tps, cs, sc = sweep["tps"].split(), sweep["concurrencies"].split(), sweep["static_c"]

    def load(name):
        p = os.path.join(res, f"serve_{name}.json")
        try:
            with open(p) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    out = [f"Closed-loop concurrency sweep ({sweep['model']}, 2*C requests per point, random token ids, "
           f"input {sweep['input_len']} / output {sweep['output_len']} tokens, ignore_eos; TP N runs "
           f"{sweep['threads']}/N threads per rank, KV pool {sweep['kv_mb']} MiB). TTFT/TPOT in ms. KV waste: the share of "
           "the token slots in used KV blocks that hold no token (sampled from the coordinator's Stats each second, "
           "weighted by blocks in use); KV peak: the most blocks in use, as a share of the pool.", ""]
    hdr = ("| TP | C | reqs | failed | out tok/s | TTFT p50 | TTFT p99 | TPOT p50 | TPOT p99 | KV waste | KV peak "
           "| tok/s vs TP " + tps[0] + " |")
    out += [hdr, "|" + "---|" * (hdr.count("|") - 1)]
    for tp in tps:
        for c in cs:
            r, base = load(f"tp{tp}_c{c}"), load(f"tp{tps[0]}_c{c}")
            if not r:
                continue
            out.append(f"| {tp} | {c} | {r['completed']} | {r['failed']} | {r['output_throughput']:.1f} | "
                       f"{r['ttft_ms']['median']:.0f} | {r['ttft_ms']['p99']:.0f} | {r['tpot_ms']['median']:.1f} | "
                       f"{r['tpot_ms']['p99']:.1f} | {_share(r, 'kv_waste')} | {_share(r, 'kv_used_peak_share')} | "
                       f"{_ratio(r['output_throughput'], base['output_throughput'] if base else 0)} |")

    peer_rows = []
    for c in cs:
        ours, peer = load(f"tp{tps[0]}_c{c}"), load(f"llama_c{c}")
        if not (ours and peer):
            continue
        peer_rows.append(
            f"| {c} | {ours['output_throughput']:.1f} | {peer['output_throughput']:.1f} | "
            f"**{_ratio(ours['output_throughput'], peer['output_throughput'])}** | "
            f"{ours['ttft_ms']['median']:.0f} | {peer['ttft_ms']['median']:.0f} | "
            f"**{_ratio(ours['ttft_ms']['median'], peer['ttft_ms']['median'])}** | "
            f"{ours['tpot_ms']['median']:.1f} | {peer['tpot_ms']['median']:.1f} | "
            f"**{_ratio(ours['tpot_ms']['median'], peer['tpot_ms']['median'])}** | {peer['failed']} |")
    if peer_rows:
        out += ["", f"tpserve TP {tps[0]} against llama.cpp's llama-server under the same load generator "
                f"(tpserve-bench's openai http backend: POST /v1/completions streamed as SSE, 1 token per chunk with text, "
                f"totals from the usage chunk), the same requests, GGUF and {sweep['threads']} threads; llama-server with "
                f"--parallel C slots, continuous batching, {sweep['kv_mb']} MiB of F16 KV in one unified pool. "
                "Ratios are tpserve ÷ llama.cpp: above 1 is better for tok/s, below 1 is better for TTFT and TPOT.", "",
                "| C | out tok/s tpserve | llama.cpp | ratio | TTFT p50 tpserve | llama.cpp | ratio | "
                "TPOT p50 tpserve | llama.cpp | ratio | llama.cpp failed |",
                "|---|---|---|---|---|---|---|---|---|---|---|"] + peer_rows

    open_runs = [(name, load(f"{key}_open")) for name, key in ((f"tpserve TP {tps[0]}", f"tp{tps[0]}"), ("llama.cpp", "llama"))]
    open_runs = [(name, r) for name, r in open_runs if r]
    if open_runs:
        r0 = open_runs[0][1]
        out += ["", f"Open loop: {r0['num_requests']} requests arriving as a Poisson process at {r0['request_rate']:g} req/s, "
                f"{r0['dataset']} lengths (means {r0['input_len']} / {r0['output_len']} tokens), goodput = requests/s meeting "
                f"TTFT <= {r0['goodput_ttft_ms']:g} ms and TPOT <= {r0['goodput_tpot_ms']:g} ms. Ratio: tpserve ÷ llama.cpp.", "",
                "| server | done | failed | out tok/s | TTFT p50 | TTFT p90 | TTFT p99 | TPOT p50 | TPOT p90 | ITL p99 | goodput req/s |",
                "|---|---|---|---|---|---|---|---|---|---|---|"]
        for name, r in open_runs:
            out.append(f"| {name} | {r['completed']} | {r['failed']} | {r['output_throughput']:.1f} | "
                       f"{r['ttft_ms']['median']:.0f} | {r['ttft_ms']['p90']:.0f} | {r['ttft_ms']['p99']:.0f} | "
                       f"{r['tpot_ms']['median']:.1f} | {r['tpot_ms']['p90']:.1f} | {r['itl_ms']['p99']:.1f} | "
                       f"{r.get('request_goodput', 0):.2f} |")
        if len(open_runs) == 2:
            a, b = open_runs[0][1], open_runs[1][1]
            out.append(f"| ratio | | | {_ratio(a['output_throughput'], b['output_throughput'])} | "
                       f"{_ratio(a['ttft_ms']['median'], b['ttft_ms']['median'])} | {_ratio(a['ttft_ms']['p90'], b['ttft_ms']['p90'])} | "
                       f"{_ratio(a['ttft_ms']['p99'], b['ttft_ms']['p99'])} | {_ratio(a['tpot_ms']['median'], b['tpot_ms']['median'])} | "
                       f"{_ratio(a['tpot_ms']['p90'], b['tpot_ms']['p90'])} | {_ratio(a['itl_ms']['p99'], b['itl_ms']['p99'])} | "
                       f"{_ratio(a.get('request_goodput', 0), b.get('request_goodput', 0))} |")

    static_rows = []
    for tp in tps:
        c, s = load(f"tp{tp}_continuous_c{sc}"), load(f"tp{tp}_static_c{sc}")
        if not (c and s):
            continue
        static_rows.append(
            f"| {tp} | {c['output_throughput']:.1f} | {s['output_throughput']:.1f} | "
            f"{_ratio(c['output_throughput'], s['output_throughput'])} | {c['e2e_ms']['median']:.0f} | "
            f"{s['e2e_ms']['median']:.0f} | {_ratio(s['e2e_ms']['median'], c['e2e_ms']['median'])} (static/cont) | "
            f"{c['ttft_ms']['median']:.0f} | {s['ttft_ms']['median']:.0f} |")
    if static_rows:
        out += ["", f"Continuous vs static batching, C={sc}, 3*C requests, lengths +-50% (--range-ratio 0.5). The "
                "coordinator has no static mode: static = client-side batches of C requests, each waited for whole "
                "before the next.", "",
                "| TP | out tok/s continuous | out tok/s static | ratio | E2E p50 cont | E2E p50 static | ratio | "
                "TTFT p50 cont | TTFT p50 static |",
                "|---|---|---|---|---|---|---|---|---|"] + static_rows

    pc, pu = load(f"tp{tps[0]}_prefix_cached"), load(f"tp{tps[0]}_prefix_uncached")
    if pc and pu:
        out += ["", f"Prefix caching, TP {tps[0]}: {pc['num_requests']} requests at concurrency 1 sharing a "
                f"{pc['shared_prefix_len']}-token prefix (+16 own tokens, 8 output); server restarted with "
                "--no-prefix-cache for the peer.", "",
                "| | TTFT p50 | TTFT mean | prompt tokens from cache | E2E p50 |", "|---|---|---|---|---|"]
        for name, r in (("cache on", pc), ("cache off", pu)):
            out.append(f"| {name} | {r['ttft_ms']['median']:.0f} | {r['ttft_ms']['mean']:.0f} | "
                       f"{r['cached_prompt_tokens']} | {r['e2e_ms']['median']:.0f} |")
        out.append(f"| gain (off/on) | {_ratio(pu['ttft_ms']['median'], pc['ttft_ms']['median'])} | "
                   f"{_ratio(pu['ttft_ms']['mean'], pc['ttft_ms']['mean'])} | | "
                   f"{_ratio(pu['e2e_ms']['median'], pc['e2e_ms']['median'])} |")
    out += ["", f"(whole sweep: {sweep['elapsed_s']} s wall)"]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    text = serving_section(sys.argv[1])
    print(text or f"no serving sweep in {sys.argv[1]}")

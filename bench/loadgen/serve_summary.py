#!/usr/bin/env python3
"""serve_summary.py RESULTS "TPS" "CONCURRENCIES" STATIC_C ELAPSED MODEL: the tables of bench/serve-sweep.sh.

Reads RESULTS/serve_*.json (tpserve-bench --json), prints the sweep, continuous-vs-static and
prefix-caching tables (each figure beside its peer as a ratio) and appends them to RESULTS/summary.md.
"""
import json, os, sys, datetime
res, tps, cs, sc, elapsed, model = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4], sys.argv[5], sys.argv[6]
def load(name):
    p = os.path.join(res, f"serve_{name}.json")
    return json.load(open(p)) if os.path.exists(p) else None
def ratio(a, b):
    return f"{a / b:.2f}x" if a and b else "-"
out = []
out.append(f"Closed-loop concurrency sweep ({model}, 2*C requests per point, random token ids, "
           "input/output lengths as given, ignore_eos). TTFT/TPOT in ms.")
hdr = "| TP | C | reqs | failed | out tok/s | TTFT p50 | TTFT p99 | TPOT p50 | TPOT p99 | tok/s vs TP " + tps[0] + " |"
out += [hdr, "|" + "---|" * (hdr.count("|") - 1)]
for tp in tps:
    for c in cs:
        r, base = load(f"tp{tp}_c{c}"), load(f"tp{tps[0]}_c{c}")
        if not r: continue
        out.append(f"| {tp} | {c} | {r['completed']} | {r['failed']} | {r['output_throughput']:.1f} | "
                   f"{r['ttft_ms']['median']:.0f} | {r['ttft_ms']['p99']:.0f} | {r['tpot_ms']['median']:.1f} | "
                   f"{r['tpot_ms']['p99']:.1f} | {ratio(r['output_throughput'], base['output_throughput'] if base else 0)} |")
out.append("")
out.append(f"Continuous vs static batching, C={sc}, 3*C requests, lengths +-50% (--range-ratio 0.5). The coordinator "
           "has no static mode: static = client-side batches of C requests, each waited for whole before the next.")
out += ["| TP | out tok/s continuous | out tok/s static | ratio | E2E p50 cont | E2E p50 static | ratio | TTFT p50 cont | TTFT p50 static |",
        "|---|---|---|---|---|---|---|---|---|"]
for tp in tps:
    c, s = load(f"tp{tp}_continuous_c{sc}"), load(f"tp{tp}_static_c{sc}")
    if not (c and s): continue
    out.append(f"| {tp} | {c['output_throughput']:.1f} | {s['output_throughput']:.1f} | "
               f"{ratio(c['output_throughput'], s['output_throughput'])} | {c['e2e_ms']['median']:.0f} | "
               f"{s['e2e_ms']['median']:.0f} | {ratio(s['e2e_ms']['median'], c['e2e_ms']['median'])} (static/cont) | "
               f"{c['ttft_ms']['median']:.0f} | {s['ttft_ms']['median']:.0f} |")
pc, pu = load(f"tp{tps[0]}_prefix_cached"), load(f"tp{tps[0]}_prefix_uncached")
if pc and pu:
    out.append("")
    out.append(f"Prefix caching, TP {tps[0]}: {pc['num_requests']} requests at concurrency 1 sharing a "
               f"{pc['shared_prefix_len']}-token prefix (+16 own tokens, 8 output); server restarted with --no-prefix-cache for the peer.")
    out += ["| | TTFT p50 | TTFT mean | prompt tokens from cache | E2E p50 |", "|---|---|---|---|---|"]
    for name, r in (("cache on", pc), ("cache off", pu)):
        out.append(f"| {name} | {r['ttft_ms']['median']:.0f} | {r['ttft_ms']['mean']:.0f} | {r['cached_prompt_tokens']} | {r['e2e_ms']['median']:.0f} |")
    out.append(f"| gain (off/on) | {ratio(pu['ttft_ms']['median'], pc['ttft_ms']['median'])} | "
               f"{ratio(pu['ttft_ms']['mean'], pc['ttft_ms']['mean'])} | | {ratio(pu['e2e_ms']['median'], pc['e2e_ms']['median'])} |")
out.append("")
out.append(f"(whole sweep: {elapsed} s wall)")
text = "\n".join(out)
print(text)
with open(os.path.join(res, "summary.md"), "a") as f:
    f.write(f"\n## Serving (bench/serve-sweep.sh, {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores)\n\n{text}\n")

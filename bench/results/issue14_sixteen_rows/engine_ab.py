#!/usr/bin/env python3
# Interleaved A/B of engine binaries: decode B=1 tok/s per round and the median; args: rounds model threads exe...
import re, subprocess, sys, statistics
rounds, model, threads = int(sys.argv[1]), sys.argv[2], sys.argv[3]; exes = sys.argv[4:]
extra = []
res = {e: [] for e in exes}; pre = {e: [] for e in exes}
for r in range(rounds):
    for e in exes:
        out = subprocess.run([e, "--model", model, "--threads", threads, "--batches", "1", "--prompt", "16",
                              "--context", "16", "--decode-steps", "256"], capture_output=True, text=True).stdout
        m = re.search(r"decode B=1: ([\d.]+) tok/s", out); res[e].append(float(m.group(1)))
    print(f"round {r}: " + "  ".join(f"{res[e][-1]:.1f}" for e in exes) + f"  ratio {res[exes[-1]][-1]/res[exes[0]][-1]:.2f}", flush=True)
print("median: " + "  ".join(f"{e}: {statistics.median(res[e]):.1f}" for e in exes))

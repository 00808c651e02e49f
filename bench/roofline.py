#!/usr/bin/env python3
"""Roofline of this machine with the engine's measured points: bench/results/roofline.png.

Ceilings (measured by tpserve-bench-engine in the same run): memory = STREAM triad GB/s × intensity,
compute = the project's MatMul peak (and the F32 FMA peak of a register loop, dashed, when the
kernels bench ran). Points: decode at each batch and TP degree (intensity = 2·params·batch FLOPs ÷ the
bytes one step reads: weights of all ranks + KV), prefill (2·params·T + attention FLOPs ÷ the weight
bytes, read once per step). Each point is labelled with its fraction of the bound at its intensity.
"""
import glob
import json
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.environ.get("BENCH_RESULTS") or os.path.join(HERE, "results")
COLORS = {"smollm2-q4_1": "tab:blue", "synth135m-q8_0": "tab:orange", "synth135m-f32": "tab:green",
          "synth1b-q8_0": "tab:red"}
MARKERS = {1: "o", 2: "s", 4: "^", 8: "D"}


def main():
    runs = {}
    for path in glob.glob(os.path.join(RESULTS, "engine_*_tp*.json")):
        m = re.match(r"engine_(.+)_tp(\d+)\.json", os.path.basename(path))
        with open(path) as f:
            runs[(m.group(1), int(m.group(2)))] = json.load(f)
    if not runs:
        print("roofline: no engine results")
        return 1
    # Each run measured its own limits on a shared host; the ceiling drawn is the best of them, and each
    # point's label is its fraction of the bound its own run measured (the figure the engine printed).
    triad = max(r["triad_gbs"] for r in runs.values())
    peak = max(r["matmul_peak_gflops"] for r in runs.values())
    fma = None
    try:
        with open(os.path.join(RESULTS, "kernels.txt")) as f:
            m = re.search(r"F32 FMA peak ([\d.]+) GFLOP/s", f.read())
            fma = float(m.group(1)) if m else None
    except OSError:
        pass

    fig, ax = plt.subplots(figsize=(11, 7))
    xs = [0.1 * 1.1 ** i for i in range(130)]
    ax.plot(xs, [min(triad * x, peak) for x in xs], "k-", lw=2,
            label=f"roofline (best of the runs): triad {triad:.1f} GB/s, MatMul peak {peak:.0f} GFLOP/s")
    if fma and fma > peak:
        ax.plot(xs, [min(triad * x, fma) for x in xs], "k--", lw=1, label=f"F32 FMA peak {fma:.0f} GFLOP/s")

    for (model, tp), run in sorted(runs.items()):
        color = COLORS.get(model, "tab:gray")
        marker = MARKERS.get(tp, "x")
        first = True
        for d in run["decode"]:
            ai = d["flops_per_token"] * d["batch"] / d["bytes_per_step"]
            gf = d["gflops"]
            ax.scatter(ai, gf, color=color, marker=marker, s=50, zorder=3,
                       label=f"{model} {run['tp_label']}" if first else None)
            first = False
            ax.annotate(f"dec B{d['batch']} TP{tp} {100 * d['fraction']:.0f}%", (ai, gf), fontsize=7,
                        xytext=(4, -10 if tp > 1 else 3), textcoords="offset points", color=color)
        p = run["prefill"]
        ai = p["flops_per_token"] * p["tokens"] / run["weight_bytes"]
        ax.scatter(ai, p["gflops"], color=color, marker=marker, s=90, facecolors="none", zorder=3)
        ax.annotate(f"pp{p['tokens']} TP{tp} {100 * p['fraction']:.0f}%", (ai, p["gflops"]), fontsize=7,
                    xytext=(4, 3 - 10 * (tp > 1)), textcoords="offset points", color=color)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte of weights + KV read)")
    ax.set_ylabel("GFLOP/s (whole host)")
    ax.set_title("tpserve on this machine: decode (filled) and prefill (hollow) against the measured roofline\n"
                 "markers: circle TP1, square TP2, triangle TP4 (oversubscribed); % = fraction of the bound")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    out = os.path.join(RESULTS, "roofline.png")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

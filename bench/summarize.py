#!/usr/bin/env python3
"""Summary of one `make bench` run: bench/results/summary.md, calibration.json, scaling_model.txt (the
H200 projection of bench/scaling_model.py from this calibration) and bench/README.md.

Reads bench/results/engine_<model>_tp<N>.json (tpserve-bench-engine), llamacpp_<model>.json
(llama-bench -o json), kernels.txt (the F32 FMA peak), naive.txt (tpserve-bench-naive),
serving_vs_engine_tp<N>/serving_vs_engine.md (bench/serving-vs-engine.sh) and the serving sweep's serve_*.json (bench/serve-sweep.sh, tables by bench/loadgen/serve_summary.py). Every figure is
printed beside its bound or peer measured in the same run, with the ratio.
calibration.json (read by bench/scaling_model.py):
  bw_fraction      = decode tok/s at batch 1, TP 1 ÷ (STREAM triad ÷ bytes per token), on SmolLM2 Q4_1
  compute_fraction = prefill GFLOP/s at TP 1 ÷ the measured F32 FMA peak (register-only loop), same model
"""
import contextlib
import glob
import io
import json
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "loadgen"))
from serve_summary import serving_section  # noqa: E402
sys.path.insert(0, HERE)
import scaling_model  # noqa: E402

# BENCH_RESULTS (run-all.sh passes it) moves the results, and this page with them, off the committed ones.
RESULTS = os.environ.get("BENCH_RESULTS") or os.path.join(HERE, "results")
README = os.path.join(HERE, "README.md") if os.path.realpath(RESULTS) == os.path.realpath(os.path.join(HERE, "results")) \
    else os.path.join(RESULTS, "README.md")
MODELS = ["smollm2-q4_1", "synth135m-q8_0", "synth135m-f32", "synth1b-q8_0"]
CAL_MODEL = "smollm2-q4_1"


def load_engine():
    runs = {}
    for path in glob.glob(os.path.join(RESULTS, "engine_*_tp*.json")):
        m = re.match(r"engine_(.+)_tp(\d+)\.json", os.path.basename(path))
        with open(path) as f:
            runs[(m.group(1), int(m.group(2)))] = json.load(f)
    return runs


def load_llamacpp():
    """model -> {"pp": tok/s, "tg": tok/s, "threads": n}"""
    peers = {}
    for path in glob.glob(os.path.join(RESULTS, "llamacpp_*.json")):
        name = os.path.basename(path)[len("llamacpp_"):-len(".json")]
        try:
            with open(path) as f:
                rows = json.load(f)
        except (OSError, ValueError):
            continue
        entry = {}
        for r in rows:
            key = "pp" if r.get("n_prompt", 0) > 0 and r.get("n_gen", 0) == 0 else "tg"
            entry[key] = r["avg_ts"]
            entry[key + "_tokens"] = r["n_prompt"] if key == "pp" else r["n_gen"]
            entry["threads"] = r.get("n_threads")
        peers[name] = entry
    return peers


def fma_peak():
    try:
        with open(os.path.join(RESULTS, "kernels.txt")) as f:
            m = re.search(r"F32 FMA peak ([\d.]+) GFLOP/s", f.read())
            return float(m.group(1)) if m else None
    except OSError:
        return None


def decode(run, batch):
    for d in run["decode"]:
        if d["batch"] == batch:
            return d
    return None


def paired_ratio(d, base):
    """d's tok/s ÷ base's: the median of the rounds' own ratios where both carry their rounds (bench/median_round.py;
    the TP degrees of a round run back to back, so each round's pair shares the host's state of the moment), else
    the ratio of the two figures."""
    ours, theirs = d.get("rounds_tok_s"), base.get("rounds_tok_s")
    if ours and theirs and len(ours) == len(theirs):
        return statistics.median(a / b for a, b in zip(ours, theirs))
    return d["tok_s"] / base["tok_s"]


def main():
    runs = load_engine()
    if not runs:
        print("no engine results in", RESULTS)
        return 1
    peers = load_llamacpp()
    peak = fma_peak()
    out = []
    any_run = next(iter(runs.values()))
    peaks = {}  # the MatMul peak of each arithmetic, from the single-rank runs (the TP runs share the cores)
    for (model, tp), run in sorted(runs.items(), key=lambda kv: kv[0][1]):
        peaks.setdefault(run.get("matmul_peak_type") or "F32/Q8_0 best", run["matmul_peak_gflops"])
    out.append(f"Limits measured in the engine runs: STREAM triad {any_run['triad_gbs']:.2f} GB/s, "
               "project MatMul peak (T=512, 2048 x 2048, in the arithmetic of a model's matrices) "
               + ", ".join(f"{t} {g:.1f}" for t, g in peaks.items()) + " GFLOP/s"
               + (f", F32 FMA peak {peak:.1f} GFLOP/s (kernels bench)" if peak else "") + ".\n")

    batches = sorted({d["batch"] for run in runs.values() for d in run["decode"]})
    out.append("### Single rank (TP 1): tokens/s beside the machine's bound and llama.cpp\n")
    out.append("| model | weights MB | prefill tok/s (bound, %) | "
               + " | ".join(f"decode B={b} tok/s (bound, %)" for b in batches)
               + " | llama.cpp pp / tg tok/s | ours ÷ llama.cpp pp / tg |")
    out.append("|---|---|---|" + "---|" * len(batches) + "---|---|")
    for model in MODELS:
        run = runs.get((model, 1))
        if not run:
            continue
        p = run["prefill"]
        d1 = decode(run, 1)
        cell = lambda d: f"{d['tok_s']:.1f} ({d['bound_tok_s']:.1f}, {100 * d['fraction']:.0f}%)" if d else "-"
        peer = peers.get(model, {})
        peer_cell = ratio_cell = "-"
        if "pp" in peer and "tg" in peer:
            peer_cell = f"pp{peer['pp_tokens']} {peer['pp']:.1f} / tg{peer['tg_tokens']} {peer['tg']:.1f}"
            ratio_cell = f"{p['tok_s'] / peer['pp']:.2f}x / {d1['tok_s'] / peer['tg']:.2f}x" if d1 else "-"
        out.append(f"| {model} | {run['weight_bytes'] / 1e6:.0f} | pp{p['tokens']} {p['tok_s']:.1f} "
                   f"({p['bound_tok_s']:.1f}, {100 * p['fraction']:.0f}%) | "
                   + " | ".join(cell(decode(run, b)) for b in batches) + f" | {peer_cell} | {ratio_cell} |")
    out.append("")
    out.append("Bounds: decode = min(triad GB/s ÷ (weight + KV bytes read per step) × batch, MatMul peak ÷ 2·params); prefill = MatMul peak ÷ "
               "FLOPs per token (2·params + attention). The MatMul peak is that of the model's arithmetic: Q8_0's for the "
               "quantised types (an int8 dot with the tokens' Q8 activations), F32's for F32 and F16 weights (f32 fmas), "
               "BF16's for BF16. llama.cpp: llama-bench on the same file and thread count.")
    rounds = sorted({run.get("rounds", 1) for run in runs.values()})
    out.append(f"Each figure is the median of {' or '.join(map(str, rounds))} round(s) of tpserve-bench-engine, the TP "
               "degrees of a model in turns (bench/median_round.py).\n")

    out.append("### Tensor parallelism: decode scaling (same host; ranks share its cores and memory bandwidth)\n")
    out.append("Speedup vs TP1: the median of the rounds' own ratios (a round runs the TP degrees back to back); the "
               "other columns are the median round's.\n")
    out.append("| model | TP | batch | tok/s | speedup vs TP1 | efficiency (speedup ÷ TP) | tok/s per rank "
               "| step ms | all-reduce ms (share) | % of bound |")
    out.append("|---|---|---|---|---|---|---|---|---|---|")
    for model in MODELS:
        base = runs.get((model, 1))
        for tp in sorted(t for (m, t) in runs if m == model):
            run = runs[(model, tp)]
            for d in run["decode"]:
                b = decode(base, d["batch"]) if base else None
                speedup = paired_ratio(d, b) if b else float("nan")
                out.append(f"| {model} | {run['tp_label']} | {d['batch']} | {d['tok_s']:.1f} | {speedup:.2f} | "
                           f"{speedup / tp:.2f} | {d['tok_s'] / tp:.1f} | {d['step_ms']:.1f} | "
                           f"{d['allreduce_ms']:.2f} ({100 * d['allreduce_share']:.0f}%) | {100 * d['fraction']:.0f}% |")
    out.append("")

    cal_run = runs.get((CAL_MODEL, 1)) or runs.get(sorted(runs)[0])
    d1 = decode(cal_run, 1) or cal_run["decode"][0]
    cal = {
        "bw_fraction": round(d1["fraction"], 4),
        "compute_fraction": round(cal_run["prefill"]["gflops"] / (peak or cal_run["matmul_peak_gflops"]), 4),
        "compute_fraction_of_matmul_peak": round(cal_run["prefill"]["gflops"] / cal_run["matmul_peak_gflops"], 4),
        "measured_on": os.path.basename(cal_run["model"]),
        "triad_gbs": cal_run["triad_gbs"],
        "fma_peak_gflops": peak,
        "matmul_peak_gflops": cal_run["matmul_peak_gflops"],
    }
    with open(os.path.join(RESULTS, "calibration.json"), "w") as f:
        json.dump(cal, f, indent=1)
    out.append(f"Calibration (bench/results/calibration.json, read by scaling_model.py): bandwidth fraction "
               f"{cal['bw_fraction']:.2f}, compute fraction {cal['compute_fraction']:.2f} (of the "
               f"{'FMA' if peak else 'MatMul'} peak), measured on {cal['measured_on']}.")
    # The H200 projection from this calibration (scaling_model.py reads calibration.json).
    projection = io.StringIO()
    with contextlib.redirect_stdout(projection):
        scaling_model.main()
    with open(os.path.join(RESULTS, "scaling_model.txt"), "w") as f:
        f.write(projection.getvalue())
    out += ["", "### Beyond the box on paper: TP decode on H200 (bench/scaling_model.py, calibrated on this run)\n",
            "\n".join("    " + line for line in projection.getvalue().strip().splitlines())]
    try:
        with open(os.path.join(RESULTS, "naive.txt")) as f:
            naive = f.read().strip()
        out += ["", "### The floor: generation without a KV cache (tpserve-bench-naive)\n",
                "\n".join("    " + line for line in naive.splitlines())]
    except OSError:
        pass
    for threads in sorted({1, os.cpu_count() or 1}):
        try:
            with open(os.path.join(RESULTS, f"types_vs_llama_t{threads}.md")) as f:
                types = f.read().strip()
        except OSError:
            continue
        out += ["", f"### Every weight type beside llama.cpp, {threads} thread{'s' if threads > 1 else ''} "
                "(bench/types-vs-llama.sh)\n", types]
    for tp in (1, 2):
        try:
            with open(os.path.join(RESULTS, f"serving_vs_engine_tp{tp}", "serving_vs_engine.md")) as f:
                versus = f.read().strip()
        except OSError:
            continue
        out += ["", f"### The server against the engine alone, TP {tp} (bench/serving-vs-engine.sh)\n", versus]
    serving = serving_section(RESULTS)
    if serving:
        out += ["", "### Serving: the real server under tpserve-bench, beside llama.cpp's llama-server "
                "(bench/serve-sweep.sh)\n", serving]
    text = "\n".join(out) + "\n"
    with open(os.path.join(RESULTS, "summary.md"), "w") as f:
        f.write(text)
    print(text)
    write_readme(text)
    return 0


def readme_head():
    """The hand-written part of bench/README.md (everything before "## Latest results"), kept as it is:
    one copy of that text, edited in the README itself."""
    with open(os.path.join(HERE, "README.md")) as f:
        text = f.read()
    return text[:text.index("\n## Latest results")]


def write_readme(summary):
    machine = ""
    try:
        with open(os.path.join(RESULTS, "machine.txt")) as f:
            machine = "".join("    " + line for line in f)
    except OSError:
        pass
    head = readme_head()
    with open(README, "w") as f:
        f.write(head)
        f.write("\n## Latest results\n\nMachine (lscpu):\n\n" + machine + "\n")
        f.write(summary)
        f.write("\n![roofline](results/roofline.png)\n")
        f.write("\nAll-reduce: results/allreduce_np2.txt; kernels: results/kernels.txt; STREAM: results/stream.txt; "
                "H200 projection from this calibration: results/scaling_model.txt.\n")


if __name__ == "__main__":
    sys.exit(main())

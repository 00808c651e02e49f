#!/usr/bin/env python3
"""Turns one bench/gpu/run.sh run into summary.md and results.json.

Inputs: the steps table (name, exit code, seconds), the engine and NCCL benchmark JSONs, and
tests_gpu's GoogleTest JSON. Every number is printed beside its bound (the HBM roofline) and the
fraction of it reached; every step beside its exit code, so a failed step is plain to see.
"""
import argparse
import glob
import json
import os


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", required=True)
    ap.add_argument("--json-dir", required=True)
    ap.add_argument("--tests-dir", required=True, help="one GoogleTest JSON per suite: tests_<suite>.json")
    ap.add_argument("--num-gpus", type=int, default=0)
    ap.add_argument("--out-md", required=True)
    ap.add_argument("--out-json", required=True)
    args = ap.parse_args()

    steps = []
    with open(args.steps) as f:
        for line in f:
            name, rc, seconds = line.rstrip("\n").split("\t")
            steps.append({"step": name, "exit_code": int(rc), "seconds": int(seconds)})
    engines = [j for j in (load(p) for p in sorted(glob.glob(os.path.join(args.json_dir, "engine_*.json")))) if j]
    nccl = load(os.path.join(args.json_dir, "nccl_allreduce.json"))
    suites = [j for j in (load(p) for p in sorted(glob.glob(os.path.join(args.tests_dir, "tests_*.json")))) if j]

    md = ["# tpserve on a GPU: bench/gpu/run.sh", ""]
    device = engines[0]["device"] if engines else "?"
    md.append(f"Device: {device}, {args.num_gpus} GPU(s). Roofline: HBM bandwidth "
              f"{engines[0]['peak_gbs'] if engines else 4800:.0f} GB/s; a step's bytes = weights read once + "
              "K/V of every cached position read.")
    md += ["", "## Steps", "", "| step | exit code | seconds |", "|---|---|---|"]
    md += [f"| {s['step']} | {s['exit_code']}{' **FAILED**' if s['exit_code'] else ''} | {s['seconds']} |"
           for s in steps]

    md += ["", "## Tests (tests_gpu)", ""]
    test_rows = []
    if suites:
        for suite in (s for j in suites for s in j.get("testsuites", [])):
            for case in suite.get("testsuite", []):
                status = "failed" if case.get("failures") else ("skipped" if case.get("result") == "SKIPPED" else "passed")
                test_rows.append({"test": f"{suite['name']}.{case['name']}", "status": status,
                                  "failures": [f.get("failure", "")[:300] for f in case.get("failures", [])]})
        md += ["| test | result |", "|---|---|"]
        md += [f"| {t['test']} | {t['status']} |" for t in test_rows]
        for t in test_rows:
            for failure in t["failures"]:
                md += ["", f"`{t['test']}`: " + failure.replace("\n", " ")]
    else:
        md.append("tests_gpu wrote no JSON (did not run or every suite crashed: see logs.txt).")

    for e in engines:
        p = e["prefill"]
        md += ["", f"## Engine: {e['label']}", "",
               f"{e['weight_bytes_per_step'] / 1e6:.1f} MB of weights read per step; decode after {e['context']} "
               f"cached tokens per sequence, median of {e['steps']} steps.", "",
               "| run | tokens/s | step ms | GB/s moved | fraction of the roofline |", "|---|---|---|---|---|"]
        for d in e["decode"]:
            md.append(f"| decode batch {d['batch']} | {d['tokens_per_s']:.0f} | {d['step_ms']:.3f} | "
                      f"{d['achieved_gbs']:.0f} | {100 * d['roofline_fraction']:.1f}% |")
        md.append(f"| prefill pp{p['tokens']} | {p['tokens_per_s']:.0f} | {p['ms']:.3f} | {p['achieved_gbs']:.0f} | "
                  f"{100 * p['roofline_fraction']:.1f}% ({p['tflops']:.2f} TFLOP/s) |")

    md += ["", "## NCCL all-reduce (f32 sum, in place)", ""]
    if nccl:
        md.append(f"NCCL {nccl['nccl_version']}, {nccl['num_gpus']} GPU(s): {nccl['note']}. "
                  "busbw = algbw × 2(n−1)/n (nccl-tests).")
        md += ["", "| bytes | time µs | algbw GB/s | busbw GB/s |", "|---|---|---|---|"]
        md += [f"| {q['bytes']} | {q['time_us']:.1f} | {q['algbw_gbs']:.1f} | {q['busbw_gbs']:.1f} |"
               for q in nccl["points"]]
    else:
        md.append("no NCCL results (see logs.txt)")
    if args.num_gpus < 2:
        md += ["", "Tensor parallelism over NCCL (TP > 1) needs more than one GPU: the TP 2 tests and a "
               "multi-GPU all-reduce did not run on this machine."]

    with open(args.out_md, "w") as f:
        f.write("\n".join(md) + "\n")
    with open(args.out_json, "w") as f:
        json.dump({"num_gpus": args.num_gpus, "steps": steps, "tests": test_rows, "engines": engines, "nccl": nccl},
                  f, indent=1)


if __name__ == "__main__":
    main()

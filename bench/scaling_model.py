#!/usr/bin/env python3
"""Step-time model of tensor-parallel decode, calibrated on this machine's measurements, projected to H200.

A decode step at batch B on TP ranks costs, per rank,
  memory  = (weight bytes / TP + KV bytes read / TP) / (HBM bandwidth x achieved bandwidth fraction)
  compute = 2 x params x B / TP / (peak FLOP/s x achieved compute fraction)
  comm    = 2 all-reduces per layer x (latency + B x hidden x 2 bytes x 2(TP-1)/TP / link bandwidth)
and step = max(memory, compute) + comm (all-reduce is not overlapped in tpserve).
The achieved fractions and the all-reduce latency come from bench/results/*.json when present (the CPU
runs of tpserve-bench-kernels and tpserve-bench-allreduce), so the projection carries this code's
measured efficiency rather than an assumed one. Published figures are printed beside the projections.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.environ.get("BENCH_RESULTS") or os.path.join(HERE, "results")  # run-all.sh may move them

# Hardware: H200 SXM (HBM3e 4.8 TB/s, ~989 TFLOP/s dense BF16, ~1979 dense FP8; NVLink 4: 450 GB/s per direction).
H200 = {"hbm_bytes_per_s": 4.8e12, "bf16_flops": 989e12, "fp8_flops": 1979e12,
        "link_bytes_per_s": 450e9, "allreduce_latency_s": 8e-6}

MODELS = {
    # params, layers, hidden, kv heads, head dim
    "Llama-3-8B": {"params": 8.03e9, "layers": 32, "hidden": 4096, "kv_heads": 8, "head_dim": 128},
    "Llama-3-70B": {"params": 70.6e9, "layers": 80, "hidden": 8192, "kv_heads": 8, "head_dim": 128},
}

# Published: TensorRT-LLM v0.5.0 H200 launch blog (FP8 weights, max throughput), output tokens/s.
# (model, tp, batch, isl, osl, tokens/s)
PUBLISHED = [
    ("Llama-2-70B (TRT-LLM 0.5, FP8)", "Llama-3-70B", 1, 512, 128, 128, 3014),
    ("Llama-2-70B (TRT-LLM 0.5, FP8)", "Llama-3-70B", 4, 512, 128, 2048, 6616),
]


def load_calibration():
    """Achieved fractions measured on this machine by the project's own benchmarks."""
    cal = {"bw_fraction": 0.7, "compute_fraction": 0.5, "source": "defaults (no bench/results yet)"}
    path = os.path.join(RESULTS, "calibration.json")
    if os.path.exists(path):
        with open(path) as f:
            cal.update(json.load(f))
        cal["source"] = path
    return cal


def step_time(model, tp, batch, context, weight_bytes_per_param, cal, hw=H200, flops_key="bf16_flops"):
    m = MODELS[model]
    weight_bytes = m["params"] * weight_bytes_per_param / tp
    kv_bytes = batch * context * 2 * m["layers"] * m["kv_heads"] * m["head_dim"] * 2 / tp
    t_mem = (weight_bytes + kv_bytes) / (hw["hbm_bytes_per_s"] * cal["bw_fraction"])
    t_compute = 2 * m["params"] * batch / tp / (hw[flops_key] * cal["compute_fraction"])
    t_comm = 0.0
    if tp > 1:
        msg = batch * m["hidden"] * 2
        per_ar = hw["allreduce_latency_s"] + msg * 2 * (tp - 1) / tp / hw["link_bytes_per_s"]
        t_comm = 2 * m["layers"] * per_ar
    return max(t_mem, t_compute) + t_comm, t_mem, t_compute, t_comm


def main():
    cal = load_calibration()
    print(f"calibration: bandwidth fraction {cal['bw_fraction']:.2f}, compute fraction "
          f"{cal['compute_fraction']:.2f} ({cal['source']})")
    rows = []
    print(f"{'model':<12} {'TP':>2} {'batch':>5} {'TPOT ms':>8} {'tok/s':>9} {'mem ms':>7} {'comp ms':>7} {'comm ms':>7}")
    for model in MODELS:
        for tp in (1, 2, 4, 8):
            for batch in (1, 64):
                t, tm, tc, tcomm = step_time(model, tp, batch, 1024, 2.0, cal)
                rows.append({"model": model, "tp": tp, "batch": batch, "tpot_ms": t * 1e3,
                             "tokens_per_s": batch / t})
                print(f"{model:<12} {tp:>2} {batch:>5} {t*1e3:>8.2f} {batch/t:>9.0f} {tm*1e3:>7.2f} "
                      f"{tc*1e3:>7.2f} {tcomm*1e3:>7.3f}")
    print("\nbeside published figures (FP8 weights, 1 byte/param, FP8 peak):")
    for label, model, tp, batch, isl, osl, published in PUBLISHED:
        t, *_ = step_time(model, tp, batch, isl + osl // 2, 1.0, cal, flops_key="fp8_flops")
        # The batch's prefill is compute bound: 2 x params x prompt tokens at the achieved compute rate.
        t_prefill = 2 * MODELS[model]["params"] * isl * batch / tp / (H200["fp8_flops"] * cal["compute_fraction"])
        predicted = batch * osl / (t_prefill + osl * t)
        print(f"  {label} TP{tp} batch {batch} ISL/OSL {isl}/{osl}: model {predicted:,.0f} tok/s vs "
              f"published {published:,} tok/s (ratio {predicted / published:.2f})")
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "scaling_model.json"), "w") as f:
        json.dump({"calibration": cal, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

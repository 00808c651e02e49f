#!/usr/bin/env python3
"""The median round of each engine figure: bench/run-all.sh runs tpserve-bench-engine in rounds, the TP degrees
of a model in turns, into ROUNDS_DIR/engine_<model>_tp<N>_r<R>.json, and this writes OUT_DIR/engine_<model>_tp<N>.json
(the file bench/summarize.py and bench/roofline.py read): the first round's run with its prefill and each batch's
decode figure taken whole from the round with the median tok/s (the lower middle one of an even count). The
rounds' tok/s go beside them ("rounds_tok_s").
  bench/median_round.py ROUNDS_DIR OUT_DIR
"""
import glob
import json
import os
import re
import sys
from collections import defaultdict


def median_entry(entries):
    ranked = sorted(entries, key=lambda e: e["tok_s"])
    return ranked[(len(ranked) - 1) // 2]


def merge(runs):
    merged = dict(runs[0])
    merged["rounds"] = len(runs)
    prefills = [r["prefill"] for r in runs if r.get("prefill")]
    if prefills:
        merged["prefill"] = dict(median_entry(prefills), rounds_tok_s=[p["tok_s"] for p in prefills])
    by_batch = defaultdict(list)
    for run in runs:
        for d in run["decode"]:
            by_batch[d["batch"]].append(d)
    merged["decode"] = [dict(median_entry(ds), rounds_tok_s=[d["tok_s"] for d in ds])
                        for _, ds in sorted(by_batch.items())]
    return merged


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rounds_dir, out_dir = sys.argv[1], sys.argv[2]
    groups = defaultdict(list)
    for path in sorted(glob.glob(os.path.join(rounds_dir, "engine_*_tp*_r*.json"))):
        m = re.match(r"engine_(.+)_tp(\d+)_r(\d+)\.json$", os.path.basename(path))
        if not m:
            continue
        with open(path) as f:
            groups[(m.group(1), int(m.group(2)))].append((int(m.group(3)), json.load(f)))
    for (model, tp), runs in sorted(groups.items()):
        merged = merge([run for _, run in sorted(runs, key=lambda r: r[0])])
        with open(os.path.join(out_dir, f"engine_{model}_tp{tp}.json"), "w") as f:
            json.dump(merged, f, indent=1)
        print(f"engine {model} TP{tp}: median of {len(runs)} round(s)")


if __name__ == "__main__":
    main()

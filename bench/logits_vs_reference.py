#!/usr/bin/env python3
"""Teacher-forced logits of tpserve and of llama.cpp beside the float64 reference, on the same GGUF file and ids.

For each model: the 10 prompts of bench/greedy_vs_llama.py, tokenized by llama-server as that script does
(--bos: the model's BOS added and special tokens parsed), each followed by llama.cpp's greedy continuation of
--continue tokens (EOS ignored) so that every sequence has 16+ positions; or, with --random N, four seeded
random sequences of N ids. Every sequence is then teacher-forced through
  tpserve     tpserve-teacher-logits --engine (prefill of the first id, then one decode step per id, 2 threads),
  reference   tpserve-teacher-logits --reference (tests/testing/reference_llama: float64 loops over the
              dequantised weights, no engine kernel; float64 activations, so it does not round them to Q8),
  llama.cpp   bench/peers/llama_logits (libllama, CPU, 2 threads, the whole sequence in one batch, f32 KV
              cache unless --llama-kv; tpserve's is --kv-dtype),
and the script prints, over every position and vocabulary entry, the mean and max |logit difference| of
tpserve vs the reference, llama.cpp vs the reference and tpserve vs llama.cpp, the largest |reference logit|
(the scale), and at how many positions each engine's argmax is the reference's. --json writes all of it with
the ids and per-sequence maxima.
  bench/logits_vs_reference.py --teacher-logits BIN --llama-logits BIN --llama-server BIN
                               [--bos] [--continue 16] [--random N] [--threads 2] [--llama-kv f32|f16|bf16|q8_0]
                               [--kv-dtype f32|f16|bf16|q8_0]
                               [--json OUT] MODEL...
Reproduces bench/README.md "Teacher-forced logits beside the float64 reference" (bench/logits-vs-reference.sh
runs every file of it); raw results in bench/results/logits_vs_reference/.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from greedy_vs_llama import PROMPTS, free_port, post, wait_healthy  # noqa: E402


def prompt_sequences(llama_server, model, bos, num_continue, threads):
    """The prompts' ids (as greedy_vs_llama.py gets them) each followed by llama.cpp's greedy continuation."""
    port = free_port()
    server = subprocess.Popen([llama_server, "-m", model, "--port", str(port), "-t", str(threads), "-c", "4096",
                               "-np", "1", "--log-disable"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_healthy(port, server)
        seqs = []
        for prompt in PROMPTS:
            ids = post(port, "/tokenize", {"content": prompt, "add_special": bos, "parse_special": bos})["tokens"]
            more = post(port, "/completion", {"prompt": ids, "n_predict": num_continue, "temperature": 0,
                                              "top_k": 1, "ignore_eos": True, "cache_prompt": False,
                                              "return_tokens": True})["tokens"]
            seqs.append(ids + more)
        return seqs
    finally:
        server.terminate()
        server.wait()


def vocab_size(model):
    import gguf
    reader = gguf.GGUFReader(model)
    return int([t for t in reader.tensors if t.name == "token_embd.weight"][0].shape[1])


def run(cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def measure(args, model):
    if args.random:
        vocab = vocab_size(model)
        rng = np.random.default_rng(args.seed)
        seqs = [[int(x) for x in rng.integers(0, vocab, args.random)] for _ in range(4)]
    else:
        seqs = prompt_sequences(args.llama_server, model, args.bos, args.continue_tokens, args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        ids_file = os.path.join(tmp, "ids.txt")
        with open(ids_file, "w") as f:
            f.writelines(",".join(map(str, s)) + "\n" for s in seqs)
        run([args.teacher_logits, "--model", model, "--ids-file", ids_file, "--threads", str(args.threads),
             "--kv-dtype", args.kv_dtype, "--engine", os.path.join(tmp, "tpserve.f32"),
             "--reference", os.path.join(tmp, "reference.f64")])
        ours_all = np.fromfile(os.path.join(tmp, "tpserve.f32"), dtype=np.float32)
        ref_all = np.fromfile(os.path.join(tmp, "reference.f64"), dtype=np.float64)
        vocab = ours_all.size // sum(len(s) for s in seqs)
        ours_all = ours_all.reshape(-1, vocab)
        ref_all = ref_all.reshape(-1, vocab)
        per_seq = []
        sums = {"tpserve_vs_ref": 0.0, "llama_vs_ref": 0.0, "tpserve_vs_llama": 0.0}
        maxes = dict.fromkeys(sums, 0.0)
        argmax = {"tpserve": 0, "llama": 0}
        scale, row = 0.0, 0
        for i, seq in enumerate(seqs):
            out = os.path.join(tmp, f"llama{i}.f32")
            run([args.llama_logits, model, ",".join(map(str, seq)), out, "--threads", str(args.threads),
                 "--kv", args.llama_kv])
            llama = np.fromfile(out, dtype=np.float32).reshape(len(seq), -1)[:, :vocab].astype(np.float64)
            ours = ours_all[row:row + len(seq)].astype(np.float64)
            ref = ref_all[row:row + len(seq)]
            row += len(seq)
            diffs = {"tpserve_vs_ref": np.abs(ours - ref), "llama_vs_ref": np.abs(llama - ref),
                     "tpserve_vs_llama": np.abs(ours - llama)}
            entry = {"ids": seq, "positions": len(seq)}
            for k, d in diffs.items():
                sums[k] += float(d.sum())
                maxes[k] = max(maxes[k], float(d.max()))
                entry[f"max_{k}"] = float(d.max())
            top = ref.argmax(axis=1)
            argmax["tpserve"] += int((ours.argmax(axis=1) == top).sum())
            argmax["llama"] += int((llama.argmax(axis=1) == top).sum())
            scale = max(scale, float(np.abs(ref).max()))
            per_seq.append(entry)
    count = row * vocab
    result = {"model": model, "sequences": len(seqs), "positions": row, "vocab": vocab,
              "llama_kv": args.llama_kv, "kv_dtype": args.kv_dtype, "max_abs_reference_logit": scale,
              "argmax_equal_to_reference": {**argmax, "of": row}, "per_sequence": per_seq}
    for k in sums:
        result[f"mean_{k}"] = sums[k] / count
        result[f"max_{k}"] = maxes[k]
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--teacher-logits", required=True, help="tests/testing's tpserve-teacher-logits")
    ap.add_argument("--llama-logits", required=True, help="bench/peers/llama_logits")
    ap.add_argument("--llama-server", help="for the prompts' ids (not needed with --random)")
    ap.add_argument("--bos", action="store_true", help="add the model's BOS and parse special tokens")
    ap.add_argument("--continue", dest="continue_tokens", type=int, default=16)
    ap.add_argument("--random", type=int, default=0, help="four seeded random sequences of this many ids instead")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--llama-kv", choices=["f32", "f16", "bf16", "q8_0"], default="f32")
    ap.add_argument("--kv-dtype", choices=["f32", "f16", "bf16", "q8_0"], default="f32",
                    help="tpserve's KV cache type (tpserve-teacher-logits --kv-dtype)")
    ap.add_argument("--json", help="write the results (a list, one per model) here")
    ap.add_argument("models", nargs="+")
    args = ap.parse_args()
    if not args.random and not args.llama_server:
        sys.exit("--llama-server is needed for the prompts (or give --random N)")
    results = []
    for model in args.models:
        r = measure(args, model)
        results.append(r)
        print(f"== {model}: {r['sequences']} sequences, {r['positions']} positions x {r['vocab']} vocab, "
              f"max |reference logit| {r['max_abs_reference_logit']:.3f}, llama.cpp KV {r['llama_kv']}")
        for k, name in [("tpserve_vs_ref", "tpserve   vs reference"), ("llama_vs_ref", "llama.cpp vs reference"),
                        ("tpserve_vs_llama", "tpserve   vs llama.cpp")]:
            print(f"  {name}: mean |diff| {r[f'mean_{k}']:.3e}  max |diff| {r[f'max_{k}']:.3e}")
        a = r["argmax_equal_to_reference"]
        print(f"  argmax = reference's: tpserve {a['tpserve']}/{a['of']}, llama.cpp {a['llama']}/{a['of']}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()

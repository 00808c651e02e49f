#!/usr/bin/env python3
"""Greedy ids of tpserve-run beside llama.cpp's llama-server on the same GGUF files and prompt ids.

For each model: starts llama-server (greedy: temperature 0, top-k 1), tokenizes the prompts with it (so
both engines get the same ids), asks it for up to N tokens per prompt, runs
`tpserve-run --prompt-ids ... --print-ids` for the same, and prints per prompt the tokens before the
first divergence, and their sum per model. Both stop at the end of a turn: llama.cpp's `ignore_eos`
masks the EOS logit while tpserve-run's `--ignore-eos` only keeps going, so with it the two would part
at every EOS. A sequence that ended counts as agreeing to the end when the other ended there too.
--reference BIN (tests/testing's tpserve-reference-next) judges each first divergence by the float64
reference on the dequantised weights; --judge BIN (tests/testing's tpserve-teacher-logits) also counts, per
prompt, the tokens before each engine's first divergence from the reference's own greedy ids: one float64
forward pass along each engine's ids gives the reference's argmax at every generated position, and the
first position where it is not the engine's token is where the reference's greedy run would part from that
engine (the reference stopping where an engine ended counts as agreeing to the end); it prints the
reference's top-2 margin there. --prompts N takes the first N of the 40 prompts (default 10, the set the
older tables used; 11-40 add prose, code, lists, facts and dialogue openings). --long N replaces the prompts
by one of N paragraphs (sliding-window models past their window); --bos lets llama-server add the model's BOS
and parse special tokens (Gemma).
  bench/greedy_vs_llama.py --llama-server BIN --tpserve-run BIN [--tokens 32] [--prompts 10] [--threads 2]
                           [--tp 1] [--reference BIN] [--judge BIN] [--long N] [--bos] [--end-ids 0,2]
                           [--kv-dtype f32|f16|bf16|q8_0] MODEL...
Measured: bench/README.md (the K-quant files and Gemma 3 270M Q4_K_M natively, issue 13: --bos --end-ids 1,106,
10 prompts x 32 tokens and --long 40, a 753-token prompt past its 512-key window; each engine vs the reference's
greedy ids on the seven real files: --judge --prompts 40 --threads 1) and README "Architectures, measured"; raw
output in bench/results/greedy_vs_llama/ (the 40-prompt runs: *-p40.txt).
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time, in a small village,",
    "The three primary colors are",
    "Water boils at a temperature of",
    "The quick brown fox",
    "In machine learning, a neural network is",
    "My favourite recipe for pancakes starts with",
    "The largest planet in the solar system is",
    "To be or not to be,",
]
# Prompts 11-40: --prompts N takes the first N of PROMPTS + MORE_PROMPTS. PROMPTS stays the 10 that the older
# tables and bench/logits_vs_reference.py and bench/kv_dtype_logits.py (which import it) use.
MORE_PROMPTS = [
    "The old lighthouse keeper climbed the stairs every evening and",
    "import numpy as np\n\ndef mean_squared_error(y_true, y_pred):",
    "Here is a list of things to pack for a camping trip:\n1.",
    "Photosynthesis is the process by which plants",
    "Customer: Hi, I'd like to return a pair of shoes.\nAssistant:",
    "The French Revolution began in the year",
    "for (int i = 0; i < n; ++i) {",
    "Dear Sir or Madam,\n\nI am writing to",
    "The human heart has four chambers:",
    "It was a dark and stormy night, and",
    "Steps to make a cup of tea:\n1.",
    "The speed of light in a vacuum is approximately",
    "SELECT name, email FROM users WHERE",
    "Alice: Did you finish the report?\nBob:",
    "Mount Everest is located in",
    "The benefits of regular exercise include",
    "class Stack:\n    def __init__(self):",
    "In 1969, the first humans to walk on the Moon were",
    "The recipe calls for two cups of flour, one egg and",
    "Q: What is the boiling point of water in Fahrenheit?\nA:",
    "The main causes of climate change are",
    "She opened the letter slowly, afraid of what it might say.",
    "The days of the week are Monday, Tuesday,",
    "#include <stdio.h>\n\nint main(void) {",
    "Shakespeare wrote many plays, including",
    "The mitochondria is often called",
    "Teacher: Good morning, class. Today we will learn about",
    "The Great Wall of China was built to",
    "A good night's sleep is important because",
    "The train left the station at noon, and by evening",
]


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(port, proc):
    for _ in range(600):
        if proc.poll() is not None:
            sys.exit(f"llama-server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except Exception:
            pass
        time.sleep(0.2)
    sys.exit("llama-server did not become healthy")


def strip_end(ids, eos):
    """The ids before the first end-of-turn id."""
    for i, t in enumerate(ids):
        if t in eos:
            return ids[:i]
    return ids


def agreement(a, b):
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def judge(teacher_logits, model, prompt_ids, generated, ended, num_tokens, eos, threads):
    """Per engine: (tokens before the reference's greedy ids part from its ids, the reference's top-2 margin
    there or None). `generated[k]` are an engine's ids before its end-of-turn id, `ended[k]` whether it
    stopped there. One float64 forward pass (tpserve-teacher-logits --reference) per distinct sequence."""
    distinct = sorted({tuple(g) for g in generated})
    with tempfile.TemporaryDirectory() as tmp:
        ids_file, out = os.path.join(tmp, "ids.txt"), os.path.join(tmp, "ref.f64")
        with open(ids_file, "w") as f:
            f.writelines(",".join(map(str, prompt_ids + list(g))) + "\n" for g in distinct)
        subprocess.run([teacher_logits, "--model", model, "--ids-file", ids_file, "--prefill", str(len(prompt_ids)),
                        "--threads", str(threads), "--reference", out], check=True, stdout=subprocess.DEVNULL)
        import numpy as np
        rows = np.fromfile(out, dtype=np.float64)
    vocab = rows.size // sum(len(g) + 1 for g in distinct)
    rows = rows.reshape(-1, vocab)
    by_seq, r = {}, 0
    for g in distinct:
        by_seq[g] = rows[r:r + len(g) + 1]  # row j predicts g[j]; the last one what follows g
        r += len(g) + 1
    verdicts = []
    for g, end in zip(generated, ended):
        ref = by_seq[tuple(g)]
        n = 0
        while n < len(g) and int(ref[n].argmax()) == g[n]:
            n += 1
        top2 = np.sort(ref[min(n, len(g))])[-2:]
        if n == len(g) and (len(g) >= num_tokens or (end and int(ref[n].argmax()) in eos)):
            verdicts.append((num_tokens, None))
        else:
            verdicts.append((n, float(top2[1] - top2[0])))
    return verdicts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-server", required=True)
    ap.add_argument("--tpserve-run", required=True)
    ap.add_argument("--reference")
    ap.add_argument("--judge",
                    help="tests/testing's tpserve-teacher-logits: both engines vs the reference's greedy ids")
    ap.add_argument("--end-ids", default="0,2", help="end-of-turn ids (SmolLM2: <|endoftext|> 0, <|im_end|> 2)")
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--prompts", type=int, default=10,
                    help=f"the first N of the {len(PROMPTS + MORE_PROMPTS)} prompts (10: the older tables' set)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--long", type=int, default=0, help="one prompt of this many paragraphs instead")
    ap.add_argument("--bos", action="store_true", help="add the model's BOS and parse special tokens")
    ap.add_argument("--kv-dtype", choices=["f32", "f16", "bf16", "q8_0"],
                    help="both engines' KV cache type (tpserve-run --kv-dtype; llama-server -ctk/-ctv, with flash "
                         "attention for q8_0); default: each engine's own (tpserve f32, llama-server f16)")
    ap.add_argument("models", nargs="+")
    args = ap.parse_args()
    if not 1 <= args.prompts <= len(PROMPTS + MORE_PROMPTS):
        ap.error(f"--prompts must be 1 to {len(PROMPTS + MORE_PROMPTS)}")
    prompts = (PROMPTS + MORE_PROMPTS)[:args.prompts]
    if args.long:
        prompts = [" ".join(f"Paragraph {i}: the river flows past the old mill and the children count the boats."
                            for i in range(args.long)) + " The river"]
    for model in args.models:
        port = free_port()
        kv = ["-ctk", args.kv_dtype, "-ctv", args.kv_dtype, "-fa", "on" if args.kv_dtype == "q8_0" else "off"] \
            if args.kv_dtype else []
        server = subprocess.Popen([args.llama_server, "-m", model, "--port", str(port), "-t", str(args.threads),
                                   "-c", "4096", "-np", "1", "--log-disable", *kv],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_healthy(port, server)
            eos = {int(t) for t in args.end_ids.split(",")}
            total, identical, judged = 0, 0, {}
            vs_ref = {"ours": 0, "llama.cpp": 0}
            print(f"== {model}")
            for prompt in prompts:
                ids = post(port, "/tokenize", {"content": prompt, "add_special": args.bos,
                                               "parse_special": args.bos})["tokens"]
                llama = post(port, "/completion", {"prompt": ids, "n_predict": args.tokens, "temperature": 0,
                                                   "top_k": 1, "cache_prompt": False,
                                                   "return_tokens": True})["tokens"]
                out = subprocess.run([args.tpserve_run, "--model", model, "--prompt-ids", ",".join(map(str, ids)),
                                      "--max-tokens", str(args.tokens), "--print-ids",
                                      "--threads", str(args.threads), "--tp", str(args.tp),
                                      *(["--kv-dtype", args.kv_dtype] if args.kv_dtype else [])],
                                     capture_output=True, text=True, check=True).stdout
                ours = [int(t) for t in out.split()]
                # Whether the end-of-turn id itself is listed differs between the engines: compare the
                # ids before it; two sequences that end together agree to the end.
                raw_lengths = (len(ours), len(llama))
                ours, llama = strip_end(ours, eos), strip_end(llama, eos)
                ended = (len(ours) < raw_lengths[0] or len(ours) < args.tokens,
                         len(llama) < raw_lengths[1] or len(llama) < args.tokens)
                n = agreement(ours, llama)
                same = ours == llama
                total += args.tokens if same else n
                identical += same
                shown = prompt if not args.long else \
                    f"{len(prompts[0].split(':')) - 1} paragraphs, {len(ids)} prompt ids"
                line = f"  {args.tokens if same else n:3d}/{args.tokens} {shown!r}" + (
                    f" (both ended after {n})" if same and n < args.tokens else "")
                if not same:
                    ours_next = ours[n] if n < len(ours) else "end"
                    llama_next = llama[n] if n < len(llama) else "end"
                    line += f"  (first difference: ours {ours_next}, llama.cpp {llama_next}"
                    if args.reference:
                        ref = subprocess.run([args.reference, "--model", model, "--ids",
                                              ",".join(map(str, ids + ours[:n]))],
                                             capture_output=True, text=True, check=True).stdout.split()
                        top1, margin = int(ref[1]), float(ref[7])
                        pick = "end" if top1 in eos else top1
                        who = "ours" if pick == ours_next else "llama.cpp's" if pick == llama_next else "neither"
                        judged[who] = judged.get(who, 0) + 1
                        line += f"; float64 reference picks {who}, top-2 margin {margin:.4f}"
                    line += ")"
                if args.judge:
                    verdicts = judge(args.judge, model, ids, [ours, llama], ended, args.tokens, eos, args.threads)
                    parts = []
                    for who, (k, margin) in zip(("ours", "llama.cpp"), verdicts):
                        vs_ref[who] += k
                        parts.append(f"{who} {k}" + (f" (margin {margin:.4f})" if margin is not None else ""))
                    line += "  [vs the reference's greedy ids: " + ", ".join(parts) + "]"
                print(line, flush=True)
            print(f"  sum {total}/{len(prompts) * args.tokens} tokens before the first divergence; "
                  f"{identical}/{len(prompts)} prompts identical" +
                  (f"; at the divergences the reference picks: {judged}" if judged else ""))
            if args.judge:
                print(f"  vs the float64 reference's greedy ids, tokens before the first divergence: "
                      f"ours {vs_ref['ours']}, llama.cpp {vs_ref['llama.cpp']} of {len(prompts) * args.tokens}")
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main()

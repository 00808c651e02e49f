#!/usr/bin/env python3
"""Greedy ids of tpserve-run beside llama.cpp's llama-server on the same GGUF and the same prompt ids.

Each prompt is tokenized once by llama-server (POST /tokenize, BOS and special tokens as the model wants),
then both engines continue those ids greedily (llama-server POST /completion, temperature 0, top_k 1;
tpserve-run --prompt-ids --print-ids --ignore-eos). Prints, per prompt, how many tokens agree before the
first divergence, and the total. A long prompt (--long N paragraphs) checks sliding-window models past
their window.

Usage: bench/greedy_vs_llama.py --model M.gguf [--tpserve-run build/worker/tpserve-run]
           [--llama-server third_party/llama.cpp/build/bin/llama-server] [--tokens 32] [--tp 1] [--long N]
Measured (Gemma 3 270M Q4_K_M dequantised to F32 with the `gguf` package, 10 prompts x 32 tokens and one
753-token prompt past its 512-key window): every token equal.
"""
import argparse
import json
import subprocess
import time
import urllib.request

PROMPTS = ["The capital of France is", "def fibonacci(n):", "Once upon a time, in a small village,",
           "The three primary colors are", "Water boils at", "In 1969, Neil Armstrong", "The quick brown fox",
           "Photosynthesis is the process by which", "1, 2, 3, 4, 5,",
           "<start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n<start_of_turn>model\n"]


def post(url, path, body):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--tpserve-run", default="build/worker/tpserve-run")
    ap.add_argument("--llama-server", default="third_party/llama.cpp/build/bin/llama-server")
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--port", type=int, default=18093)
    ap.add_argument("--long", type=int, default=0, help="one prompt of this many paragraphs instead")
    args = ap.parse_args()
    prompts = PROMPTS
    if args.long:
        prompts = [" ".join("Paragraph %d: the river flows past the old mill and the children count the boats." % i
                            for i in range(args.long)) + " The river"]
    url = "http://127.0.0.1:%d" % args.port
    server = subprocess.Popen([args.llama_server, "-m", args.model, "--host", "127.0.0.1", "--port", str(args.port),
                               "-t", "2", "-c", "4096", "--no-warmup"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        for _ in range(120):
            try:
                if json.load(urllib.request.urlopen(url + "/health")).get("status") == "ok":
                    break
            except OSError:
                pass
            time.sleep(1)
        total = 0
        for prompt in prompts:
            ids = post(url, "/tokenize", {"content": prompt, "add_special": True, "parse_special": True})["tokens"]
            ref = post(url, "/completion", {"prompt": ids, "n_predict": args.tokens, "temperature": 0, "top_k": 1,
                                            "return_tokens": True, "cache_prompt": False})["tokens"]
            out = subprocess.run([args.tpserve_run, "--model", args.model, "--prompt-ids", ",".join(map(str, ids)),
                                  "--max-tokens", str(args.tokens), "--print-ids", "--ignore-eos", "--tp", str(args.tp)],
                                 capture_output=True, text=True, check=True)
            ours = [int(x) for x in out.stdout.split()]
            agree = next((i for i, (a, b) in enumerate(zip(ours, ref)) if a != b), min(len(ours), len(ref)))
            total += agree
            tail = "" if agree == len(ref) else "  (then ours %s, llama.cpp %s)" % (ours[agree:agree + 3],
                                                                                 ref[agree:agree + 3])
            print("%4d prompt tokens: %d of %d equal%s" % (len(ids), agree, len(ref), tail))
        print("total tokens before the first divergence: %d of %d" % (total, len(prompts) * args.tokens))
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()

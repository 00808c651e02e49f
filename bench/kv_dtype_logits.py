#!/usr/bin/env python3
"""Teacher-forced logits of each KV cache type beside the float64 reference, on a real model file.

The 10 prompts of bench/greedy_vs_llama.py, tokenized by a `tpserve serve` and each followed by its 16 greedy
tokens (f32 KV), are teacher-forced through tpserve-teacher-logits: the float64 reference once
(tests/testing/reference_llama, no KV cache), the engine once per --kv-dtype (2 threads). Prints per type the
mean and max |logit difference| to the reference over every position and vocabulary entry, and at how many
positions the engine's argmax is the reference's.
  bench/kv_dtype_logits.py [MODEL]   (default models/SmolLM2-135M-Instruct.Q4_1.gguf)
Raw: bench/results/kv_dtypes/logits/ (the ids; the table on stdout).
"""
import subprocess
import sys

import numpy as np

sys.path.insert(0, 'bench')
from greedy_vs_llama import PROMPTS  # noqa: E402
import served  # noqa: E402
import tpserve  # noqa: E402

model = sys.argv[1] if len(sys.argv) > 1 else 'models/SmolLM2-135M-Instruct.Q4_1.gguf'
out = 'bench/results/kv_dtypes/logits'
seqs = []
with served.serve(model=model) as s:
    with tpserve.Client(s.endpoint, timeout=120) as c:
        for p in PROMPTS:
            ids = list(c.tokenize(p).token_ids)
            r = c.generate(token_ids=ids, max_tokens=16, ignore_eos=True)
            seqs.append(ids + list(r.token_ids))
open(f'{out}/ids.txt', 'w').write('\n'.join(','.join(map(str, q)) for q in seqs) + '\n')
bin_ = 'build/tests/testing/tpserve-teacher-logits'
subprocess.run([bin_, '--model', model, '--ids-file', f'{out}/ids.txt', '--prefill', '1', '--reference', '/tmp/ref.f64'], check=True)
num_rows = sum(len(q) for q in seqs)  # positions 0..T-1 of each (prefill of 1)
ref = np.fromfile('/tmp/ref.f64', dtype='<f8')
V = ref.size // num_rows
ref = ref.reshape(-1, V)
print('| KV type | mean abs diff | max abs diff | argmax = reference |')
print('|---|---|---|---|')
for t in ['f32', 'f16', 'bf16', 'q8_0']:
    subprocess.run([bin_, '--model', model, '--ids-file', f'{out}/ids.txt', '--prefill', '1', '--threads', '2',
                    '--kv-dtype', t, '--engine', f'/tmp/eng_{t}.f32'], check=True, capture_output=True)
    eng = np.fromfile(f'/tmp/eng_{t}.f32', dtype='<f4').reshape(-1, V).astype(np.float64)
    d = np.abs(eng - ref)
    agree = int((eng.argmax(1) == ref.argmax(1)).sum())
    print(f'| {t} | {d.mean():.4f} | {d.max():.3f} | {agree} / {len(ref)} |')
print('positions', len(ref), 'max |reference logit|', f'{np.abs(ref).max():.1f}')

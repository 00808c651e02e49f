// The tokenizers on arbitrary bytes: SmolLM2's byte-level BPE (from the model file when it is
// there, else the tiny HF BPE vocabulary in tests/data) and the tiny SentencePiece-style vocabulary.
// Byte-level BPE must round-trip every well-formed UTF-8 string exactly when special tokens are
// not parsed (Decode replaces ill-formed UTF-8 with U+FFFD, as documented) and every byte has a
// piece (SmolLM2 lacks 21 byte pieces; those bytes are dropped, as llama.cpp and HF tokenizers do).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "common/utf8.h"
#include "model/gguf_file.h"
#include "model/tokenizer.h"

using namespace tpserve;

namespace {

std::filesystem::path RepoRoot() {
  if (const char* root = std::getenv("TPSERVE_SOURCE_DIR"); root != nullptr && *root) return root;
  return TPSERVE_SOURCE_DIR;  // compiled in by tests/fuzz/CMakeLists.txt
}

std::unique_ptr<Tokenizer> Load(StatusOr<std::unique_ptr<Tokenizer>> t) {
  if (!t.ok()) {
    std::fprintf(stderr, "tokenizer_fuzz: %s\n", t.status().ToString().c_str());
    std::abort();
  }
  return std::move(*t);
}

std::unique_ptr<Tokenizer> ByteLevelBpe() {
  const std::filesystem::path model = RepoRoot() / "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  std::error_code ec;
  if (std::filesystem::exists(model, ec)) {
    auto file = GgufFile::Open(model.string());
    if (file.ok()) return Load(Tokenizer::FromGguf(**file));
  }
  return Load(Tokenizer::FromHfDir((RepoRoot() / "tests/data/tokenizer_golden_hf_tiny").string()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::unique_ptr<Tokenizer> bpe = ByteLevelBpe();
  static const std::unique_ptr<Tokenizer> spm =
      Load(Tokenizer::FromHfDir((RepoRoot() / "tests/data/tokenizer_golden_hf_spm_tiny").string()));
  static const std::vector<bool> has_piece = [] {
    std::vector<bool> out(256);
    for (int b = 0; b < 256; ++b) out[b] = !bpe->Encode(std::string(1, static_cast<char>(b)), false, false).empty();
    return out;
  }();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::vector<int32_t> ids = bpe->Encode(text, /*add_bos=*/false, /*parse_special=*/false);
  bool every_byte_has_a_piece = true;
  for (unsigned char c : text) every_byte_has_a_piece = every_byte_has_a_piece && has_piece[c];
  if (every_byte_has_a_piece && IsValidUtf8(text) && bpe->Decode(ids) != text) std::abort();
  (void)bpe->Decode(bpe->Encode(text, /*add_bos=*/true, /*parse_special=*/true));
  (void)spm->Decode(spm->Encode(text, /*add_bos=*/true, /*parse_special=*/true));
  // Arbitrary ids (4 bytes each, any value): out-of-range ids are skipped, never read out of bounds.
  std::vector<int32_t> raw(size / 4);
  for (size_t i = 0; i < raw.size(); ++i) std::memcpy(&raw[i], data + 4 * i, 4);
  (void)bpe->Decode(raw);
  (void)spm->Decode(raw);
  return 0;
}

// Shared by the tokenizer tests: the SmolLM2 tokenizer (opened once) and the golden files written by
// scripts/gen_tokenizer_golden.py.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "model/gguf_file.h"
#include "model/tokenizer.h"

namespace tpserve::testing_tokenizer {

inline constexpr const char* kSmolLmPath = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
inline constexpr const char* kGemma3Path = "models/gemma-3-270m-q4_k_m.gguf";
inline constexpr const char* kGoldenPath = "tests/data/tokenizer_golden.txt";
inline constexpr const char* kChatGoldenPath = "tests/data/tokenizer_golden_chat.txt";
inline constexpr const char* kHfTinyDir = "tests/data/tokenizer_golden_hf_tiny";
inline constexpr const char* kHfSpmTinyDir = "tests/data/tokenizer_golden_hf_spm_tiny";
inline constexpr const char* kHfGemmaTinyDir = "tests/data/tokenizer_golden_hf_gemma_tiny";

// SmolLM2's tokenizer, or nullptr when the model file has not been fetched (scripts/fetch-model.sh).
inline const Tokenizer* SmolLm() {
  static const std::unique_ptr<Tokenizer> tokenizer = []() -> std::unique_ptr<Tokenizer> {
    auto file = GgufFile::Open(kSmolLmPath);
    if (!file.ok()) return nullptr;
    auto tok = Tokenizer::FromGguf(**file);
    EXPECT_TRUE(tok.ok()) << tok.status().ToString();
    return tok.ok() ? std::move(tok).value() : nullptr;
  }();
  return tokenizer.get();
}

#define REQUIRE_SMOLLM(tok)                                                                  \
  const ::tpserve::Tokenizer* tok = ::tpserve::testing_tokenizer::SmolLm();                  \
  if (tok == nullptr) GTEST_SKIP() << "no " << ::tpserve::testing_tokenizer::kSmolLmPath \
                                   << " (run scripts/fetch-model.sh)"

inline std::string FromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

struct GoldenCase {
  std::string variant;
  std::string text;
  std::vector<int32_t> ids;
  std::string decoded;  // HF decode(ids, skip_special_tokens=False)
};

// Lines "variant<TAB>hex(text)<TAB>ids<TAB>hex(decoded)"; '#' lines are comments.
inline std::vector<GoldenCase> ReadGolden() {
  std::vector<GoldenCase> cases;
  std::ifstream in(kGoldenPath);
  EXPECT_TRUE(in.good()) << "cannot open " << kGoldenPath;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t t1 = line.find('\t'), t2 = line.find('\t', t1 + 1), t3 = line.find('\t', t2 + 1);
    EXPECT_NE(t3, std::string::npos) << line;
    if (t3 == std::string::npos) continue;
    GoldenCase c;
    c.variant = line.substr(0, t1);
    c.text = FromHex(line.substr(t1 + 1, t2 - t1 - 1));
    c.decoded = FromHex(line.substr(t3 + 1));
    std::istringstream ids(line.substr(t2 + 1, t3 - t2 - 1));
    for (int32_t id; ids >> id;) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  return cases;
}

// The distinct texts of the golden corpus (those of one variant).
inline std::vector<std::string> Corpus() {
  std::vector<std::string> texts;
  for (const GoldenCase& c : ReadGolden()) {
    if (c.variant == "smollm") texts.push_back(c.text);
  }
  return texts;
}

}  // namespace tpserve::testing_tokenizer

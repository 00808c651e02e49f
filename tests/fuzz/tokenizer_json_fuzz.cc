// An HF tokenizer.json of arbitrary bytes: the vocabulary, merges, pre-tokenizer and added tokens
// are validated when the tokenizer is built; one that builds must encode and decode text.
#include <cstdint>
#include <string_view>

#include "model/tokenizer.h"
#include "tests/fuzz/fuzz_input.h"

using namespace tpserve;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::WriteScratchFile("tokenizer.json", std::string_view(reinterpret_cast<const char*>(data), size));
  auto tokenizer = Tokenizer::FromHfDir(fuzz::ScratchDir());
  if (tokenizer.ok()) (void)(*tokenizer)->Decode((*tokenizer)->Encode("Hello, world! 123 caf\xc3\xa9", true));
  return 0;
}

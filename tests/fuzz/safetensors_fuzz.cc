// A Hugging Face directory whose model.safetensors is arbitrary bytes (config.json fixed and valid):
// the header length, JSON header, dtypes, shapes and offsets are validated on Open; whatever opens
// must also read the first row of every tensor (or refuse with a Status).
#include <cstdint>
#include <string_view>

#include "model/safetensors_dir.h"
#include "tests/fuzz/fuzz_input.h"

using namespace tpserve;

namespace {
// A tiny valid Llama config: the directory fails on the weights, not on the config.
constexpr std::string_view kConfig = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64,
  "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 1,
  "rms_norm_eps": 1e-5, "vocab_size": 32, "max_position_embeddings": 128, "tie_word_embeddings": true})";
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool written = !fuzz::WriteScratchFile("config.json", kConfig).empty();
  (void)written;
  fuzz::WriteScratchFile("model.safetensors", std::string_view(reinterpret_cast<const char*>(data), size));
  auto dir = SafetensorsDir::Open(fuzz::ScratchDir());
  if (!dir.ok()) return 0;
  for (const std::string& name : (*dir)->Names()) {
    const TensorInfo* info = (*dir)->Find(name);
    if (info != nullptr) (void)(*dir)->ReadSlice(name, 0, 1, 0, info->cols());
  }
  return 0;
}

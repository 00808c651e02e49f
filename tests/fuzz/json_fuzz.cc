// The JSON reader (config.json, tokenizer.json, safetensors headers) on arbitrary text, within its
// depth and size limits; a parsed document is also read as an HF config (typed errors, no crash).
#include <cstdint>
#include <string_view>

#include "common/json.h"
#include "model/safetensors_dir.h"

using namespace tpserve;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto json = ParseJson(std::string_view(reinterpret_cast<const char*>(data), size));
  if (json.ok()) (void)ModelConfigFromHfConfig(*json, "fuzz/config.json");
  return 0;
}

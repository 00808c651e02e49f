// A GGUF file of arbitrary bytes: the header, metadata and tensor table are validated on Open;
// whatever opens must also yield (or refuse with a Status) its model config, its tokenizer and the
// first row of every tensor.
#include <cstdint>
#include <string_view>

#include "model/gguf_file.h"
#include "model/model_config.h"
#include "model/tokenizer.h"
#include "tests/fuzz/fuzz_input.h"

using namespace tpserve;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path =
      fuzz::WriteScratchFile("model.gguf", std::string_view(reinterpret_cast<const char*>(data), size));
  auto file = GgufFile::Open(path);
  if (!file.ok()) return 0;
  (void)ModelConfigFromGguf(**file);
  if (auto tokenizer = Tokenizer::FromGguf(**file); tokenizer.ok()) {
    (void)(*tokenizer)->Decode((*tokenizer)->Encode("Hello, world", /*add_bos=*/true));
  }
  for (const std::string& name : (*file)->Names()) {
    const TensorInfo* info = (*file)->Find(name);
    if (info != nullptr) (void)(*file)->ReadSlice(name, 0, 1, 0, info->cols());
  }
  return 0;
}

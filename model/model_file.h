// ModelFile: a model checkpoint opened from a path, whatever its format. A directory is a Hugging
// Face safetensors checkpoint (SafetensorsDir), a file is GGUF (GgufFile). Opening parses the
// config and checks that every tensor the model's architecture needs is present with the shape and a type the
// config implies, so a bad checkpoint fails here with a clear error rather than mid-load.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "model/gguf_file.h"
#include "model/model_config.h"
#include "model/weight_source.h"

namespace tpserve {

class ModelFile {
 public:
  // Errors: NOT_FOUND (no such path), DATA_LOSS (corrupt file, or a tensor missing or of the
  // wrong shape, naming it), UNIMPLEMENTED (an architecture or feature tpserve does not run).
  // `loading`: weights as views of the mapped file (--mmap), read into 2 MiB pages (--no-mmap), or by default
  // mapped where the page cache gives 2 MiB pages and read otherwise (model/tensor_file.h).
  static StatusOr<std::unique_ptr<ModelFile>> Open(const std::string& path,
                                                   WeightLoading loading = WeightLoading::kAuto);

  const std::string& path() const { return path_; }
  const ModelConfig& config() const { return config_; }
  const WeightSource& weights() const { return *weights_; }
  const GgufFile* gguf() const { return gguf_; }          // null for HF directories
  const std::string& hf_dir() const { return hf_dir_; }  // empty for GGUF

 private:
  ModelFile() = default;

  std::string path_;
  ModelConfig config_;
  std::unique_ptr<WeightSource> weights_;
  const GgufFile* gguf_ = nullptr;  // == weights_ when GGUF
  std::string hf_dir_;
};

// DATA_LOSS naming `source` and the first tensor of `config` (ModelTensors) that `weights` lacks or
// holds with an unexpected shape (rows = out features, cols = in features; norms and biases 1-D) or
// type (norms and biases must be float types).
Status CheckModelTensors(const ModelConfig& config, const WeightSource& weights, const std::string& source);

}  // namespace tpserve

#include "model/model_file.h"

#include <sys/stat.h>

#include <vector>

#include "model/model_tensors.h"
#include "model/safetensors_dir.h"

namespace tpserve {

Status CheckModelTensors(const ModelConfig& c, const WeightSource& w, const std::string& source) {
  const std::vector<ModelTensor> expect = ModelTensors(c);
  auto shape_str = [](const std::vector<int64_t>& s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
  };
  for (const ModelTensor& e : expect) {
    const TensorInfo* info = w.Find(e.name);
    if (info == nullptr) return DataLoss(source + ": missing tensor " + e.name);
    if (info->shape != e.shape) {
      return DataLoss(source + ": tensor " + e.name + " has shape " + shape_str(info->shape) + ", the config implies " +
                      shape_str(e.shape));
    }
    if (e.is_vector() && IsQuantized(info->type)) {
      return DataLoss(source + ": vector " + e.name + " is quantised (" + DTypeName(info->type) + ")");
    }
  }
  return OkStatus();
}

StatusOr<std::unique_ptr<ModelFile>> ModelFile::Open(const std::string& path, WeightLoading loading) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return NotFound("no such model file or directory: " + path);
  std::unique_ptr<ModelFile> m(new ModelFile());
  m->path_ = path;
  if (S_ISDIR(st.st_mode)) {
    ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsDir> dir, SafetensorsDir::Open(path, loading));
    m->config_ = dir->config();
    m->hf_dir_ = path;
    m->weights_ = std::move(dir);
  } else {
    ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(path, loading));
    ASSIGN_OR_RETURN(m->config_, ModelConfigFromGguf(*file));
    m->gguf_ = file.get();
    m->weights_ = std::move(file);
  }
  RETURN_IF_ERROR(CheckModelTensors(m->config_, *m->weights_, path));
  return m;
}

}  // namespace tpserve

#include "model/model_file.h"

#include <sys/stat.h>

#include <vector>

#include "model/safetensors_dir.h"

namespace tpserve {

Status CheckLlamaTensors(const ModelConfig& c, const WeightSource& w, const std::string& source) {
  struct Expect {
    std::string name;
    std::vector<int64_t> shape;
  };
  const int64_t h = c.hidden_size, q = int64_t{c.num_heads} * c.head_dim, kv = int64_t{c.num_kv_heads} * c.head_dim;
  std::vector<Expect> expect = {{"token_embd.weight", {c.vocab_size, h}}, {"output_norm.weight", {h}}};
  if (!c.tied_embeddings) expect.push_back({"output.weight", {c.vocab_size, h}});
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    expect.push_back({p + "attn_norm.weight", {h}});
    expect.push_back({p + "attn_q.weight", {q, h}});
    expect.push_back({p + "attn_k.weight", {kv, h}});
    expect.push_back({p + "attn_v.weight", {kv, h}});
    expect.push_back({p + "attn_output.weight", {h, q}});
    expect.push_back({p + "ffn_norm.weight", {h}});
    expect.push_back({p + "ffn_gate.weight", {c.ffn_size, h}});
    expect.push_back({p + "ffn_up.weight", {c.ffn_size, h}});
    expect.push_back({p + "ffn_down.weight", {h, c.ffn_size}});
  }
  auto shape_str = [](const std::vector<int64_t>& s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
  };
  for (const Expect& e : expect) {
    const TensorInfo* info = w.Find(e.name);
    if (info == nullptr) return DataLoss(source + ": missing tensor " + e.name);
    if (info->shape != e.shape) {
      return DataLoss(source + ": tensor " + e.name + " has shape " + shape_str(info->shape) + ", the config implies " +
                      shape_str(e.shape));
    }
    if (e.shape.size() == 1 && IsQuantized(info->type)) {
      return DataLoss(source + ": norm " + e.name + " is quantised (" + DTypeName(info->type) + ")");
    }
  }
  return OkStatus();
}

StatusOr<std::unique_ptr<ModelFile>> ModelFile::Open(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return NotFound("no such model file or directory: " + path);
  std::unique_ptr<ModelFile> m(new ModelFile());
  m->path_ = path;
  if (S_ISDIR(st.st_mode)) {
    ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsDir> dir, SafetensorsDir::Open(path));
    m->config_ = dir->config();
    m->hf_dir_ = path;
    m->weights_ = std::move(dir);
  } else {
    ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(path));
    ASSIGN_OR_RETURN(m->config_, ModelConfigFromGguf(*file));
    m->gguf_ = file.get();
    m->weights_ = std::move(file);
  }
  RETURN_IF_ERROR(CheckLlamaTensors(m->config_, *m->weights_, path));
  return m;
}

}  // namespace tpserve

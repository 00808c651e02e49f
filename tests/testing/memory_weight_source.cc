#include "tests/testing/memory_weight_source.h"

#include <cmath>
#include <cstring>
#include <random>

namespace tpserve::testing {

void MemoryWeightSource::Add(const std::string& name, DType type, std::vector<int64_t> shape,
                             const std::vector<float>& values) {
  Entry entry;
  entry.info.name = name;
  entry.info.type = type;
  entry.info.shape = shape;
  const int64_t rows = entry.info.rows();
  const int64_t cols = entry.info.cols();
  CHECK_EQ(static_cast<int64_t>(values.size()), rows * cols) << name;
  entry.data = HostTensor::Allocate(type, rows, cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* src = values.data() + r * cols;
    QuantizeRow(type, src, entry.data.data.get() + r * entry.data.row_bytes(), cols);  // float types converted too
  }
  entry.info.nbytes = static_cast<uint64_t>(entry.data.nbytes());
  tensors_[name] = std::move(entry);
}

const TensorInfo* MemoryWeightSource::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second.info;
}

std::vector<std::string> MemoryWeightSource::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, entry] : tensors_) names.push_back(name);
  return names;
}

StatusOr<HostTensor> MemoryWeightSource::ReadSlice(const std::string& name, int64_t row_begin, int64_t row_end,
                                                   int64_t col_begin, int64_t col_end) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return NotFound("no tensor " + name);
  const Entry& entry = it->second;
  const int64_t block = DTypeBlockElems(entry.info.type);
  if (row_begin < 0 || row_begin > row_end || row_end > entry.info.rows() || col_begin < 0 || col_begin > col_end ||
      col_end > entry.info.cols() || col_begin % block != 0 || (col_end % block != 0 && col_end != entry.info.cols())) {
    return InvalidArgument("bad slice of " + name);
  }
  HostTensor out = HostTensor::Allocate(entry.info.type, row_end - row_begin, col_end - col_begin);
  const int64_t col_offset = DTypeRowBytes(entry.info.type, col_begin);
  for (int64_t r = row_begin; r < row_end; ++r) {
    std::memcpy(out.data.get() + (r - row_begin) * out.row_bytes(),
                static_cast<const uint8_t*>(entry.data.row(r)) + col_offset, out.row_bytes());
  }
  bytes_read_ += out.nbytes();
  return out;
}

int64_t MemoryWeightSource::total_bytes() const {
  int64_t bytes = 0;
  for (const auto& [name, entry] : tensors_) bytes += entry.data.nbytes();
  return bytes;
}

MemoryWeightSource MemoryWeightSource::Dequantized() const {
  MemoryWeightSource out;
  for (const auto& [name, entry] : tensors_) out.Add(name, DType::kF32, entry.info.shape, entry.data.ToF32());
  return out;
}

RandomLlama MakeRandomLlama(const RandomLlamaShape& shape) {
  RandomLlama model;
  ModelConfig& c = model.config;
  c.architecture = "llama";
  c.name = "random";
  c.num_layers = shape.num_layers;
  c.hidden_size = shape.hidden_size;
  c.ffn_size = shape.ffn_size;
  c.num_heads = shape.num_heads;
  c.num_kv_heads = shape.num_kv_heads;
  c.head_dim = shape.head_dim;
  c.vocab_size = shape.vocab_size;
  c.context_length = 512;
  c.rope_theta = 10000.0f;
  c.rope_layout = shape.rope_layout;
  c.rms_eps = 1e-5f;
  c.tied_embeddings = shape.tied_embeddings;
  c.bos_id = 1;
  c.eos_id = 2;

  std::mt19937_64 rng(shape.seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  auto matrix = [&](int64_t rows, int64_t cols, float scale) {
    std::vector<float> v(rows * cols);
    for (float& x : v) x = uniform(rng) * scale;
    return v;
  };
  auto norm = [&](int64_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = 1.0f + 0.2f * uniform(rng);
    return v;
  };
  const int64_t h = shape.hidden_size;
  const int64_t q_rows = int64_t{shape.num_heads} * shape.head_dim;
  const int64_t kv_rows = int64_t{shape.num_kv_heads} * shape.head_dim;
  const float in_scale = 1.0f / std::sqrt(static_cast<float>(h));
  MemoryWeightSource& w = model.weights;
  w.Add("token_embd.weight", shape.embd_type, {shape.vocab_size, h}, matrix(shape.vocab_size, h, 1.0f));
  for (int l = 0; l < shape.num_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    w.Add(p + "attn_norm.weight", DType::kF32, {h}, norm(h));
    w.Add(p + "attn_q.weight", shape.type, {q_rows, h}, matrix(q_rows, h, in_scale));
    w.Add(p + "attn_k.weight", shape.type, {kv_rows, h}, matrix(kv_rows, h, in_scale));
    w.Add(p + "attn_v.weight", shape.type, {kv_rows, h}, matrix(kv_rows, h, in_scale));
    w.Add(p + "attn_output.weight", shape.type, {h, q_rows}, matrix(h, q_rows, 1.0f / std::sqrt(float(q_rows))));
    w.Add(p + "ffn_norm.weight", DType::kF32, {h}, norm(h));
    w.Add(p + "ffn_gate.weight", shape.type, {shape.ffn_size, h}, matrix(shape.ffn_size, h, in_scale));
    w.Add(p + "ffn_up.weight", shape.type, {shape.ffn_size, h}, matrix(shape.ffn_size, h, in_scale));
    w.Add(p + "ffn_down.weight", shape.type, {h, shape.ffn_size},
          matrix(h, shape.ffn_size, 1.0f / std::sqrt(float(shape.ffn_size))));
  }
  w.Add("output_norm.weight", DType::kF32, {h}, norm(h));
  if (!shape.tied_embeddings) w.Add("output.weight", shape.type, {shape.vocab_size, h}, matrix(shape.vocab_size, h, in_scale));
  return model;
}

}  // namespace tpserve::testing

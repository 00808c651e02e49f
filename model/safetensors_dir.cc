#include "model/safetensors_dir.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>

namespace tpserve {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100 << 20;  // the safetensors reference implementation's limit

Status ConfigError(const std::string& source, const std::string& what) { return DataLoss(source + ": " + what); }

// Reads an optional integer field; `*out` is left alone when the field is absent or null.
Status OptInt(const JsonValue& j, const std::string& source, const char* key, int* out) {
  const JsonValue* v = j.Find(key);
  if (v == nullptr || v->is_null()) return OkStatus();
  if (!v->is_integer() || v->int_value() < INT32_MIN || v->int_value() > INT32_MAX) {
    return ConfigError(source, std::string(key) + " is not an integer");
  }
  *out = static_cast<int>(v->int_value());
  return OkStatus();
}

Status ReqInt(const JsonValue& j, const std::string& source, const char* key, int* out) {
  const JsonValue* v = j.Find(key);
  if (v == nullptr || v->is_null()) return ConfigError(source, std::string("missing ") + key);
  return OptInt(j, source, key, out);
}

Status OptFloat(const JsonValue& j, const std::string& source, const char* key, float* out) {
  const JsonValue* v = j.Find(key);
  if (v == nullptr || v->is_null()) return OkStatus();
  if (!v->is_number()) return ConfigError(source, std::string(key) + " is not a number");
  *out = static_cast<float>(v->number());
  return OkStatus();
}

// bos/eos ids may be an integer or a list of them (the first is taken).
Status OptTokenId(const JsonValue& j, const std::string& source, const char* key, int* out) {
  const JsonValue* v = j.Find(key);
  if (v == nullptr || v->is_null()) return OkStatus();
  if (v->is_array()) {
    if (v->size() == 0) return OkStatus();
    v = &(*v)[0];
  }
  if (!v->is_integer()) return ConfigError(source, std::string(key) + " is not a token id");
  *out = static_cast<int>(v->int_value());
  return OkStatus();
}

bool ParseDTypeName(const std::string& s, DType* out) {
  if (s == "F32") *out = DType::kF32;
  else if (s == "F16") *out = DType::kF16;
  else if (s == "BF16") *out = DType::kBF16;
  else return false;
  return true;
}

}  // namespace

StatusOr<ModelConfig> ModelConfigFromHfConfig(const JsonValue& j, const std::string& source) {
  if (!j.is_object()) return ConfigError(source, "not a JSON object");
  std::string model_type;
  if (const JsonValue* t = j.Find("model_type"); t != nullptr && t->is_string()) model_type = t->string_value();
  if (model_type.empty()) {
    const JsonValue* archs = j.Find("architectures");
    if (archs != nullptr && archs->is_array() && archs->size() > 0 && (*archs)[0].is_string()) {
      const std::string& a = (*archs)[0].string_value();
      if (a == "LlamaForCausalLM") model_type = "llama";
      if (a == "MistralForCausalLM") model_type = "mistral";
      if (a == "Qwen2ForCausalLM") model_type = "qwen2";
      if (a == "Qwen3ForCausalLM") model_type = "qwen3";
    }
  }
  if (model_type != "llama" && model_type != "mistral" && model_type != "qwen2" && model_type != "qwen3") {
    return Unimplemented(source + ": model_type \"" + model_type + "\" is not supported (llama, mistral, qwen2, qwen3)");
  }
  // Qwen 2's Q/K/V biases are its architecture's own (attention_bias is not in its config).
  for (const char* bias : {"attention_bias", "mlp_bias"}) {
    const JsonValue* b = j.Find(bias);
    if (b != nullptr && b->is_bool() && b->bool_value()) return Unimplemented(source + ": " + bias + " is not supported");
  }
  if (const JsonValue* w = j.Find("use_sliding_window"); w != nullptr && w->is_bool() && w->bool_value()) {
    return Unimplemented(source + ": use_sliding_window (Qwen's per-layer windows) is not supported");
  }
  if (const JsonValue* act = j.Find("hidden_act"); act != nullptr && act->is_string() && act->string_value() != "silu") {
    return Unimplemented(source + ": hidden_act \"" + act->string_value() + "\" is not supported (silu)");
  }

  ModelConfig c;
  c.architecture = model_type == "mistral" ? "llama" : model_type;
  c.rope_layout = RopeLayout::kHalf;
  c.rms_eps = 1e-6f;          // LlamaConfig's defaults
  c.context_length = 2048;
  RETURN_IF_ERROR(ReqInt(j, source, "num_hidden_layers", &c.num_layers));
  RETURN_IF_ERROR(ReqInt(j, source, "hidden_size", &c.hidden_size));
  RETURN_IF_ERROR(ReqInt(j, source, "intermediate_size", &c.ffn_size));
  RETURN_IF_ERROR(ReqInt(j, source, "num_attention_heads", &c.num_heads));
  RETURN_IF_ERROR(ReqInt(j, source, "vocab_size", &c.vocab_size));
  c.num_kv_heads = c.num_heads;
  RETURN_IF_ERROR(OptInt(j, source, "num_key_value_heads", &c.num_kv_heads));
  if (c.num_heads <= 0) return ConfigError(source, "num_attention_heads must be positive");
  c.head_dim = c.hidden_size / c.num_heads;
  RETURN_IF_ERROR(OptInt(j, source, "head_dim", &c.head_dim));
  RETURN_IF_ERROR(OptInt(j, source, "max_position_embeddings", &c.context_length));
  RETURN_IF_ERROR(OptFloat(j, source, "rope_theta", &c.rope_theta));
  RETURN_IF_ERROR(OptFloat(j, source, "rms_norm_eps", &c.rms_eps));
  if (model_type == "mistral") RETURN_IF_ERROR(OptInt(j, source, "sliding_window", &c.sliding_window));
  RETURN_IF_ERROR(OptTokenId(j, source, "bos_token_id", &c.bos_id));
  RETURN_IF_ERROR(OptTokenId(j, source, "eos_token_id", &c.eos_id));
  if (const JsonValue* tie = j.Find("tie_word_embeddings"); tie != nullptr && !tie->is_null()) {
    if (!tie->is_bool()) return ConfigError(source, "tie_word_embeddings is not a bool");
    c.tied_embeddings = tie->bool_value();
  }
  if (const JsonValue* s = j.Find("rope_scaling"); s != nullptr && !s->is_null()) {
    if (!s->is_object()) return ConfigError(source, "rope_scaling is not an object");
    const JsonValue* type = s->Find("rope_type");
    if (type == nullptr) type = s->Find("type");
    const std::string t = type != nullptr && type->is_string() ? type->string_value() : "";
    if (t == "llama3") {
      c.rope_scaling.enabled = true;
      RETURN_IF_ERROR(OptFloat(*s, source, "factor", &c.rope_scaling.factor));
      RETURN_IF_ERROR(OptFloat(*s, source, "low_freq_factor", &c.rope_scaling.low_freq_factor));
      RETURN_IF_ERROR(OptFloat(*s, source, "high_freq_factor", &c.rope_scaling.high_freq_factor));
      RETURN_IF_ERROR(OptInt(*s, source, "original_max_position_embeddings", &c.rope_scaling.original_context_length));
    } else if (t != "default") {
      return Unimplemented(source + ": rope_scaling type \"" + t + "\" is not supported (llama3)");
    }
  }
  Status valid = c.Validate();
  if (!valid.ok()) return ConfigError(source, valid.message());
  return c;
}

StatusOr<ModelConfig> ModelConfigFromHfDir(const std::string& dir) {
  ASSIGN_OR_RETURN(JsonValue config_json, ReadJsonFile(dir + "/config.json"));
  ASSIGN_OR_RETURN(ModelConfig c, ModelConfigFromHfConfig(config_json, dir + "/config.json"));
  const std::string tc_path = dir + "/tokenizer_config.json";
  if (std::ifstream(tc_path).good()) {
    ASSIGN_OR_RETURN(JsonValue tc, ReadJsonFile(tc_path));
    if (const JsonValue* t = tc.Find("chat_template"); t != nullptr && t->is_string()) c.chat_template = t->string_value();
    if (const JsonValue* b = tc.Find("add_bos_token"); b != nullptr && b->is_bool()) c.add_bos = b->bool_value();
  }
  return c;
}

namespace {

// HF name -> GGUF name of the whole-model tensors, and of a layer's (after "model.layers.N." / "blk.N.").
constexpr std::pair<const char*, const char*> kGlobalNames[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
};
constexpr std::pair<const char*, const char*> kLayerNames[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},  // Qwen 2
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},  // Qwen 3
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
};

// The layer number and the rest of "<prefix>N.rest" (N decimal, no leading zero); false if not so.
bool SplitLayerName(const std::string& name, const std::string& prefix, std::string* layer, std::string* rest) {
  if (name.rfind(prefix, 0) != 0) return false;
  const size_t pos = prefix.size();
  size_t end = pos;
  while (end < name.size() && name[end] >= '0' && name[end] <= '9') ++end;
  if (end == pos || end - pos > 6 || end >= name.size() || name[end] != '.') return false;
  *layer = name.substr(pos, end - pos);
  if (layer->size() > 1 && (*layer)[0] == '0') return false;
  *rest = name.substr(end + 1);
  return true;
}

// Maps `name` through the tables, from column `from` to column `to` (0: HF, 1: GGUF).
std::string MapName(const std::string& name, int from, const std::string& from_prefix, const std::string& to_prefix) {
  for (const auto& entry : kGlobalNames) {
    if (name == (from == 0 ? entry.first : entry.second)) return from == 0 ? entry.second : entry.first;
  }
  std::string layer, rest;
  if (!SplitLayerName(name, from_prefix, &layer, &rest)) return "";
  for (const auto& entry : kLayerNames) {
    if (rest == (from == 0 ? entry.first : entry.second)) {
      return to_prefix + layer + "." + (from == 0 ? entry.second : entry.first);
    }
  }
  return "";
}

}  // namespace

std::string HfToGgufName(const std::string& hf) { return MapName(hf, 0, "model.layers.", "blk."); }
std::string GgufToHfName(const std::string& gguf) { return MapName(gguf, 1, "blk.", "model.layers."); }

SafetensorsDir::~SafetensorsDir() = default;

Status SafetensorsDir::AddShard(const std::string& file_name, const std::vector<std::string>* expected) {
  ASSIGN_OR_RETURN(std::unique_ptr<TensorFile> shard, TensorFile::Open(dir_ + "/" + file_name, loading_));
  const std::string& path = shard->path();
  const uint64_t size = shard->size();
  if (size < 8) return DataLoss(path + ": truncated: shorter than the 8-byte header length");
  uint64_t header_len = 0;
  RETURN_IF_ERROR(shard->ReadAt(0, &header_len, 8, "the header length"));
  if (header_len > size - 8 || header_len > kMaxHeaderBytes) {
    return DataLoss(path + ": header length " + std::to_string(header_len) + " exceeds the file (" +
                    std::to_string(size) + " bytes) or the 100 MB limit");
  }
  std::string header_text(header_len, '\0');
  RETURN_IF_ERROR(shard->ReadAt(8, header_text.data(), header_len, "the header"));
  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = size - data_start;
  const size_t shard_index = shards_.size();
  shards_.push_back(std::move(shard));
  StatusOr<JsonValue> header = ParseJson(header_text);
  if (!header.ok()) return DataLoss(path + ": header: " + header.status().message());
  if (!header->is_object()) return DataLoss(path + ": header is not a JSON object");

  std::set<std::string> present;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // of every tensor, for the overlap check
  for (size_t k = 0; k < header->size(); ++k) {
    const std::string& hf_name = header->key(k);
    if (hf_name == "__metadata__") continue;
    const JsonValue& e = (*header)[k];
    const JsonValue* dtype = e.Find("dtype");
    const JsonValue* shape = e.Find("shape");
    const JsonValue* offsets = e.Find("data_offsets");
    if (dtype == nullptr || !dtype->is_string() || shape == nullptr || !shape->is_array() || offsets == nullptr ||
        !offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_integer() || !(*offsets)[1].is_integer()) {
      return DataLoss(path + ": tensor " + hf_name + " needs dtype, shape and two data_offsets");
    }
    const int64_t begin = (*offsets)[0].int_value(), end = (*offsets)[1].int_value();
    if (begin < 0 || end < begin || static_cast<uint64_t>(end) > data_size) {
      return DataLoss(path + ": tensor " + hf_name + " data_offsets [" + std::to_string(begin) + ", " +
                      std::to_string(end) + ") lie outside the " + std::to_string(data_size) + " data bytes");
    }
    ranges.emplace_back(begin, end);
    present.insert(hf_name);
    const std::string name = HfToGgufName(hf_name);
    DType type;
    if (name.empty() || !ParseDTypeName(dtype->string_value(), &type)) continue;  // not a weight we use
    if (shape->size() < 1 || shape->size() > 2) {
      return DataLoss(path + ": tensor " + hf_name + " must have 1 or 2 dimensions");
    }
    TensorInfo info;
    info.name = name;
    info.type = type;
    uint64_t elems = 1;
    for (size_t d = 0; d < shape->size(); ++d) {
      const JsonValue& n = (*shape)[d];
      if (!n.is_integer() || n.int_value() <= 0 ||
          __builtin_mul_overflow(elems, static_cast<uint64_t>(n.int_value()), &elems)) {
        return DataLoss(path + ": tensor " + hf_name + " has an invalid shape");
      }
      info.shape.push_back(n.int_value());
    }
    if (__builtin_mul_overflow(elems, static_cast<uint64_t>(DTypeBlockBytes(type)), &info.nbytes) ||
        info.nbytes != static_cast<uint64_t>(end - begin)) {
      return DataLoss(path + ": tensor " + hf_name + " holds " + std::to_string(end - begin) +
                      " bytes, its shape and dtype need " + std::to_string(info.nbytes));
    }
    info.offset = data_start + static_cast<uint64_t>(begin);
    if (tensor_index_.count(name) != 0) return DataLoss(path + ": tensor " + hf_name + " appears twice");
    tensor_index_[name] = tensors_.size();
    tensors_.push_back(std::move(info));
    tensor_shard_.push_back(shard_index);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t k = 1; k < ranges.size(); ++k) {
    if (ranges[k].first < ranges[k - 1].second) return DataLoss(path + ": tensors overlap");
  }
  if (expected != nullptr) {
    for (const std::string& name : *expected) {
      if (present.count(name) == 0) return DataLoss(path + ": missing tensor " + name + " listed in the index");
    }
  }
  return OkStatus();
}

StatusOr<std::unique_ptr<SafetensorsDir>> SafetensorsDir::Open(const std::string& dir, WeightLoading loading) {
  std::unique_ptr<SafetensorsDir> d(new SafetensorsDir());
  d->dir_ = dir;
  d->loading_ = loading;
  ASSIGN_OR_RETURN(d->config_, ModelConfigFromHfDir(dir));

  const std::string index_path = dir + "/model.safetensors.index.json";
  if (std::ifstream(index_path).good()) {
    ASSIGN_OR_RETURN(JsonValue index, ReadJsonFile(index_path));
    const JsonValue* map = index.Find("weight_map");
    if (map == nullptr || !map->is_object()) return DataLoss(index_path + ": no weight_map object");
    std::map<std::string, std::vector<std::string>> by_file;
    for (size_t k = 0; k < map->size(); ++k) {
      const JsonValue& file = (*map)[k];
      if (!file.is_string()) return DataLoss(index_path + ": weight_map values must be file names");
      const std::string& f = file.string_value();
      if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..") {
        return DataLoss(index_path + ": file name \"" + f + "\" is not inside the directory");
      }
      by_file[f].push_back(map->key(k));
    }
    for (const auto& [file, names] : by_file) RETURN_IF_ERROR(d->AddShard(file, &names));
  } else if (std::ifstream(dir + "/model.safetensors").good()) {
    RETURN_IF_ERROR(d->AddShard("model.safetensors", nullptr));
  } else {
    return NotFound(dir + ": neither model.safetensors nor model.safetensors.index.json");
  }

  // Tied when the config says so (lm_head then ignored) or when there is no lm_head.
  auto out = d->tensor_index_.find("output.weight");
  if (out == d->tensor_index_.end()) {
    d->config_.tied_embeddings = true;
  } else if (d->config_.tied_embeddings) {
    d->tensor_index_.erase(out);
  }
  return d;
}

const TensorInfo* SafetensorsDir::Find(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::vector<std::string> SafetensorsDir::Names() const {
  std::vector<std::string> names;
  for (const TensorInfo& t : tensors_) {
    if (tensor_index_.count(t.name) != 0) names.push_back(t.name);
  }
  return names;
}

StatusOr<HostTensor> SafetensorsDir::ReadSlice(const std::string& name, int64_t row_begin, int64_t row_end,
                                               int64_t col_begin, int64_t col_end) const {
  auto it = tensor_index_.find(name);
  if (it == tensor_index_.end()) return NotFound(dir_ + ": no tensor " + name);
  const TensorInfo& info = tensors_[it->second];
  return shards_[tensor_shard_[it->second]]->ReadSlice(info, row_begin, row_end, col_begin, col_end);
}

}  // namespace tpserve

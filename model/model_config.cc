#include "model/model_config.h"

#include <cmath>

#include "model/gguf_file.h"

namespace tpserve {
namespace {

Status Invalid(const std::string& field, const std::string& why) {
  return InvalidArgument("model config: " + field + " " + why);
}

// Reads an integer key into *out; absent keys leave *out alone unless `required`.
Status ReadInt(const GgufFile& f, const std::string& key, bool required, int* out) {
  const GgufValue* v = f.Get(key);
  if (v == nullptr) {
    return required ? DataLoss(f.path() + ": missing required metadata " + key) : OkStatus();
  }
  StatusOr<int64_t> i = f.GetInt(key);
  if (!i.ok()) return DataLoss(i.status().message());
  if (*i < INT32_MIN || *i > INT32_MAX) return DataLoss(f.path() + ": metadata " + key + " out of range");
  *out = static_cast<int>(*i);
  return OkStatus();
}

Status ReadFloat(const GgufFile& f, const std::string& key, float* out) {
  if (f.Get(key) == nullptr) return OkStatus();
  StatusOr<double> d = f.GetFloat(key);
  if (!d.ok()) return DataLoss(d.status().message());
  *out = static_cast<float>(*d);
  return OkStatus();
}

Status ReadBool(const GgufFile& f, const std::string& key, bool* out) {
  const GgufValue* v = f.Get(key);
  if (v == nullptr) return OkStatus();
  if (v->type != GgufValue::Type::kBool) return DataLoss(f.path() + ": metadata " + key + " is not a bool");
  *out = v->i != 0;
  return OkStatus();
}

Status ReadRopeFreqFactors(const GgufFile& f, ModelConfig* c) {
  const TensorInfo* info = f.Find("rope_freqs.weight");
  if (info == nullptr) return OkStatus();
  if (info->type != DType::kF32 || info->shape.size() != 1 || info->shape[0] * 2 != c->head_dim) {
    return DataLoss(f.path() + ": rope_freqs.weight must be F32 [head_dim / 2]");
  }
  ASSIGN_OR_RETURN(HostTensor t, f.Read("rope_freqs.weight"));
  c->rope_freq_factors = t.ToF32();
  return OkStatus();
}

}  // namespace

Status ModelConfig::Validate() const {
  if (FindArchitecture(architecture) == nullptr) {
    return Invalid("architecture", "\"" + architecture + "\" is not one of " + SupportedArchitectures());
  }
  if (num_layers <= 0) return Invalid("num_layers", "must be positive");
  if (hidden_size <= 0) return Invalid("hidden_size", "must be positive");
  if (ffn_size <= 0) return Invalid("ffn_size", "must be positive");
  if (num_heads <= 0) return Invalid("num_heads", "must be positive");
  if (num_kv_heads <= 0) return Invalid("num_kv_heads", "must be positive");
  if (num_kv_heads > num_heads || num_heads % num_kv_heads != 0) {
    return Invalid("num_kv_heads", std::to_string(num_kv_heads) + " does not divide num_heads " +
                                       std::to_string(num_heads));
  }
  if (head_dim <= 0 || head_dim % 2 != 0) return Invalid("head_dim", "must be positive and even");
  if (vocab_size <= 0) return Invalid("vocab_size", "must be positive");
  if (context_length <= 0) return Invalid("context_length", "must be positive");
  if (!(rope_theta > 0) || !std::isfinite(rope_theta)) return Invalid("rope_theta", "must be positive");
  if (!(rms_eps > 0) || !std::isfinite(rms_eps)) return Invalid("rms_eps", "must be positive");
  if (sliding_window < 0) return Invalid("sliding_window", "must not be negative");
  if (!(rope_theta_local >= 0) || !std::isfinite(rope_theta_local)) {
    return Invalid("rope_theta_local", "must be positive (or 0: rope_theta)");
  }
  if (!(attention_scale >= 0) || !std::isfinite(attention_scale)) {
    return Invalid("attention_scale", "must be positive (or 0: 1 / sqrt(head_dim))");
  }
  if (!(rope_scaling.linear_factor >= 1) || !std::isfinite(rope_scaling.linear_factor)) {
    return Invalid("rope_scaling.linear_factor", "must be >= 1");
  }
  if (rope_scaling.enabled && rope_scaling.linear_factor != 1) {
    return Invalid("rope_scaling", "is either llama3 or linear, not both");
  }
  if (rope_scaling.enabled) {
    if (!(rope_scaling.factor >= 1)) return Invalid("rope_scaling.factor", "must be >= 1");
    if (!(rope_scaling.low_freq_factor > 0) || !(rope_scaling.high_freq_factor > rope_scaling.low_freq_factor)) {
      return Invalid("rope_scaling", "needs 0 < low_freq_factor < high_freq_factor");
    }
    if (rope_scaling.original_context_length <= 0) {
      return Invalid("rope_scaling.original_context_length", "must be positive");
    }
  }
  if (!rope_freq_factors.empty()) {
    if (static_cast<int>(rope_freq_factors.size()) * 2 != head_dim) {
      return Invalid("rope_freq_factors", "must have head_dim / 2 entries");
    }
    for (float f : rope_freq_factors) {
      if (!(f > 0) || !std::isfinite(f)) return Invalid("rope_freq_factors", "must be positive");
    }
  }
  for (auto [name, id] : {std::pair{"bos_id", bos_id}, std::pair{"eos_id", eos_id}, std::pair{"eot_id", eot_id}}) {
    if (id < -1 || id >= vocab_size) return Invalid(name, std::to_string(id) + " outside the vocabulary");
  }
  return OkStatus();
}

const Architecture& ModelConfig::arch() const {
  const Architecture* a = FindArchitecture(architecture);
  CHECK(a != nullptr) << architecture;
  return *a;
}

bool ModelConfig::IsSlidingLayer(int layer) const {
  if (sliding_window <= 0) return false;
  const int period = arch().sliding_window_period;
  return period == 0 || (layer + 1) % period != 0;
}

float ModelConfig::AttentionScale() const {
  return attention_scale > 0 ? attention_scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
}

std::vector<float> ModelConfig::RopeInverseFrequencies(int layer) const {
  CHECK_GT(head_dim, 0);
  const int half = head_dim / 2;
  std::vector<float> inv(half);
  if (arch().sliding_window_period > 0 && IsSlidingLayer(layer)) {
    const double theta = rope_theta_local > 0 ? rope_theta_local : rope_theta;
    for (int i = 0; i < half; ++i) inv[i] = static_cast<float>(std::pow(theta, -2.0 * i / head_dim));
    return inv;
  }
  constexpr double kPi = 3.14159265358979323846;
  const RopeScaling& s = rope_scaling;
  const double low_freq_wavelen = s.original_context_length / static_cast<double>(s.low_freq_factor);
  const double high_freq_wavelen = s.original_context_length / static_cast<double>(s.high_freq_factor);
  for (int i = 0; i < half; ++i) {
    double freq = std::pow(static_cast<double>(rope_theta), -2.0 * i / head_dim);
    if (!rope_freq_factors.empty()) {
      freq /= rope_freq_factors[i];
    } else if (s.enabled) {
      // Llama 3: keep high frequencies, divide low ones by `factor`, blend linearly in between
      // (in the inverse of the wavelength).
      const double wavelen = 2 * kPi / freq;
      if (wavelen > low_freq_wavelen) {
        freq /= s.factor;
      } else if (wavelen >= high_freq_wavelen) {
        const double smooth = (s.original_context_length / wavelen - s.low_freq_factor) /
                              (s.high_freq_factor - s.low_freq_factor);
        freq = (1 - smooth) * freq / s.factor + smooth * freq;
      }
    }
    inv[i] = static_cast<float>(freq / s.linear_factor);
  }
  return inv;
}

StatusOr<ModelConfig> ModelConfigFromGguf(const GgufFile& f) {
  ModelConfig c;
  if (f.Get("general.architecture") == nullptr) return DataLoss(f.path() + ": missing general.architecture");
  StatusOr<std::string> arch = f.GetString("general.architecture");
  if (!arch.ok()) return DataLoss(arch.status().message());
  const Architecture* a = FindArchitecture(*arch);
  if (a == nullptr) {
    return Unimplemented(f.path() + ": architecture \"" + *arch + "\" is not supported; supported: " +
                         SupportedArchitectures());
  }
  c.architecture = *arch;
  if (f.Get("general.name") != nullptr) {
    StatusOr<std::string> name = f.GetString("general.name");
    if (name.ok()) c.name = *name;
  }
  const std::string p = c.architecture + ".";
  RETURN_IF_ERROR(ReadInt(f, p + "block_count", true, &c.num_layers));
  RETURN_IF_ERROR(ReadInt(f, p + "embedding_length", true, &c.hidden_size));
  RETURN_IF_ERROR(ReadInt(f, p + "feed_forward_length", true, &c.ffn_size));
  RETURN_IF_ERROR(ReadInt(f, p + "attention.head_count", true, &c.num_heads));
  c.num_kv_heads = c.num_heads;
  RETURN_IF_ERROR(ReadInt(f, p + "attention.head_count_kv", false, &c.num_kv_heads));
  RETURN_IF_ERROR(ReadInt(f, p + "context_length", true, &c.context_length));
  RETURN_IF_ERROR(ReadFloat(f, p + "rope.freq_base", &c.rope_theta));
  RETURN_IF_ERROR(ReadFloat(f, p + "attention.layer_norm_rms_epsilon", &c.rms_eps));

  if (c.num_heads <= 0) return DataLoss(f.path() + ": " + p + "attention.head_count must be positive");
  if (f.Get(p + "attention.key_length") != nullptr) {
    RETURN_IF_ERROR(ReadInt(f, p + "attention.key_length", true, &c.head_dim));
    int value_length = c.head_dim;
    RETURN_IF_ERROR(ReadInt(f, p + "attention.value_length", false, &value_length));
    if (value_length != c.head_dim) return Unimplemented(f.path() + ": key and value head sizes differ");
  } else {
    if (c.hidden_size % c.num_heads != 0) {
      return DataLoss(f.path() + ": embedding_length " + std::to_string(c.hidden_size) +
                      " is not a multiple of head_count " + std::to_string(c.num_heads));
    }
    c.head_dim = c.hidden_size / c.num_heads;
  }
  int rope_dims = c.head_dim;
  RETURN_IF_ERROR(ReadInt(f, p + "rope.dimension_count", false, &rope_dims));
  if (rope_dims != c.head_dim) {
    return Unimplemented(f.path() + ": partial rotary embedding (rope.dimension_count " + std::to_string(rope_dims) +
                         " != head_dim " + std::to_string(c.head_dim) + ")");
  }

  if (f.Get(p + "vocab_size") != nullptr) {
    RETURN_IF_ERROR(ReadInt(f, p + "vocab_size", true, &c.vocab_size));
  } else if (const TensorInfo* embd = f.Find("token_embd.weight")) {
    c.vocab_size = static_cast<int>(embd->rows());
  } else if (const GgufValue* tokens = f.Get("tokenizer.ggml.tokens")) {
    c.vocab_size = static_cast<int>(tokens->strings.size());
  }

  if (const GgufValue* type = f.Get(p + "rope.scaling.type")) {
    if (type->type != GgufValue::Type::kString) return DataLoss(f.path() + ": rope.scaling.type is not a string");
    if (type->s == "llama3") {
      c.rope_scaling.enabled = true;
      RETURN_IF_ERROR(ReadFloat(f, p + "rope.scaling.factor", &c.rope_scaling.factor));
      RETURN_IF_ERROR(ReadFloat(f, p + "rope.scaling.low_freq_factor", &c.rope_scaling.low_freq_factor));
      RETURN_IF_ERROR(ReadFloat(f, p + "rope.scaling.high_freq_factor", &c.rope_scaling.high_freq_factor));
      RETURN_IF_ERROR(ReadInt(f, p + "rope.scaling.original_context_length", false,
                              &c.rope_scaling.original_context_length));
    } else if (type->s == "linear") {
      RETURN_IF_ERROR(ReadFloat(f, p + "rope.scaling.factor", &c.rope_scaling.linear_factor));
    } else if (type->s != "none") {
      float factor = 1;
      RETURN_IF_ERROR(ReadFloat(f, p + "rope.scaling.factor", &factor));
      if (factor != 1) return Unimplemented(f.path() + ": RoPE scaling type \"" + type->s + "\" is not supported");
    }
  }
  RETURN_IF_ERROR(ReadRopeFreqFactors(f, &c));
  if (f.Find("rope_factors_long.weight") != nullptr || f.Find("rope_factors_short.weight") != nullptr) {
    return Unimplemented(f.path() + ": LongRoPE (rope_factors_long/short, Phi-3 128k) is not supported");
  }
  c.rope_layout = a->rope_layout;
  c.tied_embeddings = f.Find("output.weight") == nullptr;
  RETURN_IF_ERROR(ReadInt(f, p + "attention.sliding_window", false, &c.sliding_window));
  if (a->sliding_window_period > 0) {
    c.rope_theta_local = a->default_rope_theta_local;
    RETURN_IF_ERROR(ReadFloat(f, p + "rope.freq_base_swa", &c.rope_theta_local));
  }
  // Gemma 3 27B scales q·k by 1 / sqrt(hidden / heads) (its query_pre_attn_scalar), not by
  // 1 / sqrt(head_dim); the file does not say so, llama.cpp knows it by the layer count.
  if (c.architecture == "gemma3" && c.num_layers == 62) {
    c.attention_scale = 1.0f / std::sqrt(static_cast<float>(c.hidden_size / c.num_heads));
  }

  RETURN_IF_ERROR(ReadInt(f, "tokenizer.ggml.bos_token_id", false, &c.bos_id));
  RETURN_IF_ERROR(ReadInt(f, "tokenizer.ggml.eos_token_id", false, &c.eos_id));
  RETURN_IF_ERROR(ReadInt(f, "tokenizer.ggml.eot_token_id", false, &c.eot_id));
  // llama.cpp's default: SentencePiece vocabularies add BOS, byte-level BPE ones do not.
  if (const GgufValue* model = f.Get("tokenizer.ggml.model")) c.add_bos = model->s == "llama";
  RETURN_IF_ERROR(ReadBool(f, "tokenizer.ggml.add_bos_token", &c.add_bos));
  if (const GgufValue* t = f.Get("tokenizer.chat_template")) {
    if (t->type != GgufValue::Type::kString) return DataLoss(f.path() + ": tokenizer.chat_template is not a string");
    c.chat_template = t->s;
  }

  Status valid = c.Validate();
  if (!valid.ok()) return DataLoss(f.path() + ": " + valid.message());
  return c;
}

}  // namespace tpserve

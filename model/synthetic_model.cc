#include "model/synthetic_model.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "common/json.h"
#include "model/gguf_writer.h"
#include "model/model_tensors.h"
#include "model/safetensors_dir.h"
#include "model/type_mix.h"

namespace tpserve {
namespace {

constexpr uint64_t kChunkBytes = 4 << 20;  // rows are generated and written in chunks of about this size

// One tensor of the model in both naming schemes.
struct SynthTensor {
  std::string gguf_name;
  std::string hf_name;
  int64_t rows;    // 1 for vectors
  int64_t cols;
  bool is_vector;  // a norm or a bias: F32 [cols]
  int qk_heads;    // heads whose rows GGUF permutes (Q: num_heads, K: num_kv_heads), 0 otherwise
};

// The model's tensors (ModelTensors) with their HF names and, for Q and K, the heads whose rows the
// llama GGUF permutes (the other architectures' GGUFs keep HF's row order).
std::vector<SynthTensor> SyntheticTensors(const ModelConfig& c) {
  std::vector<SynthTensor> out;
  const bool is_llama = c.architecture == "llama";
  for (const ModelTensor& m : ModelTensors(c)) {
    SynthTensor t{m.name, GgufToHfName(m.name), m.is_vector() ? 1 : m.shape[0], m.shape.back(), m.is_vector(), 0};
    if (is_llama && m.name.ends_with(".attn_q.weight")) t.qk_heads = c.num_heads;
    if (is_llama && m.name.ends_with(".attn_k.weight")) t.qk_heads = c.num_kv_heads;
    out.push_back(std::move(t));
  }
  return out;
}

uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t NameHash(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// The type a weight has in the HF directory (safetensors holds only float types).
DType HfType(DType t) { return IsQuantized(t) ? DType::kF32 : t; }
DType TensorType(const SynthTensor& t, const SyntheticModelOptions& o) {
  return t.is_vector ? DType::kF32
                   : TypeMix{o.type, o.medium_mix}.TensorType(t.gguf_name, t.cols, o.config.num_layers);
}

// Encodes `n` floats as `type` into dst.
void Encode(DType type, const float* src, uint8_t* dst, int64_t n) {
  switch (type) {
    case DType::kF32: std::memcpy(dst, src, n * 4); break;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t v = F32ToFp16(src[i]);
        std::memcpy(dst + 2 * i, &v, 2);
      }
      break;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t v = F32ToBf16(src[i]);
        std::memcpy(dst + 2 * i, &v, 2);
      }
      break;
    default: QuantizeRow(type, src, dst, n);
  }
}

Status CheckOptions(const SyntheticModelOptions& o) {
  RETURN_IF_ERROR(o.config.Validate());
  if (o.config.vocab_size < 300) return InvalidArgument("synthetic model: vocab_size must be >= 300");
  if (o.medium_mix && o.type != DType::kQ4_K && o.type != DType::kQ5_K) {
    return InvalidArgument(std::string("synthetic model: the medium mix needs Q4_K or Q5_K, not ") + DTypeName(o.type));
  }
  if (IsQuantized(o.type)) {
    const ModelConfig& c = o.config;
    for (int64_t cols : {int64_t{c.hidden_size}, int64_t{c.ffn_size}, int64_t{c.num_heads} * c.head_dim}) {
      if (cols % kQuantBlock != 0) {
        return InvalidArgument(std::string("synthetic model: ") + DTypeName(o.type) + " needs input sizes that are " +
                               "multiples of 32, got " + std::to_string(cols));
      }
    }
  }
  return OkStatus();
}

// Streams one tensor's rows (in the order `row_of(k)` gives GGUF rows for output row k), encoded
// as `type`, to `sink(bytes, n)`. Values go through `weight_type` first so HF rows equal the
// dequantised GGUF rows.
template <typename RowOf, typename Sink>
Status StreamTensor(const SyntheticModelOptions& o, const SynthTensor& t, DType type, RowOf row_of, Sink sink) {
  const DType stored = TensorType(t, o);
  const int64_t row_bytes = DTypeRowBytes(type, t.cols);
  const int64_t chunk_rows = std::max<int64_t>(1, static_cast<int64_t>(kChunkBytes) / row_bytes);
  std::vector<uint8_t> chunk(chunk_rows * row_bytes);
  std::vector<float> row(t.cols);
  std::vector<uint8_t> roundtrip(stored != type ? DTypeRowBytes(stored, t.cols) : 0);
  for (int64_t r0 = 0; r0 < t.rows; r0 += chunk_rows) {
    const int64_t n = std::min(chunk_rows, t.rows - r0);
    for (int64_t k = 0; k < n; ++k) {
      SyntheticRow(o, t.gguf_name, row_of(r0 + k), row.data(), t.cols);
      if (stored != type) {  // HF copy of a quantised/half GGUF weight: same values
        Encode(stored, row.data(), roundtrip.data(), t.cols);
        DequantizeRow(stored, roundtrip.data(), row.data(), t.cols);
      }
      Encode(type, row.data(), chunk.data() + k * row_bytes, t.cols);
    }
    RETURN_IF_ERROR(sink(chunk.data(), static_cast<uint64_t>(n * row_bytes)));
  }
  return OkStatus();
}

// A float as the double with the same shortest decimal form (1e-5f -> 1e-05, not 9.99999974e-06).
JsonValue FloatJson(float f) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof(buf), f);
  double d = 0;
  std::from_chars(buf, r.ptr, d);
  return JsonValue::Number(d);
}

JsonValue HfConfigJson(const SyntheticModelOptions& o) {
  const ModelConfig& c = o.config;
  JsonValue j = JsonValue::Object();
  // llama with a window is written as Mistral (whose config carries one); qwen2 and qwen3 as themselves.
  const std::string model_type = c.architecture == "llama" && c.sliding_window > 0 ? "mistral" : c.architecture;
  const char* class_name = model_type == "mistral" ? "MistralForCausalLM"
                           : model_type == "qwen2" ? "Qwen2ForCausalLM"
                           : model_type == "qwen3" ? "Qwen3ForCausalLM"
                                                   : "LlamaForCausalLM";
  JsonValue arch = JsonValue::Array();
  arch.Append(JsonValue::String(class_name));
  j.Set("architectures", std::move(arch));
  j.Set("model_type", JsonValue::String(model_type));
  if (c.sliding_window > 0) j.Set("sliding_window", JsonValue::Int(c.sliding_window));
  j.Set("hidden_act", JsonValue::String("silu"));
  j.Set("hidden_size", JsonValue::Int(c.hidden_size));
  j.Set("intermediate_size", JsonValue::Int(c.ffn_size));
  j.Set("num_hidden_layers", JsonValue::Int(c.num_layers));
  j.Set("num_attention_heads", JsonValue::Int(c.num_heads));
  j.Set("num_key_value_heads", JsonValue::Int(c.num_kv_heads));
  j.Set("head_dim", JsonValue::Int(c.head_dim));
  j.Set("max_position_embeddings", JsonValue::Int(c.context_length));
  j.Set("rms_norm_eps", FloatJson(c.rms_eps));
  j.Set("rope_theta", FloatJson(c.rope_theta));
  if (c.rope_scaling.enabled) {
    JsonValue s = JsonValue::Object();
    s.Set("rope_type", JsonValue::String("llama3"));
    s.Set("factor", FloatJson(c.rope_scaling.factor));
    s.Set("low_freq_factor", FloatJson(c.rope_scaling.low_freq_factor));
    s.Set("high_freq_factor", FloatJson(c.rope_scaling.high_freq_factor));
    s.Set("original_max_position_embeddings", JsonValue::Int(c.rope_scaling.original_context_length));
    j.Set("rope_scaling", std::move(s));
  } else {
    j.Set("rope_scaling", JsonValue());
  }
  j.Set("vocab_size", JsonValue::Int(c.vocab_size));
  j.Set("tie_word_embeddings", JsonValue::Bool(c.tied_embeddings));
  j.Set("bos_token_id", JsonValue::Int(1));
  j.Set("eos_token_id", JsonValue::Int(2));
  const DType t = HfType(o.type);
  j.Set("torch_dtype", JsonValue::String(t == DType::kF32 ? "float32" : t == DType::kF16 ? "float16" : "bfloat16"));
  return j;
}

// A Llama-2-style tokenizer.json for the synthetic vocabulary: SentencePiece-style BPE with byte
// fallback, one merge per multi-symbol piece in vocabulary order (so merge ranks order the pieces
// as the GGUF scores do), the last character split off.
JsonValue HfTokenizerJson(const SyntheticVocab& v) {
  const std::string kSpace = "\xE2\x96\x81";
  auto object = [](std::initializer_list<std::pair<const char*, JsonValue>> fields) {
    JsonValue o = JsonValue::Object();
    for (const auto& [k, val] : fields) o.Set(k, val);
    return o;
  };
  auto replace = [&](const std::string& from, const std::string& to) {
    return object({{"type", JsonValue::String("Replace")},
                   {"pattern", object({{"String", JsonValue::String(from)}})},
                   {"content", JsonValue::String(to)}});
  };
  JsonValue added = JsonValue::Array();
  for (int id = 0; id < 3; ++id) {
    added.Append(object({{"id", JsonValue::Int(id)}, {"content", JsonValue::String(v.tokens[id])},
                         {"single_word", JsonValue::Bool(false)}, {"lstrip", JsonValue::Bool(false)},
                         {"rstrip", JsonValue::Bool(false)}, {"normalized", JsonValue::Bool(false)},
                         {"special", JsonValue::Bool(true)}}));
  }
  JsonValue normalizers = JsonValue::Array();
  normalizers.Append(object({{"type", JsonValue::String("Prepend")}, {"prepend", JsonValue::String(kSpace)}}));
  normalizers.Append(replace(" ", kSpace));
  JsonValue decoders = JsonValue::Array();
  decoders.Append(replace(kSpace, " "));
  decoders.Append(object({{"type", JsonValue::String("ByteFallback")}}));
  decoders.Append(object({{"type", JsonValue::String("Fuse")}}));
  decoders.Append(object({{"type", JsonValue::String("Strip")}, {"content", JsonValue::String(" ")},
                          {"start", JsonValue::Int(1)}, {"stop", JsonValue::Int(0)}}));
  JsonValue vocab = JsonValue::Object();
  std::set<std::string> known;
  JsonValue merges = JsonValue::Array();
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    const std::string& piece = v.tokens[id];
    vocab.Set(piece, JsonValue::Int(static_cast<int64_t>(id)));
    known.insert(piece);
    if (v.types[id] != 1 || piece.size() < 2 || piece == kSpace) continue;
    const std::string left = piece.substr(0, piece.size() - 1), right = piece.substr(piece.size() - 1);
    CHECK(known.count(left) && known.count(right)) << piece;
    merges.Append(JsonValue::String(left + " " + right));
  }
  JsonValue model = object({{"type", JsonValue::String("BPE")}, {"dropout", JsonValue()},
                            {"unk_token", JsonValue::String("<unk>")}, {"continuing_subword_prefix", JsonValue()},
                            {"end_of_word_suffix", JsonValue()}, {"fuse_unk", JsonValue::Bool(true)},
                            {"byte_fallback", JsonValue::Bool(true)}, {"ignore_merges", JsonValue::Bool(false)}});
  model.Set("vocab", std::move(vocab));
  model.Set("merges", std::move(merges));
  JsonValue j = JsonValue::Object();
  j.Set("version", JsonValue::String("1.0"));
  j.Set("truncation", JsonValue());
  j.Set("padding", JsonValue());
  j.Set("added_tokens", std::move(added));
  j.Set("normalizer", object({{"type", JsonValue::String("Sequence")}, {"normalizers", std::move(normalizers)}}));
  j.Set("pre_tokenizer", JsonValue());
  j.Set("post_processor", JsonValue());
  j.Set("decoder", object({{"type", JsonValue::String("Sequence")}, {"decoders", std::move(decoders)}}));
  j.Set("model", std::move(model));
  return j;
}

JsonValue HfTokenizerConfigJson(const ModelConfig& c) {
  JsonValue j = JsonValue::Object();
  j.Set("tokenizer_class", JsonValue::String("LlamaTokenizer"));
  j.Set("add_bos_token", JsonValue::Bool(true));
  j.Set("add_eos_token", JsonValue::Bool(false));
  j.Set("bos_token", JsonValue::String("<s>"));
  j.Set("eos_token", JsonValue::String("</s>"));
  j.Set("unk_token", JsonValue::String("<unk>"));
  j.Set("model_max_length", JsonValue::Int(c.context_length));
  return j;
}

Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return Internal("cannot write " + path);
  return OkStatus();
}

// Writes one safetensors file holding `tensors` (HF order, HF dtypes).
Status WriteSafetensorsFile(const SyntheticModelOptions& o, const std::vector<const SynthTensor*>& tensors,
                            const std::string& path) {
  JsonValue header = JsonValue::Object();
  JsonValue meta = JsonValue::Object();
  meta.Set("format", JsonValue::String("pt"));
  header.Set("__metadata__", std::move(meta));
  uint64_t offset = 0;
  for (const SynthTensor* t : tensors) {
    const DType type = HfType(TensorType(*t, o));
    const uint64_t nbytes = static_cast<uint64_t>(t->rows) * DTypeRowBytes(type, t->cols);
    JsonValue e = JsonValue::Object();
    e.Set("dtype", JsonValue::String(type == DType::kF32 ? "F32" : type == DType::kF16 ? "F16" : "BF16"));
    JsonValue shape = JsonValue::Array();
    if (!t->is_vector) shape.Append(JsonValue::Int(t->rows));
    shape.Append(JsonValue::Int(t->cols));
    e.Set("shape", std::move(shape));
    JsonValue offsets = JsonValue::Array();
    offsets.Append(JsonValue::Int(static_cast<int64_t>(offset)));
    offsets.Append(JsonValue::Int(static_cast<int64_t>(offset + nbytes)));
    e.Set("data_offsets", std::move(offsets));
    header.Set(t->hf_name, std::move(e));
    offset += nbytes;
  }
  std::string text = header.Dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');  // the data starts 8-byte aligned
  std::FILE* out = std::fopen(path.c_str(), "wb");
  if (out == nullptr) return Internal("cannot create " + path);
  std::setvbuf(out, nullptr, _IOFBF, 1 << 20);
  auto sink = [&](const void* p, uint64_t n) -> Status {
    if (std::fwrite(p, 1, n, out) != n) return Internal("writing " + path + " failed");
    return OkStatus();
  };
  const uint64_t header_size = text.size();
  Status st = sink(&header_size, 8);
  if (st.ok()) st = sink(text.data(), text.size());
  for (const SynthTensor* t : tensors) {
    if (!st.ok()) break;
    const int d = o.config.head_dim;
    if (t->qk_heads > 0) {
      st = StreamTensor(o, *t, HfType(TensorType(*t, o)), [d](int64_t r) { return HfRowToGgufRow(r, d); }, sink);
    } else {
      st = StreamTensor(o, *t, HfType(TensorType(*t, o)), [](int64_t r) { return r; }, sink);
    }
  }
  if (std::fclose(out) != 0 && st.ok()) st = Internal("closing " + path + " failed");
  return st;
}

}  // namespace

std::string SyntheticPresetNames() {
  return "llama2-7b, llama3-8b, smollm2-135m, llama-1b, tiny, mistral-tiny, qwen2-tiny, qwen3-tiny, phi3-tiny, "
         "gemma3-tiny, qwen2.5-0.5b, qwen3-0.6b, phi3-mini, gemma3-270m";
}

StatusOr<ModelConfig> SyntheticPreset(const std::string& name) {
  ModelConfig c;
  c.name = "synthetic-" + name;
  auto set = [&c](int layers, int hidden, int heads, int kv, int ffn, int vocab, int ctx, float theta, bool tied) {
    c.num_layers = layers;
    c.hidden_size = hidden;
    c.num_heads = heads;
    c.num_kv_heads = kv;
    c.head_dim = hidden / heads;
    c.ffn_size = ffn;
    c.vocab_size = vocab;
    c.context_length = ctx;
    c.rope_theta = theta;
    c.tied_embeddings = tied;
  };
  if (name == "llama2-7b") {
    set(32, 4096, 32, 32, 11008, 32000, 4096, 10000, false);
  } else if (name == "llama3-8b") {
    set(32, 4096, 32, 8, 14336, 128256, 8192, 500000, false);
  } else if (name == "smollm2-135m") {
    set(30, 576, 9, 3, 1536, 49152, 8192, 100000, true);
  } else if (name == "llama-1b") {
    set(16, 2048, 32, 8, 8192, 128256, 131072, 500000, true);
    c.rope_scaling = {true, 32.0f, 1.0f, 4.0f, 8192};
  } else if (name == "tiny") {
    set(2, 64, 4, 2, 128, 300, 256, 10000, false);
  } else if (name == "mistral-tiny") {  // llama with a sliding window on every layer
    set(2, 64, 4, 2, 128, 300, 256, 10000, false);
    c.sliding_window = 5;
  } else if (name == "qwen2-tiny") {
    set(2, 64, 4, 2, 128, 300, 256, 1000000, false);
    c.architecture = "qwen2";
  } else if (name == "qwen3-tiny") {  // head_dim 32 != hidden / heads, as Qwen 3's
    set(2, 64, 4, 2, 128, 300, 256, 1000000, true);
    c.architecture = "qwen3";
    c.head_dim = 32;
  } else if (name == "phi3-tiny") {  // no window: llama.cpp ignores Phi-3's, so both run the same model
    set(2, 128, 4, 4, 128, 300, 256, 10000, false);
    c.architecture = "phi3";
  } else if (name == "gemma3-tiny") {  // 6 layers: 5 sliding, 1 global; one KV head; head_dim 32
    set(6, 64, 4, 1, 128, 300, 256, 1000000, true);
    c.architecture = "gemma3";
    c.head_dim = 32;
    c.sliding_window = 4;
    c.rope_theta_local = 10000;
    c.rms_eps = 1e-6f;
  } else if (name == "qwen2.5-0.5b") {
    set(24, 896, 14, 2, 4864, 151936, 32768, 1000000, true);
    c.architecture = "qwen2";
    c.rms_eps = 1e-6f;
  } else if (name == "qwen3-0.6b") {
    set(28, 1024, 16, 8, 3072, 151936, 40960, 1000000, true);
    c.architecture = "qwen3";
    c.head_dim = 128;
    c.rms_eps = 1e-6f;
  } else if (name == "phi3-mini") {
    set(32, 3072, 32, 32, 8192, 32064, 4096, 10000, false);
    c.architecture = "phi3";
    c.sliding_window = 2047;
  } else if (name == "gemma3-270m") {
    set(18, 640, 4, 1, 2048, 262144, 32768, 1000000, true);
    c.architecture = "gemma3";
    c.head_dim = 256;
    c.sliding_window = 512;
    c.rope_theta_local = 10000;
    c.rms_eps = 1e-6f;
  } else {
    return InvalidArgument("unknown preset \"" + name + "\" (" + SyntheticPresetNames() + ")");
  }
  c.bos_id = 1;
  c.eos_id = 2;
  c.add_bos = true;
  return c;
}

SyntheticVocab MakeSyntheticVocab(int vocab_size, const std::string& architecture) {
  CHECK_GE(vocab_size, 300);
  SyntheticVocab v;
  auto add = [&v](std::string s, float score, int32_t type) {
    v.tokens.push_back(std::move(s));
    v.scores.push_back(score);
    v.types.push_back(type);
  };
  add("<unk>", 0, 2);
  add("<s>", 0, 3);
  add("</s>", 0, 3);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    add(buf, 0, 6);
  }
  const std::string kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space
  float score = -1;
  auto piece = [&](const std::string& s) {
    if (static_cast<int>(v.tokens.size()) < vocab_size) add(s, score--, 1);
  };
  const std::string singles = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,!?'-:;()\"";
  piece(kSpace);
  for (char ch : singles) piece(std::string(1, ch));
  for (char ch : singles) piece(kSpace + std::string(1, ch));
  // Then all lowercase strings of length 2, 3, ... with and without the space mark: every piece is
  // a merge of two shorter ones, so a BPE-by-score tokenizer can reach it.
  for (int len = 2; static_cast<int>(v.tokens.size()) < vocab_size; ++len) {
    std::string s(len, 'a');
    while (static_cast<int>(v.tokens.size()) < vocab_size) {
      piece(kSpace + s);
      piece(s);
      int k = len - 1;
      while (k >= 0 && s[k] == 'z') s[k--] = 'a';
      if (k < 0) break;
      ++s[k];
    }
  }
  if (architecture == "phi3") {  // Phi-3's EOS; llama.cpp and tpserve take it for the end of a turn
    v.tokens.back() = "<|endoftext|>";
    v.scores.back() = 0;
    v.types.back() = 3;
  }
  return v;
}

void SyntheticRow(const SyntheticModelOptions& o, const std::string& name, int64_t row, float* out, int64_t cols) {
  uint64_t state = Mix(o.seed * 0x9E3779B97F4A7C15ull ^ NameHash(name)) ^ Mix(static_cast<uint64_t>(row) + 1);
  const bool is_norm = name.find("norm") != std::string::npos;
  // Uniform on [-a, a) has standard deviation a / sqrt(3).
  const float a = is_norm ? 0.1f : std::sqrt(3.0f / static_cast<float>(cols));
  constexpr float kScale = 1.0f / 2147483648.0f;  // 2^-31
  for (int64_t i = 0; i < cols; i += 2) {
    state += 0x9E3779B97F4A7C15ull;
    const uint64_t bits = Mix(state);
    const float u0 = static_cast<float>(static_cast<int32_t>(bits)) * kScale;
    const float u1 = static_cast<float>(static_cast<int32_t>(bits >> 32)) * kScale;
    out[i] = (is_norm ? 1.0f : 0.0f) + a * u0;
    if (i + 1 < cols) out[i + 1] = (is_norm ? 1.0f : 0.0f) + a * u1;
  }
}

int64_t HfRowToGgufRow(int64_t hf_row, int head_dim) {
  const int64_t half = head_dim / 2;
  const int64_t head = hf_row / head_dim, r = hf_row % head_dim;
  const int64_t second = r / half, i = r % half;
  return head * head_dim + 2 * i + second;
}

Status WriteSyntheticGguf(const SyntheticModelOptions& o, const std::string& path) {
  RETURN_IF_ERROR(CheckOptions(o));
  const ModelConfig& c = o.config;
  GgufWriter w;
  const std::string p = c.architecture + ".";
  w.SetString("general.architecture", c.architecture);
  w.SetString("general.name", c.name.empty() ? "synthetic" : c.name);
  w.SetU32("general.alignment", 32);
  w.SetU32(p + "block_count", c.num_layers);
  w.SetU32(p + "context_length", c.context_length);
  w.SetU32(p + "embedding_length", c.hidden_size);
  w.SetU32(p + "feed_forward_length", c.ffn_size);
  w.SetU32(p + "attention.head_count", c.num_heads);
  w.SetU32(p + "attention.head_count_kv", c.num_kv_heads);
  if (c.head_dim * c.num_heads != c.hidden_size) {
    w.SetU32(p + "attention.key_length", c.head_dim);
    w.SetU32(p + "attention.value_length", c.head_dim);
  }
  w.SetF32(p + "rope.freq_base", c.rope_theta);
  w.SetU32(p + "rope.dimension_count", c.head_dim);
  if (c.rope_scaling.enabled) {
    w.SetString(p + "rope.scaling.type", "llama3");
    w.SetF32(p + "rope.scaling.factor", c.rope_scaling.factor);
    w.SetF32(p + "rope.scaling.low_freq_factor", c.rope_scaling.low_freq_factor);
    w.SetF32(p + "rope.scaling.high_freq_factor", c.rope_scaling.high_freq_factor);
    w.SetU32(p + "rope.scaling.original_context_length", c.rope_scaling.original_context_length);
  }
  if (c.rope_scaling.linear_factor != 1) {
    w.SetString(p + "rope.scaling.type", "linear");
    w.SetF32(p + "rope.scaling.factor", c.rope_scaling.linear_factor);
  }
  if (c.rope_theta_local > 0) w.SetF32(p + "rope.freq_base_swa", c.rope_theta_local);
  if (c.sliding_window > 0) w.SetU32(p + "attention.sliding_window", c.sliding_window);
  w.SetF32(p + "attention.layer_norm_rms_epsilon", c.rms_eps);
  w.SetU32(p + "vocab_size", c.vocab_size);
  SyntheticVocab vocab = MakeSyntheticVocab(c.vocab_size, c.architecture);
  w.SetString("tokenizer.ggml.model", "llama");
  w.SetStringArray("tokenizer.ggml.tokens", vocab.tokens);
  w.SetF32Array("tokenizer.ggml.scores", vocab.scores);
  w.SetI32Array("tokenizer.ggml.token_type", vocab.types);
  w.SetU32("tokenizer.ggml.unknown_token_id", 0);
  w.SetU32("tokenizer.ggml.bos_token_id", 1);
  w.SetU32("tokenizer.ggml.eos_token_id", 2);
  w.SetBool("tokenizer.ggml.add_bos_token", true);
  w.SetBool("tokenizer.ggml.add_space_prefix", true);

  const std::vector<SynthTensor> tensors = SyntheticTensors(c);
  for (const SynthTensor& t : tensors) {
    if (t.is_vector) {
      w.AddTensor(t.gguf_name, DType::kF32, {t.cols});
    } else {
      w.AddTensor(t.gguf_name, TensorType(t, o), {t.rows, t.cols});
    }
  }
  RETURN_IF_ERROR(w.Open(path));
  auto sink = [&w](const void* p, uint64_t n) { return w.WriteTensorData(p, n); };
  for (const SynthTensor& t : tensors) {
    RETURN_IF_ERROR(StreamTensor(o, t, TensorType(t, o), [](int64_t r) { return r; }, sink));
  }
  return w.Finish();
}

Status WriteSyntheticHfDir(const SyntheticModelOptions& o, const std::string& dir) {
  RETURN_IF_ERROR(CheckOptions(o));
  const ModelConfig& c = o.config;
  const bool is_qwen = c.architecture == "qwen2" || c.architecture == "qwen3";
  if ((c.architecture != "llama" && !is_qwen) || (is_qwen && c.sliding_window > 0) ||
      c.rope_scaling.linear_factor != 1) {
    return Unimplemented("synthetic model: the safetensors writer writes llama (Mistral with a window), qwen2 and "
                         "qwen3 without a window; write " + c.architecture + " as GGUF");
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return InvalidArgument("cannot create directory " + dir + ": " + ec.message());
  RETURN_IF_ERROR(WriteFile(dir + "/config.json", HfConfigJson(o).Dump() + "\n"));
  RETURN_IF_ERROR(WriteFile(dir + "/tokenizer.json", HfTokenizerJson(MakeSyntheticVocab(o.config.vocab_size)).Dump()));
  RETURN_IF_ERROR(WriteFile(dir + "/tokenizer_config.json", HfTokenizerConfigJson(o.config).Dump() + "\n"));

  const std::vector<SynthTensor> tensors = SyntheticTensors(o.config);
  // Group tensors into shards by size.
  std::vector<std::vector<const SynthTensor*>> shards(1);
  uint64_t shard_bytes = 0;
  for (const SynthTensor& t : tensors) {
    const uint64_t nbytes = static_cast<uint64_t>(t.rows) * DTypeRowBytes(HfType(TensorType(t, o)), t.cols);
    if (o.max_shard_bytes > 0 && !shards.back().empty() && shard_bytes + nbytes > o.max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(&t);
    shard_bytes += nbytes;
  }
  if (shards.size() == 1 && o.max_shard_bytes == 0) {
    return WriteSafetensorsFile(o, shards[0], dir + "/model.safetensors");
  }
  JsonValue weight_map = JsonValue::Object();
  for (size_t s = 0; s < shards.size(); ++s) {
    char name[64];
    std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
    RETURN_IF_ERROR(WriteSafetensorsFile(o, shards[s], dir + "/" + name));
    for (const SynthTensor* t : shards[s]) weight_map.Set(t->hf_name, JsonValue::String(name));
  }
  JsonValue index = JsonValue::Object();
  index.Set("metadata", JsonValue::Object());
  index.Set("weight_map", std::move(weight_map));
  return WriteFile(dir + "/model.safetensors.index.json", index.Dump() + "\n");
}

}  // namespace tpserve

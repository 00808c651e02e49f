// SafetensorsDir against the GGUF of the same synthetic model, sharding, HF config parsing and
// corrupt directories.
#include "model/safetensors_dir.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <unistd.h>

#include "model/gguf_file.h"
#include "model/model_file.h"
#include "model/synthetic_model.h"

namespace tpserve {
namespace {

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/safetensors_test_" + std::to_string(::getpid()) + "_" + name;
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

SyntheticModelOptions Options(DType type) {
  SyntheticModelOptions o;
  o.config = *SyntheticPreset("tiny");
  o.config.hidden_size = 96;
  o.config.num_heads = 3;
  o.config.num_kv_heads = 1;
  o.config.head_dim = 32;
  o.config.ffn_size = 160;
  o.config.vocab_size = 331;
  o.type = type;
  o.seed = 9;
  return o;
}

// Row r of tensor `name` in GGUF order, from the HF directory: Q/K rows are found through the
// inverse of llama.cpp's permutation, written here independently of HfRowToGgufRow.
int64_t GgufRowToHfRow(int64_t row, int head_dim) {
  const int64_t head = row / head_dim, j = row % head_dim;
  return head * head_dim + (j % 2) * (head_dim / 2) + j / 2;
}

void ExpectSameModel(const ModelFile& gguf, const ModelFile& hf) {
  const ModelConfig& g = gguf.config();
  const ModelConfig& h = hf.config();
  EXPECT_EQ(h.rope_layout, RopeLayout::kHalf);
  EXPECT_EQ(g.rope_layout, RopeLayout::kInterleaved);
  EXPECT_EQ(h.num_layers, g.num_layers);
  EXPECT_EQ(h.hidden_size, g.hidden_size);
  EXPECT_EQ(h.ffn_size, g.ffn_size);
  EXPECT_EQ(h.num_heads, g.num_heads);
  EXPECT_EQ(h.num_kv_heads, g.num_kv_heads);
  EXPECT_EQ(h.head_dim, g.head_dim);
  EXPECT_EQ(h.vocab_size, g.vocab_size);
  EXPECT_EQ(h.context_length, g.context_length);
  EXPECT_EQ(h.rope_theta, g.rope_theta);
  EXPECT_EQ(h.rms_eps, g.rms_eps);
  EXPECT_EQ(h.tied_embeddings, g.tied_embeddings);
  EXPECT_EQ(h.bos_id, g.bos_id);
  EXPECT_EQ(h.eos_id, g.eos_id);
  EXPECT_EQ(h.rope_scaling.enabled, g.rope_scaling.enabled);

  std::vector<std::string> gn = gguf.weights().Names(), hn = hf.weights().Names();
  std::sort(gn.begin(), gn.end());
  std::sort(hn.begin(), hn.end());
  EXPECT_EQ(gn, hn);
  for (const std::string& name : gn) {
    StatusOr<HostTensor> gt = gguf.weights().Read(name);
    StatusOr<HostTensor> ht = hf.weights().Read(name);
    ASSERT_TRUE(gt.ok() && ht.ok()) << name;
    ASSERT_EQ(gt->rows, ht->rows) << name;
    ASSERT_EQ(gt->cols, ht->cols) << name;
    const std::vector<float> gv = gt->ToF32(), hv = ht->ToF32();
    const bool permuted = name.find("attn_q") != std::string::npos || name.find("attn_k") != std::string::npos;
    for (int64_t r = 0; r < gt->rows; ++r) {
      const int64_t hr = permuted ? GgufRowToHfRow(r, g.head_dim) : r;
      ASSERT_EQ(0, std::memcmp(&gv[r * gt->cols], &hv[hr * gt->cols], gt->cols * sizeof(float)))
          << name << " row " << r;
    }
  }
}

TEST(SafetensorsTest, HfDirectoryHoldsTheSameModelAsTheGguf) {
  for (DType type : {DType::kF32, DType::kBF16, DType::kF16, DType::kQ8_0, DType::kQ4_1}) {
    SyntheticModelOptions o = Options(type);
    o.config.tied_embeddings = type == DType::kBF16;
    const std::string gguf_path = TempPath(std::string("same_") + DTypeName(type) + ".gguf");
    const std::string dir = TempPath(std::string("same_") + DTypeName(type));
    ASSERT_TRUE(WriteSyntheticGguf(o, gguf_path).ok());
    ASSERT_TRUE(WriteSyntheticHfDir(o, dir).ok());
    StatusOr<std::unique_ptr<ModelFile>> g = ModelFile::Open(gguf_path);
    StatusOr<std::unique_ptr<ModelFile>> h = ModelFile::Open(dir);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    EXPECT_EQ((*h)->gguf(), nullptr);
    EXPECT_EQ((*h)->hf_dir(), dir);
    const DType hf_type = IsQuantized(type) ? DType::kF32 : type;
    EXPECT_EQ((*h)->weights().Find("blk.0.attn_v.weight")->type, hf_type);
    EXPECT_EQ((*h)->weights().Find("blk.0.attn_norm.weight")->type, DType::kF32);
    ExpectSameModel(**g, **h);
    std::remove(gguf_path.c_str());
    std::filesystem::remove_all(dir);
  }
}

TEST(SafetensorsTest, ShardedDirectoryReadsTheSameAsOneFile) {
  SyntheticModelOptions o = Options(DType::kF32);
  o.config.rope_scaling = {true, 8.0f, 1.0f, 4.0f, 128};
  const std::string one = TempPath("one"), sharded = TempPath("sharded");
  ASSERT_TRUE(WriteSyntheticHfDir(o, one).ok());
  o.max_shard_bytes = 100000;
  ASSERT_TRUE(WriteSyntheticHfDir(o, sharded).ok());
  EXPECT_TRUE(std::filesystem::exists(sharded + "/model.safetensors.index.json"));
  EXPECT_FALSE(std::filesystem::exists(sharded + "/model.safetensors"));
  StatusOr<std::unique_ptr<SafetensorsDir>> a = SafetensorsDir::Open(one);
  StatusOr<std::unique_ptr<SafetensorsDir>> b = SafetensorsDir::Open(sharded);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE((*b)->config().rope_scaling.enabled);
  EXPECT_EQ((*b)->config().rope_scaling.factor, 8.0f);
  EXPECT_EQ((*b)->config().rope_scaling.original_context_length, 128);
  std::vector<std::string> an = (*a)->Names(), bn = (*b)->Names();
  std::sort(an.begin(), an.end());
  std::sort(bn.begin(), bn.end());
  ASSERT_EQ(an, bn);
  EXPECT_EQ(an.size(), 2u + 2 * 9 + 1);  // embd, output_norm, output + 9 per layer
  for (const std::string& name : an) {
    HostTensor x = *(*a)->Read(name), y = *(*b)->Read(name);
    ASSERT_EQ(x.nbytes(), y.nbytes());
    EXPECT_EQ(0, std::memcmp(x.data.get(), y.data.get(), x.nbytes())) << name;
  }
  // Slices equal the same part of the whole tensor.
  HostTensor whole = *(*b)->Read("blk.1.ffn_down.weight");  // [96, 160]
  HostTensor part = *(*b)->ReadSlice("blk.1.ffn_down.weight", 10, 20, 33, 97);
  const std::vector<float> wv = whole.ToF32(), pv = part.ToF32();
  for (int r = 0; r < 10; ++r) {
    for (int c = 0; c < 64; ++c) ASSERT_EQ(pv[r * 64 + c], wv[(r + 10) * 160 + c + 33]);
  }
  EXPECT_EQ((*b)->ReadSlice("blk.1.ffn_down.weight", 0, 97, 0, 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*b)->Read("nope").status().code(), StatusCode::kNotFound);
  std::filesystem::remove_all(one);
  std::filesystem::remove_all(sharded);
}

TEST(SafetensorsTest, NameMapping) {
  EXPECT_EQ(HfToGgufName("model.embed_tokens.weight"), "token_embd.weight");
  EXPECT_EQ(HfToGgufName("lm_head.weight"), "output.weight");
  EXPECT_EQ(HfToGgufName("model.norm.weight"), "output_norm.weight");
  EXPECT_EQ(HfToGgufName("model.layers.17.self_attn.o_proj.weight"), "blk.17.attn_output.weight");
  EXPECT_EQ(HfToGgufName("model.layers.0.post_attention_layernorm.weight"), "blk.0.ffn_norm.weight");
  EXPECT_EQ(HfToGgufName("model.layers.3.mlp.down_proj.weight"), "blk.3.ffn_down.weight");
  EXPECT_EQ(HfToGgufName("model.layers.3.self_attn.rotary_emb.inv_freq"), "");
  EXPECT_EQ(HfToGgufName("model.layers.2.self_attn.k_proj.bias"), "blk.2.attn_k.bias");
  EXPECT_EQ(HfToGgufName("model.layers.2.self_attn.q_norm.weight"), "blk.2.attn_q_norm.weight");
  for (const char* hf : {"model.embed_tokens.weight", "model.layers.12.mlp.gate_proj.weight",
                         "model.layers.0.self_attn.v_proj.bias", "model.layers.7.self_attn.k_norm.weight"}) {
    EXPECT_EQ(GgufToHfName(HfToGgufName(hf)), hf);
  }
  EXPECT_EQ(GgufToHfName("blk.1.post_ffw_norm.weight"), "");
  EXPECT_EQ(HfToGgufName("model.layers.x.mlp.up_proj.weight"), "");
  EXPECT_EQ(HfToGgufName("model.layers.01.mlp.up_proj.weight"), "");
  EXPECT_EQ(HfToGgufName("model.layers.1"), "");
}

TEST(SafetensorsTest, HfConfigFields) {
  StatusOr<JsonValue> j = ParseJson(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
    "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
    "num_key_value_heads": 8, "head_dim": 64, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
    "max_position_embeddings": 131072, "vocab_size": 128256, "tie_word_embeddings": true,
    "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009],
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"}})");
  ASSERT_TRUE(j.ok());
  StatusOr<ModelConfig> c = ModelConfigFromHfConfig(*j, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->num_layers, 16);
  EXPECT_EQ(c->hidden_size, 2048);
  EXPECT_EQ(c->ffn_size, 8192);
  EXPECT_EQ(c->num_heads, 32);
  EXPECT_EQ(c->num_kv_heads, 8);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->vocab_size, 128256);
  EXPECT_EQ(c->context_length, 131072);
  EXPECT_EQ(c->rope_theta, 500000.0f);
  EXPECT_EQ(c->rms_eps, 1e-5f);
  EXPECT_TRUE(c->tied_embeddings);
  EXPECT_EQ(c->bos_id, 128000);
  EXPECT_EQ(c->eos_id, 128001);
  EXPECT_TRUE(c->rope_scaling.enabled);
  EXPECT_EQ(c->rope_scaling.factor, 32.0f);
  EXPECT_EQ(c->rope_scaling.original_context_length, 8192);
  EXPECT_EQ(c->rope_layout, RopeLayout::kHalf);

  struct Bad {
    const char* json;
    StatusCode code;
  };
  const Bad bad[] = {
      {R"({"model_type": "gemma3_text", "hidden_size": 64})", StatusCode::kUnimplemented},
      {R"({"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
           "num_attention_heads": 4, "vocab_size": 300, "use_sliding_window": true})", StatusCode::kUnimplemented},
      {R"({"model_type": "llama", "hidden_size": 64})", StatusCode::kDataLoss},
      {R"({"model_type": "llama", "hidden_size": "64", "intermediate_size": 1, "num_hidden_layers": 1,
           "num_attention_heads": 4, "vocab_size": 300})", StatusCode::kDataLoss},
      {R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
           "num_attention_heads": 4, "num_key_value_heads": 3, "vocab_size": 300})", StatusCode::kDataLoss},
      {R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
           "num_attention_heads": 4, "vocab_size": 300, "rope_scaling": {"type": "yarn", "factor": 4}})",
       StatusCode::kUnimplemented},
      {R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
           "num_attention_heads": 4, "vocab_size": 300, "attention_bias": true})", StatusCode::kUnimplemented},
      {R"([1, 2])", StatusCode::kDataLoss},
  };
  for (const Bad& b : bad) {
    StatusOr<JsonValue> bj = ParseJson(b.json);
    ASSERT_TRUE(bj.ok()) << b.json;
    EXPECT_EQ(ModelConfigFromHfConfig(*bj, "config.json").status().code(), b.code) << b.json;
  }
}

class SafetensorsCorruptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempPath("corrupt");
    SyntheticModelOptions o = Options(DType::kF32);
    o.config.num_layers = 1;
    ASSERT_TRUE(WriteSyntheticHfDir(o, dir_).ok());
    std::ifstream in(dir_ + "/model.safetensors", std::ios::binary);
    bytes_.assign(std::istreambuf_iterator<char>(in), {});
    std::memcpy(&header_len_, bytes_.data(), 8);
    header_ = bytes_.substr(8, header_len_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Writes the model file with `header` in place of the original one.
  void WriteModel(const std::string& h) {
    const uint64_t n = h.size();
    std::string b(reinterpret_cast<const char*>(&n), 8);
    b += h + bytes_.substr(8 + header_len_);
    WriteText(dir_ + "/model.safetensors", b);
  }
  void ExpectError(StatusCode code, const std::string& what) {
    StatusOr<std::unique_ptr<SafetensorsDir>> d = SafetensorsDir::Open(dir_);
    ASSERT_FALSE(d.ok()) << "accepted; expected " << what;
    EXPECT_EQ(d.status().code(), code) << d.status().ToString();
    EXPECT_NE(d.status().message().find(what), std::string::npos) << d.status().message();
  }
  std::string Replace(const std::string& from, const std::string& to) const {
    std::string h = header_;
    const size_t pos = h.find(from);
    EXPECT_NE(pos, std::string::npos) << from;
    return h.replace(pos, from.size(), to);
  }

  std::string dir_;
  std::string bytes_;
  std::string header_;
  uint64_t header_len_ = 0;
};

TEST_F(SafetensorsCorruptTest, BaseOpens) {
  WriteModel(header_);
  EXPECT_TRUE(SafetensorsDir::Open(dir_).ok());
  EXPECT_TRUE(ModelFile::Open(dir_).ok());
}

TEST_F(SafetensorsCorruptTest, BadHeaders) {
  std::string huge(8, '\0');
  const uint64_t n = uint64_t{1} << 40;
  std::memcpy(huge.data(), &n, 8);
  WriteText(dir_ + "/model.safetensors", huge + bytes_.substr(8));
  ExpectError(StatusCode::kDataLoss, "header length");
  WriteText(dir_ + "/model.safetensors", "abc");
  ExpectError(StatusCode::kDataLoss, "truncated");
  WriteModel("{\"a\": ");
  ExpectError(StatusCode::kDataLoss, "header: json");
  WriteModel("[1]");
  ExpectError(StatusCode::kDataLoss, "not a JSON object");
  WriteModel(Replace("\"data_offsets\":[0,", "\"data_offsets\":[7,"));
  ExpectError(StatusCode::kDataLoss, "holds");
  WriteModel(Replace("\"data_offsets\":[0,", "\"data_offsets\":[-4,"));
  ExpectError(StatusCode::kDataLoss, "outside");
  WriteModel(Replace("\"shape\":[331,96]", "\"shape\":[331,97]"));
  ExpectError(StatusCode::kDataLoss, "holds");
  WriteModel(Replace("\"shape\":[331,96]", "\"shape\":[331,-96]"));
  ExpectError(StatusCode::kDataLoss, "invalid shape");
  WriteModel(Replace("\"dtype\":\"F32\",\"shape\":[331,96]", "\"shape\":[331,96]"));
  ExpectError(StatusCode::kDataLoss, "needs dtype");
  // Truncating the data makes the last tensor run past the end.
  WriteText(dir_ + "/model.safetensors", bytes_.substr(0, bytes_.size() - 4));
  ExpectError(StatusCode::kDataLoss, "outside");
}

// A shard truncated after Open (to its header): reading any tensor is DATA_LOSS naming the shard and
// the tensor, not a SIGBUS.
TEST_F(SafetensorsCorruptTest, ShardTruncatedWhileOpenIsDataLoss) {
  StatusOr<std::unique_ptr<SafetensorsDir>> d = SafetensorsDir::Open(dir_);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  const std::string shard = dir_ + "/model.safetensors";
  ASSERT_EQ(::truncate(shard.c_str(), static_cast<off_t>(8 + header_len_)), 0);
  for (const std::string& name : (*d)->Names()) {
    StatusOr<HostTensor> t = (*d)->ReadRows(name, 0, 1);
    ASSERT_FALSE(t.ok()) << name;
    EXPECT_EQ(t.status().code(), StatusCode::kDataLoss) << t.status().ToString();
    EXPECT_NE(t.status().message().find(shard), std::string::npos) << t.status().message();
    EXPECT_NE(t.status().message().find("tensor " + name), std::string::npos) << t.status().message();
  }
}

TEST_F(SafetensorsCorruptTest, MissingTensorIsReportedByModelFile) {
  WriteModel(Replace("model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.upp_proj.weight"));
  EXPECT_TRUE(SafetensorsDir::Open(dir_).ok());  // an unknown name is ignored ...
  StatusOr<std::unique_ptr<ModelFile>> m = ModelFile::Open(dir_);
  ASSERT_FALSE(m.ok());  // ... but the model lacks ffn_up
  EXPECT_EQ(m.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(m.status().message().find("blk.0.ffn_up.weight"), std::string::npos) << m.status().message();
}

TEST_F(SafetensorsCorruptTest, BadIndexAndMissingFiles) {
  WriteText(dir_ + "/model.safetensors.index.json",
            R"({"weight_map": {"model.norm.weight": "../../etc/passwd"}})");
  ExpectError(StatusCode::kDataLoss, "not inside the directory");
  WriteText(dir_ + "/model.safetensors.index.json",
            R"({"weight_map": {"model.norm.weight": "model.safetensors", "model.extra.weight": "model.safetensors"}})");
  ExpectError(StatusCode::kDataLoss, "missing tensor model.extra.weight");
  WriteText(dir_ + "/model.safetensors.index.json", R"({"weight_map": {"model.norm.weight": "absent.safetensors"}})");
  ExpectError(StatusCode::kNotFound, "absent.safetensors");
  std::filesystem::remove(dir_ + "/model.safetensors.index.json");
  std::filesystem::remove(dir_ + "/model.safetensors");
  ExpectError(StatusCode::kNotFound, "model.safetensors");
  std::filesystem::remove(dir_ + "/config.json");
  ExpectError(StatusCode::kNotFound, "config.json");
  EXPECT_EQ(ModelFile::Open(dir_ + "/nothing").status().code(), StatusCode::kNotFound);
}

TEST_F(SafetensorsCorruptTest, TokenizerConfigSuppliesTemplateAndBos) {
  WriteText(dir_ + "/tokenizer_config.json", R"({"add_bos_token": true, "chat_template": "{{ messages }}"})");
  StatusOr<ModelConfig> c = ModelConfigFromHfDir(dir_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->add_bos);
  EXPECT_EQ(c->chat_template, "{{ messages }}");
}

}  // namespace
}  // namespace tpserve

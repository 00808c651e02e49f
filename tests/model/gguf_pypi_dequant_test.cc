// Our dequantisation of every quantised type equals, bit for bit, the PyPI `gguf` package's (ggml's
// own Python reader, tests/model/gguf_dequantize.py) on files tpserve writes: a synthetic model
// written by tpserve-mkmodel's writer (WriteSyntheticGguf) in each type, including the Q4_K_M mix,
// and a tensor of random block bytes per type (every packing and scale pattern a file can hold).
// Skipped where python3 lacks the package (tests/python/setup.sh installs it).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "model/gguf_file.h"
#include "model/gguf_writer.h"
#include "model/synthetic_model.h"
#include "tests/kernels/matmul_reference.h"

namespace tpserve {
namespace {

namespace fs = std::filesystem;

class GgufPypiDequantTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tpserve_pypi_dequant_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs the script on `path`; the dequantised tensors land in dir_/out/<name>.f32.
  // Returns false (after GTEST_SKIP) when the package is missing.
  bool DequantizeWithPypi(const std::string& path) {
    const fs::path out = dir_ / "out";
    fs::remove_all(out);
    fs::create_directories(out);
    const std::string cmd = "python3 tests/model/gguf_dequantize.py '" + path + "' '" + out.string() + "'";
    const int rc = std::system(cmd.c_str());
    if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77) return false;
    EXPECT_EQ(rc, 0) << cmd;
    return rc == 0;
  }

  // Every tensor of `path` through GgufFile + DequantizeRow against the package's values.
  void ExpectBitwiseEqual(const std::string& path, int* num_quantized) {
    auto file = GgufFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    for (const std::string& name : (*file)->Names()) {
      const TensorInfo* info = (*file)->Find(name);
      auto t = (*file)->ReadSlice(name, 0, info->rows(), 0, info->cols());
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      std::vector<float> ours(info->rows() * info->cols());
      for (int64_t r = 0; r < info->rows(); ++r) {
        DequantizeRow(info->type, t->data.get() + r * t->row_bytes(), ours.data() + r * info->cols(), info->cols());
      }
      std::vector<float> theirs(ours.size());
      std::ifstream in(dir_ / "out" / (name + ".f32"), std::ios::binary);
      ASSERT_TRUE(in.read(reinterpret_cast<char*>(theirs.data()), theirs.size() * 4)) << name;
      for (size_t i = 0; i < ours.size(); ++i) {
        ASSERT_EQ(std::memcmp(&ours[i], &theirs[i], 4), 0)
            << path << " " << name << " (" << DTypeName(info->type) << ") value " << i << ": ours " << ours[i]
            << ", gguf's " << theirs[i];
      }
      if (IsQuantized(info->type)) ++*num_quantized;
    }
  }

  fs::path dir_;
};

TEST_F(GgufPypiDequantTest, SyntheticModelsInEveryTypeEqualThePackage) {
  for (const auto& [type, medium] : std::vector<std::pair<DType, bool>>{
           {DType::kQ8_0, false}, {DType::kQ4_0, false}, {DType::kQ4_1, false}, {DType::kQ5_0, false},
           {DType::kQ5_1, false}, {DType::kQ2_K, false}, {DType::kQ3_K, false}, {DType::kQ4_K, false},
           {DType::kQ5_K, false}, {DType::kQ6_K, false}, {DType::kQ4_K, true}, {DType::kQ5_K, true}}) {
    SyntheticModelOptions o;
    o.config = *SyntheticPreset("tiny");
    o.config.num_layers = 2;
    o.config.hidden_size = 256;
    o.config.num_heads = 4;
    o.config.num_kv_heads = 2;
    o.config.head_dim = 64;
    o.config.ffn_size = 544;  // not whole super-blocks: ffn_down falls back as llama-quantize does
    o.type = type;
    o.medium_mix = medium;
    const std::string path = (dir_ / "model.gguf").string();
    ASSERT_TRUE(WriteSyntheticGguf(o, path).ok());
    if (!DequantizeWithPypi(path)) GTEST_SKIP() << "python3 has no `gguf` package (pip install gguf)";
    int num_quantized = 0;
    ExpectBitwiseEqual(path, &num_quantized);
    EXPECT_GT(num_quantized, 0) << DTypeName(type);
  }
}

TEST_F(GgufPypiDequantTest, RandomBlockBytesEqualThePackage) {
  std::mt19937 rng(123);
  GgufWriter w;
  std::vector<testing::TestWeights> tensors;
  for (DType type : kSupportedDTypes) {
    if (!IsQuantized(type)) continue;
    tensors.push_back(testing::RandomBlockWeights(type, 3, 512, &rng));
    w.AddTensor(std::string("random.") + DTypeName(type), type, {3, 512});
  }
  const std::string path = (dir_ / "random.gguf").string();
  ASSERT_TRUE(w.Open(path).ok());
  for (const auto& t : tensors) ASSERT_TRUE(w.WriteTensorData(t.bytes.data(), t.bytes.size()).ok());
  ASSERT_TRUE(w.Finish().ok());
  if (!DequantizeWithPypi(path)) GTEST_SKIP() << "python3 has no `gguf` package (pip install gguf)";
  int num_quantized = 0;
  ExpectBitwiseEqual(path, &num_quantized);
  EXPECT_EQ(num_quantized, static_cast<int>(tensors.size()));
}

}  // namespace
}  // namespace tpserve

// Loading a model whose file was truncated after it was opened (a checkpoint rewritten under a
// starting worker) fails with DATA_LOSS naming the file, through the real loader and its row and
// column slices at TP 1 and 2: the readers pread into each tensor's buffer, so there is no mapping
// to fault on (it was a SIGBUS).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "model/model_file.h"
#include "model/synthetic_model.h"
#include "worker/llama_model.h"
#include "worker/shard_plan.h"

namespace tpserve {
namespace {

TEST(TruncatedCheckpointTest, LoadingAfterTruncationIsDataLossNotACrash) {
  SyntheticModelOptions options;
  options.config = *SyntheticPreset("tiny");
  options.type = DType::kQ8_0;
  const std::string path = ::testing::TempDir() + "/truncated_checkpoint_" + std::to_string(::getpid()) + ".gguf";
  ASSERT_TRUE(WriteSyntheticGguf(options, path).ok());
  for (int tp_size : {1, 2}) {
    StatusOr<std::unique_ptr<ModelFile>> model = ModelFile::Open(path);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    const ModelConfig& config = (*model)->config();
    StatusOr<ShardPlan> shard = ShardPlan::Make(config, tp_size - 1, tp_size);
    ASSERT_TRUE(shard.ok()) << shard.status().ToString();
    ASSERT_TRUE(LlamaModel::Load(config, (*model)->weights(), *shard).ok()) << "the intact file loads";
    const off_t size = static_cast<off_t>((*model)->gguf()->file_size());
    ASSERT_EQ(::truncate(path.c_str(), size / 2), 0);
    StatusOr<std::unique_ptr<LlamaModel>> loaded = LlamaModel::Load(config, (*model)->weights(), *shard);
    ASSERT_FALSE(loaded.ok()) << "TP " << tp_size << ": loaded half a file";
    EXPECT_EQ(loaded.status().code(), StatusCode::kDataLoss) << loaded.status().ToString();
    EXPECT_NE(loaded.status().message().find(path), std::string::npos) << loaded.status().message();
    ASSERT_TRUE(WriteSyntheticGguf(options, path).ok());  // whole again for the next TP degree
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tpserve

// Dataset: the synthetic request sets the load generator sends, as token ids (so lengths are
// exact: prompts are not re-tokenised, outputs run to max_tokens with ignore_eos).
//
//  - kRandom: vLLM's "random" dataset. Input and output lengths uniform in
//    [len*(1-range_ratio), len*(1+range_ratio)], token ids uniform over the vocabulary (past the
//    first kFirstPlainToken ids, which hold SmolLM2's special tokens).
//  - kShareGptLike: lengths drawn from lognormals fitted to ShareGPT's published means (vLLM
//    paper, Kwon et al. 2023, §6.1: mean input 161.31, mean output 337.99 tokens). The paper gives
//    no spread, so sigma (kShareGptInputSigma / kShareGptOutputSigma) is our assumption, chosen so
//    the p99/mean ratio (~5x input, ~4x output) resembles the paper's histograms. A given
//    --input-len / --output-len replaces the mean. This is not the ShareGPT text: only its lengths.
// With shared_prefix_len P > 0 every prompt starts with the same P random ids (prefix caching).
// Everything is seeded: the same options give the same requests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace tpserve::loadgen {

enum class DatasetKind { kRandom, kShareGptLike };

inline constexpr int32_t kFirstPlainToken = 32;
inline constexpr double kShareGptInputMean = 161.31;
inline constexpr double kShareGptOutputMean = 337.99;
inline constexpr double kShareGptInputSigma = 1.0;
inline constexpr double kShareGptOutputSigma = 0.8;

struct DatasetOptions {
  DatasetKind kind = DatasetKind::kRandom;
  int32_t num_requests = 100;
  int32_t input_len = 0;     // 0: the dataset's default (random: 1024; sharegpt-like: the mean)
  int32_t output_len = 0;    // 0: the dataset's default (random: 128; sharegpt-like: the mean)
  double range_ratio = 0.0;  // random only, in [0, 1)
  int32_t shared_prefix_len = 0;
  int32_t vocab_size = 0;     // REQUIRES > kFirstPlainToken
  int32_t max_model_len = 0;  // prompt + output is clamped to this (0: no bound)
  uint64_t seed = 0;       // lengths
  uint64_t token_salt = 0;  // changes the token ids (prefix included) but not the lengths, so two runs
                            // of the same shape do not hit each other's prefix cache
};

struct BenchRequest {
  std::vector<int32_t> prompt_ids;  // [prompt_len], shared prefix included
  int32_t output_len = 0;           // exact tokens asked for (max_tokens, ignore_eos)
};

StatusOr<DatasetKind> ParseDatasetKind(const std::string& name);  // "random" | "sharegpt-like"
const char* DatasetKindName(DatasetKind kind);

// INVALID_ARGUMENT for options no request can satisfy (vocab too small, prefix longer than the
// model, negative lengths, range_ratio outside [0, 1)).
StatusOr<std::vector<BenchRequest>> MakeDataset(const DatasetOptions& options);

}  // namespace tpserve::loadgen

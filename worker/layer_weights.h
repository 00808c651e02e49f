// LayerWeights: which tensors, and which rows or columns of them, one rank loads for one decoder layer,
// as its architecture lays them out (model/architecture.h). The CPU model (worker/llama_model) and the
// CUDA model (worker/cuda/cuda_llama_model) both load from it, so the two backends read the same slices.
#pragma once

#include <string>
#include <vector>

#include "model/model_config.h"
#include "worker/merged_column_parallel_linear.h"
#include "worker/shard_plan.h"

namespace tpserve {

struct LayerWeights {
  std::string attn_norm;                               // [hidden]
  std::vector<MergedColumnParallelLinear::Part> qkv;   // q, k, v: this rank's heads (fused: rows of attn_qkv)
  std::string q_norm;                                  // [D] per-head norms; "" when the architecture has none
  std::string k_norm;
  std::string attn_output;                             // [hidden, H * D]: columns q_row_begin..q_row_end
  std::string post_attn_norm;                          // [hidden]; "" when none
  std::string ffn_norm;                                // [hidden]
  std::vector<MergedColumnParallelLinear::Part> gate_up;  // gate, up: this rank's FFN rows (fused: of ffn_up)
  std::string ffn_down;                                // [hidden, F]: columns ffn_begin..ffn_end
  std::string post_ffn_norm;                           // [hidden]; "" when none
  std::vector<float> inv_freq;                         // [D / 2] the layer's RoPE frequencies
  int sliding_window = 0;                              // keys attended back from a position; 0: all
};

// REQUIRES: config.Validate() passed; shard planned for config.
LayerWeights PlanLayerWeights(const ModelConfig& config, const ShardPlan& shard, int layer);

}  // namespace tpserve

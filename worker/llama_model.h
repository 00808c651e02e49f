// LlamaModel: one rank's shard of a decoder, composed from the parallel layers: the one transformer of
// every supported architecture, which differ only by their Architecture description (model/architecture.h:
// Q/K/V biases, per-head Q/K norms, fused tensors split at load, post-block norms, embedding scale,
// activation, sliding-window layers with their own RoPE base).
// Forward runs one flattened batch (prefill chunks and decode tokens of several sequences mixed),
// stores the batch's keys and values in this rank's paged cache, and produces this rank's logits shard
// for the rows that need a token. The two all-reduces of each layer live in RowParallelLinear.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "common/status.h"
#include "common/thread_pool.h"
#include "model/model_config.h"
#include "model/weight_source.h"
#include "worker/merged_column_parallel_linear.h"
#include "worker/parallel_linear.h"
#include "worker/shard_plan.h"

namespace tpserve {

// One layer's paged cache on this rank: K and V, each [num_pages, block_size, Hkv] rows of D values of
// `dtype` (kvstore/kv_pool.h), and the layer group (kvstore/kv_layout.h) whose slot mapping and block
// tables address them.
struct LayerKvCache {
  void* k = nullptr;
  void* v = nullptr;
  int group = 0;
  DType dtype = DType::kF32;
};

// The flattened step. Every pointer is borrowed for the duration of Forward.
struct ForwardBatch {
  const int32_t* token_ids = nullptr;     // [T]
  const int32_t* positions = nullptr;     // [T] absolute position of each token in its sequence
  const int32_t* token_seq = nullptr;     // [T] sequence index s in [0, S)
  const int32_t* slot_mapping = nullptr;  // [G, T] cache slot = page * block_size + offset, per layer group
  const int32_t* block_tables = nullptr;  // [G, S, max_blocks_per_seq] pages per layer group
  const int32_t* logit_rows = nullptr;    // [num_logit_rows] token indices whose logits are wanted
  int64_t num_tokens = 0;                 // T
  int64_t num_seqs = 0;                   // S
  int64_t max_blocks_per_seq = 0;
  int64_t num_logit_rows = 0;
  int64_t block_size = 0;
};

class LlamaModel {
 public:
  // Loads this rank's slices. merge_column_parallel: Q/K/V, and gate/up, each one stacked matrix where
  // their types agree (one matmul each; bitwise the same outputs as separate matrices, which false keeps).
  // Errors: the reader's (NOT_FOUND for a missing tensor, DATA_LOSS for a tensor of the wrong shape),
  // INVALID_ARGUMENT for an invalid config (an unknown architecture among others).
  static StatusOr<std::unique_ptr<LlamaModel>> Load(const ModelConfig& config, const WeightSource& weights,
                                                    const ShardPlan& shard, bool merge_column_parallel = true);

  // REQUIRES: the batch is consistent (ids < V, slots and block tables within the cache, every position's
  // block present); ModelExecutor validates plans before calling. kv_caches: [L].
  // logits: [num_logit_rows, V_shard]. Errors: the communicator's.
  Status Forward(const ForwardBatch& batch, const std::vector<LayerKvCache>& kv_caches, float* logits,
                 ThreadPool* pool, Communicator& comm);

  const ModelConfig& config() const { return config_; }
  const ShardPlan& shard() const { return shard_; }
  int64_t weight_bytes() const;  // this rank's resident weight bytes

 private:
  struct Layer {
    std::vector<float> attn_norm;        // [hidden]
    MergedColumnParallelLinear qkv;      // parts q [H * D, hidden], k and v [Hkv * D, hidden]
    std::vector<float> q_norm;           // [D] (Architecture::qk_norm), else empty
    std::vector<float> k_norm;           // [D] (Architecture::qk_norm), else empty
    RowParallelLinear o;                 // [hidden, H * D]
    std::vector<float> post_attn_norm;   // [hidden] (Architecture::post_norms), else empty
    std::vector<float> ffn_norm;         // [hidden]
    MergedColumnParallelLinear gate_up;  // parts gate and up, each [ffn_shard, hidden]
    RowParallelLinear down;              // [hidden, ffn_shard]
    std::vector<float> post_ffn_norm;    // [hidden] (Architecture::post_norms), else empty
    std::vector<float> inv_freq;         // [D / 2] this layer's RoPE frequencies
    int sliding_window = 0;              // keys attended back from a position; 0: all
  };

  LlamaModel(const ModelConfig& config, const ShardPlan& shard) : config_(config), shard_(shard) {}
  Status LayerForward(const Layer& layer, const ForwardBatch& batch, const LayerKvCache& cache, ThreadPool* pool,
                      Communicator& comm);
  // Tokens [begin, end): h = post_norm(h) (when the architecture has one), then x += h.
  void AddResidual(const std::vector<float>& post_norm, int64_t begin, int64_t end);

  // Loads layer l's tensors by the architecture's names and layout.
  static StatusOr<Layer> LoadLayer(const ModelConfig& config, const WeightSource& weights, const ShardPlan& shard,
                                   int l, bool merge_column_parallel);

  ModelConfig config_;
  ShardPlan shard_;
  VocabParallelEmbedding embedding_;
  std::vector<Layer> layers_;
  std::vector<float> output_norm_;  // [hidden]
  ParallelLmHead lm_head_;
  bool lm_head_shares_embedding_ = false;

  // Scratch reused across steps (sized to the largest batch seen).
  std::vector<float> x_;       // [T, hidden] residual stream
  std::vector<float> h_;       // [T, hidden] normed input of a block, then its output
  std::vector<float> q_;       // [T, H, D]
  std::vector<float> k_;       // [T, Hkv, D]
  std::vector<float> v_;       // [T, Hkv, D]
  std::vector<float> attn_;    // [T, H, D]
  std::vector<float> gate_;    // [T, ffn_shard]
  std::vector<float> up_;      // [T, ffn_shard]
  std::vector<float> final_;   // [num_logit_rows, hidden]
  // This step's RoPE angles (RopeAngles), for the layers whose frequencies are *rope_freq_: computed by the
  // first layer of a step that needs them, reused by every layer with the same frequencies.
  std::vector<float> rope_cos_, rope_sin_;  // [T, D / 2]
  const std::vector<float>* rope_freq_ = nullptr;
};

}  // namespace tpserve

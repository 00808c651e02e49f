// CudaLlamaModel: one rank's shard of a decoder on a GPU, for every architecture LlamaModel runs (the
// same Architecture description, model/architecture.h). It loads the same slices as LlamaModel
// (ShardPlan ranges, WeightSlice::Load through WeightSource::ReadSlice; fused Phi-3 tensors split the
// same way), keeps them on the device in their stored type, and runs the same layer sequence from the
// kernels/cuda ops:
//   embedding (vocab-parallel, all-reduce; Gemma: times sqrt(hidden)) → per layer RMSNorm → Q,K,V (+ bias)
//   → per-head Q/K norms → RoPE (the layer's frequencies) → KV write → paged attention (the layer's
//   window) → O (row-parallel, all-reduce) → post norm → residual → RMSNorm → gate, up → SiLU·mul or
//   GELU-tanh·mul → down (row-parallel, all-reduce) → post norm → residual → final norm and LM head for
//   the rows that need a token.
// Every op is enqueued on one stream; the all-reduces go through a device-buffer communicator
// (NcclCommunicator on that stream, or the local one at TP 1).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "common/status.h"
#include "kernels/cpu/weight_matrix.h"
#include "model/model_config.h"
#include "model/weight_source.h"
#include "worker/cuda/device_buffer.h"
#include "worker/shard_plan.h"

namespace tpserve {

// The flattened step on the device (see StepBatch): every pointer is a device pointer.
struct DeviceStep {
  const int32_t* token_ids = nullptr;     // [T]
  const int32_t* positions = nullptr;     // [T]
  const int32_t* token_seq = nullptr;     // [T]
  const int32_t* slot_mapping = nullptr;  // [T]
  const int32_t* block_tables = nullptr;  // [S, max_blocks_per_seq]
  const int32_t* logit_rows = nullptr;    // [num_logit_rows]
  int64_t num_tokens = 0;                 // T
  int64_t max_blocks_per_seq = 0;
  int64_t num_logit_rows = 0;
  int64_t block_size = 0;
};

// One layer's paged cache on the device: K and V, each [num_blocks, block_size, Hkv] rows of D values of
// dtype (F32, F16, BF16 or Q8_0, as the CPU's KvPool stores them).
struct DeviceLayerKv {
  void* k = nullptr;
  void* v = nullptr;
  DType dtype = DType::kF32;
};

class CudaLlamaModel {
 public:
  // REQUIRES: the rank's device is current. Errors: the reader's (NOT_FOUND, DATA_LOSS),
  // INVALID_ARGUMENT (invalid config, head_dim above the attention kernel's 256),
  // RESOURCE_EXHAUSTED (device memory).
  static StatusOr<std::unique_ptr<CudaLlamaModel>> Load(const ModelConfig& config, const WeightSource& weights,
                                                        const ShardPlan& shard);

  // Enqueues the step on `stream` (`cublas` bound to it). kv: [L]; logits: device [num_logit_rows,
  // V_shard]. REQUIRES: the step is consistent (StepBatch of a validated plan).
  // Errors: RESOURCE_EXHAUSTED (step buffers), the communicator's.
  Status Forward(const DeviceStep& step, const std::vector<DeviceLayerKv>& kv, float* logits, cudaStream_t stream,
                 cublasHandle_t cublas, Communicator& comm);

  const ModelConfig& config() const { return config_; }
  const ShardPlan& shard() const { return shard_; }
  int64_t weight_bytes() const { return weight_bytes_; }  // device bytes of this rank's weights
  // Weight bytes one step reads: every matrix once plus the embedding rows of its tokens
  // (the LM head over all V_shard rows when any row needs a token).
  int64_t WeightBytesPerStep() const;

 private:
  // A weight slice on the device, in its stored type; matrix.data points into buffer.
  struct DeviceMatrix {
    DeviceBuffer buffer;
    WeightMatrix matrix;
  };
  struct Layer {
    DeviceBuffer attn_norm;       // [hidden] f32
    DeviceMatrix q;               // [H * D, hidden]
    DeviceMatrix k;               // [Hkv * D, hidden]
    DeviceMatrix v;               // [Hkv * D, hidden]
    DeviceBuffer q_bias;          // [H * D] f32 (Architecture::qkv_bias), else empty
    DeviceBuffer k_bias;          // [Hkv * D]
    DeviceBuffer v_bias;          // [Hkv * D]
    DeviceBuffer q_norm;          // [D] f32 (Architecture::qk_norm), else empty
    DeviceBuffer k_norm;          // [D]
    DeviceMatrix o;               // [hidden, H * D]
    DeviceBuffer post_attn_norm;  // [hidden] f32 (Architecture::post_norms), else empty
    DeviceBuffer ffn_norm;        // [hidden] f32
    DeviceMatrix gate;            // [ffn_shard, hidden]
    DeviceMatrix up;              // [ffn_shard, hidden]
    DeviceMatrix down;            // [hidden, ffn_shard]
    DeviceBuffer post_ffn_norm;   // [hidden] f32 (Architecture::post_norms), else empty
    DeviceBuffer inv_freq;        // [D / 2] this layer's RoPE frequencies
    int sliding_window = 0;       // keys attended back from a position; 0: all
    int64_t bytes() const;        // device bytes of its weights
  };

  CudaLlamaModel(const ModelConfig& config, const ShardPlan& shard) : config_(config), shard_(shard) {}
  static StatusOr<DeviceMatrix> LoadMatrix(const WeightSource& weights, const std::string& name, int64_t rows,
                                           int64_t cols, int64_t row_begin, int64_t row_end, int64_t col_begin,
                                           int64_t col_end);
  // Loads layer l's tensors by the architecture's names and layout (as LlamaModel::LoadLayer).
  static StatusOr<Layer> LoadLayer(const ModelConfig& config, const WeightSource& weights, const ShardPlan& shard,
                                   int l);
  Status GrowScratch(int64_t num_tokens, int64_t num_logit_rows);
  Status LayerForward(const Layer& layer, const DeviceStep& step, const DeviceLayerKv& kv, cudaStream_t stream,
                      cublasHandle_t cublas, Communicator& comm);
  // y[T, w.rows] = x · wᵀ summed over the group (a row-parallel layer: the all-reduce is here).
  Status RowParallelForward(const DeviceMatrix& w, const float* x, int64_t num_tokens, float* y,
                            cudaStream_t stream, cublasHandle_t cublas, Communicator& comm);

  ModelConfig config_;
  ShardPlan shard_;
  int64_t weight_bytes_ = 0;
  DeviceBuffer kv_head_of_q_;  // [H] int32
  DeviceMatrix embedding_;     // [V_shard, hidden]
  std::vector<Layer> layers_;
  DeviceBuffer output_norm_;  // [hidden]
  DeviceMatrix lm_head_;       // [V_shard, hidden]; empty when tied (the embedding serves)
  bool lm_head_shares_embedding_ = false;

  // Step scratch, grown to the largest step seen.
  int64_t scratch_tokens_ = 0;
  int64_t scratch_rows_ = 0;
  DeviceBuffer x_;     // [T, hidden] residual stream
  DeviceBuffer h_;     // [T, hidden] normed input of a block, then its output
  DeviceBuffer q_;     // [T, H, D]
  DeviceBuffer k_;     // [T, Hkv, D]
  DeviceBuffer v_;     // [T, Hkv, D]
  DeviceBuffer attn_;  // [T, H, D]
  DeviceBuffer gate_;  // [T, ffn_shard]
  DeviceBuffer up_;    // [T, ffn_shard]
  DeviceBuffer final_;  // [num_logit_rows, hidden]
};

}  // namespace tpserve

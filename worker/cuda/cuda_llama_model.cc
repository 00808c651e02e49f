#include "worker/cuda/cuda_llama_model.h"

#include <cmath>
#include <string>

#include "kernels/cuda/ops.h"
#include "worker/cuda/cuda_status.h"
#include "worker/layer_weights.h"
#include "worker/parallel_linear.h"

namespace tpserve {
namespace {

// Largest head_dim the CUDA paged attention takes (kernels/cuda/paged_attention.cu).
constexpr int kMaxCudaHeadDim = 256;

// Elements [begin, end) of a 1-D weight (a norm, this rank's rows of a bias) as f32 on the device.
StatusOr<DeviceBuffer> LoadDeviceVector(const WeightSource& weights, const std::string& name, int64_t size,
                                        int64_t begin, int64_t end) {
  ASSIGN_OR_RETURN(std::vector<float> values, LoadVectorSlice(weights, name, size, begin, end));
  return DeviceBuffer::FromHost(values.data(), values.size() * sizeof(float), name.c_str());
}

StatusOr<DeviceBuffer> LoadDeviceVector(const WeightSource& weights, const std::string& name, int64_t size) {
  return LoadDeviceVector(weights, name, size, 0, size);
}

// The same, or an empty buffer when the architecture has no such weight (name "").
StatusOr<DeviceBuffer> LoadOptionalDeviceVector(const WeightSource& weights, const std::string& name, int64_t size) {
  if (name.empty()) return DeviceBuffer();
  return LoadDeviceVector(weights, name, size);
}

Status GrowFloats(DeviceBuffer& buffer, int64_t count, const char* what) {
  return buffer.Reserve(static_cast<size_t>(count) * sizeof(float), what);
}

}  // namespace

StatusOr<CudaLlamaModel::DeviceMatrix> CudaLlamaModel::LoadMatrix(const WeightSource& weights, const std::string& name,
                                                                  int64_t rows, int64_t cols, int64_t row_begin,
                                                                  int64_t row_end, int64_t col_begin,
                                                                  int64_t col_end) {
  ASSIGN_OR_RETURN(WeightSlice slice, WeightSlice::Load(weights, name, rows, cols, row_begin, row_end, col_begin, col_end));
  DeviceMatrix device;
  device.matrix = slice.matrix();
  ASSIGN_OR_RETURN(device.buffer, DeviceBuffer::FromHost(slice.matrix().data, slice.bytes(), name.c_str()));
  device.matrix.data = device.buffer.get();
  return device;
}

int64_t CudaLlamaModel::Layer::bytes() const {
  int64_t total = 0;
  for (const DeviceBuffer* b : {&attn_norm, &q_bias, &k_bias, &v_bias, &q_norm, &k_norm, &post_attn_norm, &ffn_norm,
                                &post_ffn_norm}) {
    total += static_cast<int64_t>(b->bytes());
  }
  for (const DeviceMatrix* m : {&q, &k, &v, &o, &gate, &up, &down}) total += static_cast<int64_t>(m->buffer.bytes());
  return total;
}

StatusOr<CudaLlamaModel::Layer> CudaLlamaModel::LoadLayer(const ModelConfig& config, const WeightSource& weights,
                                                          const ShardPlan& shard, int l) {
  const LayerWeights plan = PlanLayerWeights(config, shard, l);
  const int64_t hidden = config.hidden_size;
  // A column-parallel part: its rows of its (possibly fused) tensor, and its bias rows if any.
  auto load_part = [&](const MergedColumnParallelLinear::Part& part, DeviceMatrix* matrix,
                       DeviceBuffer* bias) -> Status {
    ASSIGN_OR_RETURN(*matrix, LoadMatrix(weights, part.name, part.out_features, hidden, part.row_begin, part.row_end,
                                         0, hidden));
    if (!part.bias.empty()) {
      ASSIGN_OR_RETURN(*bias, LoadDeviceVector(weights, part.bias, part.out_features, part.row_begin, part.row_end));
    }
    return OkStatus();
  };
  Layer layer;
  DeviceBuffer no_bias;  // gate and up have none
  ASSIGN_OR_RETURN(layer.attn_norm, LoadDeviceVector(weights, plan.attn_norm, hidden));
  RETURN_IF_ERROR(load_part(plan.qkv[0], &layer.q, &layer.q_bias));
  RETURN_IF_ERROR(load_part(plan.qkv[1], &layer.k, &layer.k_bias));
  RETURN_IF_ERROR(load_part(plan.qkv[2], &layer.v, &layer.v_bias));
  ASSIGN_OR_RETURN(layer.q_norm, LoadOptionalDeviceVector(weights, plan.q_norm, config.head_dim));
  ASSIGN_OR_RETURN(layer.k_norm, LoadOptionalDeviceVector(weights, plan.k_norm, config.head_dim));
  ASSIGN_OR_RETURN(layer.o, LoadMatrix(weights, plan.attn_output, hidden, int64_t{config.num_heads} * config.head_dim,
                                       0, hidden, shard.q_row_begin(), shard.q_row_end()));
  ASSIGN_OR_RETURN(layer.post_attn_norm, LoadOptionalDeviceVector(weights, plan.post_attn_norm, hidden));
  ASSIGN_OR_RETURN(layer.ffn_norm, LoadDeviceVector(weights, plan.ffn_norm, hidden));
  RETURN_IF_ERROR(load_part(plan.gate_up[0], &layer.gate, &no_bias));
  RETURN_IF_ERROR(load_part(plan.gate_up[1], &layer.up, &no_bias));
  ASSIGN_OR_RETURN(layer.down, LoadMatrix(weights, plan.ffn_down, hidden, config.ffn_size, 0, hidden, shard.ffn_begin,
                                          shard.ffn_end));
  ASSIGN_OR_RETURN(layer.post_ffn_norm, LoadOptionalDeviceVector(weights, plan.post_ffn_norm, hidden));
  ASSIGN_OR_RETURN(layer.inv_freq, DeviceBuffer::FromHost(plan.inv_freq.data(), plan.inv_freq.size() * sizeof(float),
                                                          "RoPE inverse frequencies"));
  layer.sliding_window = plan.sliding_window;
  return layer;
}

StatusOr<std::unique_ptr<CudaLlamaModel>> CudaLlamaModel::Load(const ModelConfig& config, const WeightSource& weights,
                                                               const ShardPlan& shard) {
  RETURN_IF_ERROR(config.Validate());
  if (config.head_dim > kMaxCudaHeadDim) {
    return InvalidArgument("head_dim " + std::to_string(config.head_dim) + " exceeds the CUDA attention's " +
                           std::to_string(kMaxCudaHeadDim));
  }
  std::unique_ptr<CudaLlamaModel> model(new CudaLlamaModel(config, shard));
  ASSIGN_OR_RETURN(model->kv_head_of_q_,
                   DeviceBuffer::FromHost(shard.kv_head_of_q.data(), shard.kv_head_of_q.size() * sizeof(int32_t),
                                          "KV head of each query head"));

  const int64_t hidden = config.hidden_size;
  const int64_t vocab = config.vocab_size;
  ASSIGN_OR_RETURN(model->embedding_, LoadMatrix(weights, "token_embd.weight", vocab, hidden, shard.vocab_begin,
                                                 shard.vocab_end, 0, hidden));
  for (int l = 0; l < config.num_layers; ++l) {
    ASSIGN_OR_RETURN(Layer layer, LoadLayer(config, weights, shard, l));
    model->weight_bytes_ += layer.bytes();
    model->layers_.push_back(std::move(layer));
  }
  ASSIGN_OR_RETURN(model->output_norm_, LoadDeviceVector(weights, "output_norm.weight", hidden));
  if (weights.Find("output.weight") != nullptr) {
    ASSIGN_OR_RETURN(model->lm_head_, LoadMatrix(weights, "output.weight", vocab, hidden, shard.vocab_begin,
                                                 shard.vocab_end, 0, hidden));
  } else {
    model->lm_head_shares_embedding_ = true;
  }
  model->weight_bytes_ += static_cast<int64_t>(model->embedding_.buffer.bytes() + model->output_norm_.bytes() +
                                               model->lm_head_.buffer.bytes());
  return model;
}

int64_t CudaLlamaModel::WeightBytesPerStep() const {
  int64_t bytes = static_cast<int64_t>(output_norm_.bytes());
  for (const Layer& layer : layers_) bytes += layer.bytes();
  const DeviceMatrix& head = lm_head_shares_embedding_ ? embedding_ : lm_head_;
  return bytes + static_cast<int64_t>(head.buffer.bytes());
}

Status CudaLlamaModel::GrowScratch(int64_t num_tokens, int64_t num_logit_rows) {
  const int64_t hidden = config_.hidden_size;
  const int64_t head_dim = config_.head_dim;
  if (num_tokens > scratch_tokens_) {
    const int64_t t = std::max(num_tokens, 2 * scratch_tokens_);  // amortise growth
    RETURN_IF_ERROR(GrowFloats(x_, t * hidden, "residual stream"));
    RETURN_IF_ERROR(GrowFloats(h_, t * hidden, "block activations"));
    RETURN_IF_ERROR(GrowFloats(q_, t * shard_.num_heads() * head_dim, "queries"));
    RETURN_IF_ERROR(GrowFloats(k_, t * shard_.num_kv_heads() * head_dim, "keys"));
    RETURN_IF_ERROR(GrowFloats(v_, t * shard_.num_kv_heads() * head_dim, "values"));
    RETURN_IF_ERROR(GrowFloats(attn_, t * shard_.num_heads() * head_dim, "attention output"));
    RETURN_IF_ERROR(GrowFloats(gate_, t * shard_.ffn_shard(), "FFN gate"));
    RETURN_IF_ERROR(GrowFloats(up_, t * shard_.ffn_shard(), "FFN up"));
    scratch_tokens_ = t;
  }
  if (num_logit_rows > scratch_rows_) {
    RETURN_IF_ERROR(GrowFloats(final_, num_logit_rows * hidden, "final hidden rows"));
    scratch_rows_ = num_logit_rows;
  }
  return OkStatus();
}

Status CudaLlamaModel::RowParallelForward(const DeviceMatrix& w, const float* x, int64_t num_tokens, float* y,
                                          cudaStream_t stream, cublasHandle_t cublas, Communicator& comm) {
  if (w.matrix.cols == 0) {  // a rank with no input features contributes zeros
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(y, 0, num_tokens * w.matrix.rows * sizeof(float), stream));
  } else {
    cuda::MatMul(cublas, w.matrix, x, num_tokens, y, stream);
  }
  return comm.AllReduceSum(y, static_cast<size_t>(num_tokens * w.matrix.rows));
}

Status CudaLlamaModel::Forward(const DeviceStep& step, const std::vector<DeviceLayerKv>& kv, float* logits,
                               cudaStream_t stream, cublasHandle_t cublas, Communicator& comm) {
  CHECK_EQ(kv.size(), layers_.size());
  const int64_t num_tokens = step.num_tokens;
  const int64_t hidden = config_.hidden_size;
  RETURN_IF_ERROR(GrowScratch(num_tokens, step.num_logit_rows));
  float* x = x_.as<float>();

  cuda::EmbeddingLookup(embedding_.matrix, shard_.vocab_begin, step.token_ids, num_tokens, x, stream);
  RETURN_IF_ERROR(comm.AllReduceSum(x, static_cast<size_t>(num_tokens * hidden)));
  if (config_.arch().scale_embedding) cuda::Scale(x, num_tokens * hidden, std::sqrt(static_cast<float>(hidden)), stream);
  for (size_t l = 0; l < layers_.size(); ++l) {
    RETURN_IF_ERROR(LayerForward(layers_[l], step, kv[l], stream, cublas, comm));
  }

  // Only the rows that need a token go through the final norm and the LM head.
  float* final_rows = final_.as<float>();
  cuda::GatherRows(x, step.logit_rows, step.num_logit_rows, hidden, final_rows, stream);
  cuda::RmsNorm(final_rows, output_norm_.as<float>(), step.num_logit_rows, hidden, config_.rms_eps, final_rows, stream);
  const DeviceMatrix& head = lm_head_shares_embedding_ ? embedding_ : lm_head_;
  cuda::MatMul(cublas, head.matrix, final_rows, step.num_logit_rows, logits, stream);
  return OkStatus();
}

Status CudaLlamaModel::LayerForward(const Layer& layer, const DeviceStep& step, const DeviceLayerKv& kv,
                                    cudaStream_t stream, cublasHandle_t cublas, Communicator& comm) {
  const int64_t num_tokens = step.num_tokens;
  const int64_t hidden = config_.hidden_size;
  const int64_t head_dim = config_.head_dim;
  const int64_t num_heads = shard_.num_heads();
  const int64_t num_kv_heads = shard_.num_kv_heads();
  float* x = x_.as<float>();
  float* h = h_.as<float>();
  float* q = q_.as<float>();
  float* k = k_.as<float>();
  float* v = v_.as<float>();
  float* gate = gate_.as<float>();

  // Attention block.
  cuda::RmsNorm(x, layer.attn_norm.as<float>(), num_tokens, hidden, config_.rms_eps, h, stream);
  cuda::MatMul(cublas, layer.q.matrix, h, num_tokens, q, stream);
  cuda::MatMul(cublas, layer.k.matrix, h, num_tokens, k, stream);
  cuda::MatMul(cublas, layer.v.matrix, h, num_tokens, v, stream);
  if (layer.q_bias.bytes() > 0) {
    cuda::AddBias(q, layer.q_bias.as<float>(), num_tokens, num_heads * head_dim, stream);
    cuda::AddBias(k, layer.k_bias.as<float>(), num_tokens, num_kv_heads * head_dim, stream);
    cuda::AddBias(v, layer.v_bias.as<float>(), num_tokens, num_kv_heads * head_dim, stream);
  }
  if (layer.q_norm.bytes() > 0) {  // every head its own row of D
    cuda::RmsNorm(q, layer.q_norm.as<float>(), num_tokens * num_heads, head_dim, config_.rms_eps, q, stream);
    cuda::RmsNorm(k, layer.k_norm.as<float>(), num_tokens * num_kv_heads, head_dim, config_.rms_eps, k, stream);
  }
  const float* inv_freq = layer.inv_freq.as<float>();
  cuda::ApplyRope(q, step.positions, num_tokens, num_heads, head_dim, inv_freq, config_.rope_layout, stream);
  cuda::ApplyRope(k, step.positions, num_tokens, num_kv_heads, head_dim, inv_freq, config_.rope_layout, stream);
  cuda::WriteKvCache(k, v, step.slot_mapping, num_tokens, num_kv_heads, head_dim, kv.k, kv.v, kv.dtype, stream);

  PagedAttentionArgs args;
  args.q = q;
  args.k_cache = kv.k;
  args.v_cache = kv.v;
  args.kv_dtype = kv.dtype;
  args.token_seq = step.token_seq;
  args.positions = step.positions;
  args.block_tables = step.block_tables;
  args.kv_head_of_q = kv_head_of_q_.as<int32_t>();
  args.max_blocks_per_seq = step.max_blocks_per_seq;
  args.num_tokens = num_tokens;
  args.num_heads = num_heads;
  args.num_kv_heads = num_kv_heads;
  args.head_dim = head_dim;
  args.block_size = step.block_size;
  args.sliding_window = layer.sliding_window;
  args.scale = config_.AttentionScale();
  args.out = attn_.as<float>();
  cuda::PagedAttention(args, stream);

  RETURN_IF_ERROR(RowParallelForward(layer.o, args.out, num_tokens, h, stream, cublas, comm));
  if (layer.post_attn_norm.bytes() > 0) {
    cuda::RmsNorm(h, layer.post_attn_norm.as<float>(), num_tokens, hidden, config_.rms_eps, h, stream);
  }
  cuda::ResidualAdd(x, h, num_tokens * hidden, stream);

  // Feed-forward block.
  cuda::RmsNorm(x, layer.ffn_norm.as<float>(), num_tokens, hidden, config_.rms_eps, h, stream);
  cuda::MatMul(cublas, layer.gate.matrix, h, num_tokens, gate, stream);
  cuda::MatMul(cublas, layer.up.matrix, h, num_tokens, up_.as<float>(), stream);
  switch (config_.arch().activation) {
    case Activation::kSilu: cuda::SiluMul(gate, up_.as<float>(), num_tokens * shard_.ffn_shard(), gate, stream); break;
    case Activation::kGeluTanh:
      cuda::GeluTanhMul(gate, up_.as<float>(), num_tokens * shard_.ffn_shard(), gate, stream);
      break;
  }
  RETURN_IF_ERROR(RowParallelForward(layer.down, gate, num_tokens, h, stream, cublas, comm));
  if (layer.post_ffn_norm.bytes() > 0) {
    cuda::RmsNorm(h, layer.post_ffn_norm.as<float>(), num_tokens, hidden, config_.rms_eps, h, stream);
  }
  cuda::ResidualAdd(x, h, num_tokens * hidden, stream);
  return OkStatus();
}

}  // namespace tpserve

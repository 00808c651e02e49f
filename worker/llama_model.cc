#include "worker/llama_model.h"

#include <cmath>
#include <cstring>
#include <string>

#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/silu_mul.h"

namespace tpserve {
namespace {

std::string BlockName(int layer, const char* what) { return "blk." + std::to_string(layer) + "." + what + ".weight"; }

// A replicated 1-D weight (a norm) as f32.
StatusOr<std::vector<float>> LoadVector(const WeightSource& weights, const std::string& name, int64_t size) {
  const TensorInfo* info = weights.Find(name);
  if (info == nullptr) return NotFound("model has no tensor " + name);
  if (info->shape.size() != 1 || info->shape[0] != size) {
    return DataLoss("tensor " + name + " is not a vector of " + std::to_string(size));
  }
  ASSIGN_OR_RETURN(HostTensor tensor, weights.Read(name));
  return tensor.ToF32();
}

template <typename T>
void Grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

}  // namespace

StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Load(const ModelConfig& config, const WeightSource& weights,
                                                       const ShardPlan& shard, bool merge_column_parallel) {
  if (config.architecture != "llama") return InvalidArgument("unsupported architecture " + config.architecture);
  RETURN_IF_ERROR(config.Validate());
  std::unique_ptr<LlamaModel> model(new LlamaModel(config, shard));
  model->inv_freq_ = config.RopeInverseFrequencies();
  CHECK_EQ(static_cast<int>(model->inv_freq_.size()), config.head_dim / 2);

  const int64_t hidden = config.hidden_size;
  const int64_t q_rows = int64_t{config.num_heads} * config.head_dim;
  const int64_t kv_rows = int64_t{config.num_kv_heads} * config.head_dim;
  ASSIGN_OR_RETURN(model->embedding_, VocabParallelEmbedding::Load(weights, "token_embd.weight", config.vocab_size,
                                                                   hidden, shard.vocab_begin, shard.vocab_end));
  for (int l = 0; l < config.num_layers; ++l) {
    Layer layer;
    ASSIGN_OR_RETURN(layer.attn_norm, LoadVector(weights, BlockName(l, "attn_norm"), hidden));
    ASSIGN_OR_RETURN(layer.qkv,
                     MergedColumnParallelLinear::Load(
                         weights,
                         {{BlockName(l, "attn_q"), q_rows, shard.q_row_begin(), shard.q_row_end()},
                          {BlockName(l, "attn_k"), kv_rows, shard.kv_row_begin(), shard.kv_row_end()},
                          {BlockName(l, "attn_v"), kv_rows, shard.kv_row_begin(), shard.kv_row_end()}},
                         hidden, merge_column_parallel));
    ASSIGN_OR_RETURN(layer.o, RowParallelLinear::Load(weights, BlockName(l, "attn_output"), hidden, q_rows,
                                                      shard.q_row_begin(), shard.q_row_end()));
    ASSIGN_OR_RETURN(layer.ffn_norm, LoadVector(weights, BlockName(l, "ffn_norm"), hidden));
    ASSIGN_OR_RETURN(layer.gate_up,
                     MergedColumnParallelLinear::Load(
                         weights,
                         {{BlockName(l, "ffn_gate"), config.ffn_size, shard.ffn_begin, shard.ffn_end},
                          {BlockName(l, "ffn_up"), config.ffn_size, shard.ffn_begin, shard.ffn_end}},
                         hidden, merge_column_parallel));
    ASSIGN_OR_RETURN(layer.down, RowParallelLinear::Load(weights, BlockName(l, "ffn_down"), hidden,
                                                         config.ffn_size, shard.ffn_begin, shard.ffn_end));
    model->layers_.push_back(std::move(layer));
  }
  ASSIGN_OR_RETURN(model->output_norm_, LoadVector(weights, "output_norm.weight", hidden));
  if (weights.Find("output.weight") != nullptr) {
    ASSIGN_OR_RETURN(model->lm_head_, ParallelLmHead::Load(weights, "output.weight", config.vocab_size, hidden,
                                                           shard.vocab_begin, shard.vocab_end));
  } else {
    model->lm_head_ = ParallelLmHead::Tied(model->embedding_);
    model->lm_head_shares_embedding_ = true;
  }
  return model;
}

int64_t LlamaModel::weight_bytes() const {
  int64_t bytes = embedding_.bytes() + static_cast<int64_t>(output_norm_.size() * sizeof(float));
  if (!lm_head_shares_embedding_) bytes += lm_head_.bytes();
  for (const Layer& layer : layers_) {
    bytes += layer.qkv.bytes() + layer.o.bytes() + layer.gate_up.bytes() + layer.down.bytes();
    bytes += static_cast<int64_t>((layer.attn_norm.size() + layer.ffn_norm.size()) * sizeof(float));
  }
  return bytes;
}

Status LlamaModel::Forward(const ForwardBatch& batch, const std::vector<LayerKvCache>& kv_caches, float* logits,
                           ThreadPool* pool, Communicator& comm) {
  CHECK_EQ(kv_caches.size(), layers_.size());
  const int64_t num_tokens = batch.num_tokens;
  const int64_t hidden = config_.hidden_size;
  const int64_t head_dim = config_.head_dim;
  Grow(x_, num_tokens * hidden);
  Grow(h_, num_tokens * hidden);
  Grow(q_, num_tokens * shard_.num_heads() * head_dim);
  Grow(k_, num_tokens * shard_.num_kv_heads() * head_dim);
  Grow(v_, num_tokens * shard_.num_kv_heads() * head_dim);
  Grow(attn_, num_tokens * shard_.num_heads() * head_dim);
  Grow(gate_, num_tokens * shard_.ffn_shard());
  Grow(up_, num_tokens * shard_.ffn_shard());

  RETURN_IF_ERROR(embedding_.Forward(batch.token_ids, num_tokens, x_.data(), comm));
  for (size_t l = 0; l < layers_.size(); ++l) {
    RETURN_IF_ERROR(LayerForward(layers_[l], batch, kv_caches[l], pool, comm));
  }

  // Only the rows that need a token go through the final norm and the LM head.
  Grow(final_, batch.num_logit_rows * hidden);
  for (int64_t r = 0; r < batch.num_logit_rows; ++r) {
    const int64_t t = batch.logit_rows[r];
    CHECK(t >= 0 && t < num_tokens) << t;
    std::memcpy(final_.data() + r * hidden, x_.data() + t * hidden, hidden * sizeof(float));
  }
  RmsNorm(final_.data(), output_norm_.data(), batch.num_logit_rows, hidden, config_.rms_eps, final_.data());
  lm_head_.Forward(final_.data(), batch.num_logit_rows, logits, pool);
  return OkStatus();
}

Status LlamaModel::LayerForward(const Layer& layer, const ForwardBatch& batch, const LayerKvCache& cache,
                                ThreadPool* pool, Communicator& comm) {
  const int64_t num_tokens = batch.num_tokens;
  const int64_t hidden = config_.hidden_size;
  const int64_t head_dim = config_.head_dim;
  const int64_t num_heads = shard_.num_heads();
  const int64_t num_kv_heads = shard_.num_kv_heads();

  // Attention block.
  RmsNorm(x_.data(), layer.attn_norm.data(), num_tokens, hidden, config_.rms_eps, h_.data());
  float* const qkv_out[] = {q_.data(), k_.data(), v_.data()};
  layer.qkv.Forward(h_.data(), num_tokens, qkv_out, pool);
  ApplyRope(q_.data(), batch.positions, num_tokens, num_heads, head_dim, inv_freq_.data(), config_.rope_layout);
  ApplyRope(k_.data(), batch.positions, num_tokens, num_kv_heads, head_dim, inv_freq_.data(), config_.rope_layout);
  WriteKvCache(k_.data(), v_.data(), batch.slot_mapping, num_tokens, num_kv_heads, head_dim, cache.k, cache.v);

  PagedAttentionArgs args;
  args.q = q_.data();
  args.k_cache = cache.k;
  args.v_cache = cache.v;
  args.token_seq = batch.token_seq;
  args.positions = batch.positions;
  args.block_tables = batch.block_tables;
  args.kv_head_of_q = shard_.kv_head_of_q.data();
  args.max_blocks_per_seq = batch.max_blocks_per_seq;
  args.num_tokens = num_tokens;
  args.num_heads = num_heads;
  args.num_kv_heads = num_kv_heads;
  args.head_dim = head_dim;
  args.block_size = batch.block_size;
  args.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  args.out = attn_.data();
  PagedAttention(args, pool);

  RETURN_IF_ERROR(layer.o.Forward(attn_.data(), num_tokens, h_.data(), pool, comm));
  for (int64_t i = 0; i < num_tokens * hidden; ++i) x_[i] += h_[i];

  // Feed-forward block.
  RmsNorm(x_.data(), layer.ffn_norm.data(), num_tokens, hidden, config_.rms_eps, h_.data());
  float* const gate_up_out[] = {gate_.data(), up_.data()};
  layer.gate_up.Forward(h_.data(), num_tokens, gate_up_out, pool);
  SiluMul(gate_.data(), up_.data(), num_tokens * shard_.ffn_shard(), gate_.data());
  RETURN_IF_ERROR(layer.down.Forward(gate_.data(), num_tokens, h_.data(), pool, comm));
  for (int64_t i = 0; i < num_tokens * hidden; ++i) x_[i] += h_[i];
  return OkStatus();
}

}  // namespace tpserve

#include "worker/llama_model.h"

#include <cmath>
#include <cstring>
#include <string>

#include "kernels/cpu/gelu_tanh_mul.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/silu_mul.h"

namespace tpserve {
namespace {

std::string BlockName(int layer, const char* what, const char* kind = "weight") {
  return "blk." + std::to_string(layer) + "." + what + "." + kind;
}

int64_t VectorBytes(const std::vector<float>& v) { return static_cast<int64_t>(v.size() * sizeof(float)); }

// A replicated 1-D weight (a norm) as f32.
StatusOr<std::vector<float>> LoadVector(const WeightSource& weights, const std::string& name, int64_t size) {
  return LoadVectorSlice(weights, name, size, 0, size);
}

template <typename T>
void Grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

}  // namespace

StatusOr<LlamaModel::Layer> LlamaModel::LoadLayer(const ModelConfig& config, const WeightSource& weights,
                                                  const ShardPlan& shard, int l, bool merge_column_parallel) {
  const Architecture& arch = config.arch();
  const int64_t hidden = config.hidden_size;
  const int64_t head_dim = config.head_dim;
  const int64_t q_rows = int64_t{config.num_heads} * head_dim;
  const int64_t kv_rows = int64_t{config.num_kv_heads} * head_dim;
  const int64_t ffn = config.ffn_size;
  Layer layer;
  ASSIGN_OR_RETURN(layer.attn_norm, LoadVector(weights, BlockName(l, "attn_norm"), hidden));
  std::vector<MergedColumnParallelLinear::Part> qkv;
  if (arch.fused_qkv) {
    // One [Q; K; V] tensor: each part's rows sit at its offset, this rank's heads of each.
    const std::string name = BlockName(l, "attn_qkv");
    const int64_t total = q_rows + 2 * kv_rows;
    qkv = {{name, total, shard.q_row_begin(), shard.q_row_end()},
           {name, total, q_rows + shard.kv_row_begin(), q_rows + shard.kv_row_end()},
           {name, total, q_rows + kv_rows + shard.kv_row_begin(), q_rows + kv_rows + shard.kv_row_end()}};
  } else {
    qkv = {{BlockName(l, "attn_q"), q_rows, shard.q_row_begin(), shard.q_row_end()},
           {BlockName(l, "attn_k"), kv_rows, shard.kv_row_begin(), shard.kv_row_end()},
           {BlockName(l, "attn_v"), kv_rows, shard.kv_row_begin(), shard.kv_row_end()}};
    if (arch.qkv_bias) {
      qkv[0].bias = BlockName(l, "attn_q", "bias");
      qkv[1].bias = BlockName(l, "attn_k", "bias");
      qkv[2].bias = BlockName(l, "attn_v", "bias");
    }
  }
  ASSIGN_OR_RETURN(layer.qkv, MergedColumnParallelLinear::Load(weights, qkv, hidden, merge_column_parallel));
  if (arch.qk_norm) {
    ASSIGN_OR_RETURN(layer.q_norm, LoadVector(weights, BlockName(l, "attn_q_norm"), head_dim));
    ASSIGN_OR_RETURN(layer.k_norm, LoadVector(weights, BlockName(l, "attn_k_norm"), head_dim));
  }
  ASSIGN_OR_RETURN(layer.o, RowParallelLinear::Load(weights, BlockName(l, "attn_output"), hidden, q_rows,
                                                    shard.q_row_begin(), shard.q_row_end()));
  ASSIGN_OR_RETURN(layer.ffn_norm, LoadVector(weights, BlockName(l, "ffn_norm"), hidden));
  std::vector<MergedColumnParallelLinear::Part> gate_up;
  if (arch.fused_gate_up) {
    // One [gate; up] tensor named ffn_up: this rank's columns of each half.
    const std::string name = BlockName(l, "ffn_up");
    gate_up = {{name, 2 * ffn, shard.ffn_begin, shard.ffn_end}, {name, 2 * ffn, ffn + shard.ffn_begin, ffn + shard.ffn_end}};
  } else {
    gate_up = {{BlockName(l, "ffn_gate"), ffn, shard.ffn_begin, shard.ffn_end},
               {BlockName(l, "ffn_up"), ffn, shard.ffn_begin, shard.ffn_end}};
  }
  ASSIGN_OR_RETURN(layer.gate_up, MergedColumnParallelLinear::Load(weights, gate_up, hidden, merge_column_parallel));
  ASSIGN_OR_RETURN(layer.down, RowParallelLinear::Load(weights, BlockName(l, "ffn_down"), hidden, ffn,
                                                       shard.ffn_begin, shard.ffn_end));
  if (arch.post_norms) {
    ASSIGN_OR_RETURN(layer.post_attn_norm, LoadVector(weights, BlockName(l, "post_attention_norm"), hidden));
    ASSIGN_OR_RETURN(layer.post_ffn_norm, LoadVector(weights, BlockName(l, "post_ffw_norm"), hidden));
  }
  layer.inv_freq = config.RopeInverseFrequencies(l);
  CHECK_EQ(static_cast<int64_t>(layer.inv_freq.size()), head_dim / 2);
  layer.sliding_window = config.IsSlidingLayer(l) ? config.sliding_window : 0;
  return layer;
}

StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Load(const ModelConfig& config, const WeightSource& weights,
                                                       const ShardPlan& shard, bool merge_column_parallel) {
  RETURN_IF_ERROR(config.Validate());
  std::unique_ptr<LlamaModel> model(new LlamaModel(config, shard));
  const int64_t hidden = config.hidden_size;
  ASSIGN_OR_RETURN(model->embedding_, VocabParallelEmbedding::Load(weights, "token_embd.weight", config.vocab_size,
                                                                   hidden, shard.vocab_begin, shard.vocab_end));
  for (int l = 0; l < config.num_layers; ++l) {
    ASSIGN_OR_RETURN(Layer layer, LoadLayer(config, weights, shard, l, merge_column_parallel));
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
    for (const std::vector<float>* norm : {&layer.attn_norm, &layer.q_norm, &layer.k_norm, &layer.post_attn_norm,
                                           &layer.ffn_norm, &layer.post_ffn_norm}) {
      bytes += VectorBytes(*norm);
    }
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
  if (config_.arch().scale_embedding) {
    const float scale = std::sqrt(static_cast<float>(hidden));
    for (int64_t i = 0; i < num_tokens * hidden; ++i) x_[i] *= scale;
  }
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
  if (!layer.q_norm.empty()) {  // every head its own row of D
    RmsNorm(q_.data(), layer.q_norm.data(), num_tokens * num_heads, head_dim, config_.rms_eps, q_.data());
    RmsNorm(k_.data(), layer.k_norm.data(), num_tokens * num_kv_heads, head_dim, config_.rms_eps, k_.data());
  }
  ApplyRope(q_.data(), batch.positions, num_tokens, num_heads, head_dim, layer.inv_freq.data(), config_.rope_layout);
  ApplyRope(k_.data(), batch.positions, num_tokens, num_kv_heads, head_dim, layer.inv_freq.data(), config_.rope_layout);
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
  args.sliding_window = layer.sliding_window;
  args.scale = config_.AttentionScale();
  args.out = attn_.data();
  PagedAttention(args, pool);

  RETURN_IF_ERROR(layer.o.Forward(attn_.data(), num_tokens, h_.data(), pool, comm));
  if (!layer.post_attn_norm.empty()) {
    RmsNorm(h_.data(), layer.post_attn_norm.data(), num_tokens, hidden, config_.rms_eps, h_.data());
  }
  for (int64_t i = 0; i < num_tokens * hidden; ++i) x_[i] += h_[i];

  // Feed-forward block.
  RmsNorm(x_.data(), layer.ffn_norm.data(), num_tokens, hidden, config_.rms_eps, h_.data());
  float* const gate_up_out[] = {gate_.data(), up_.data()};
  layer.gate_up.Forward(h_.data(), num_tokens, gate_up_out, pool);
  switch (config_.arch().activation) {
    case Activation::kSilu: SiluMul(gate_.data(), up_.data(), num_tokens * shard_.ffn_shard(), gate_.data()); break;
    case Activation::kGeluTanh:
      GeluTanhMul(gate_.data(), up_.data(), num_tokens * shard_.ffn_shard(), gate_.data());
      break;
  }
  RETURN_IF_ERROR(layer.down.Forward(gate_.data(), num_tokens, h_.data(), pool, comm));
  if (!layer.post_ffn_norm.empty()) {
    RmsNorm(h_.data(), layer.post_ffn_norm.data(), num_tokens, hidden, config_.rms_eps, h_.data());
  }
  for (int64_t i = 0; i < num_tokens * hidden; ++i) x_[i] += h_[i];
  return OkStatus();
}

}  // namespace tpserve
